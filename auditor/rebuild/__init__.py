"""Rebuilding a recorded run: the workspace, the runners, and environment drift."""
