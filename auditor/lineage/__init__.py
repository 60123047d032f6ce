"""Lineage: the run record, the gatherers that fill it, and the gate that judges it."""

from auditor.lineage.record import RunRecord

__all__ = ["RunRecord"]
