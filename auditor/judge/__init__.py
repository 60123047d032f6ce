"""Judging a rebuild: tolerance bands, calibration, tiered verdicts, weight diffs."""
