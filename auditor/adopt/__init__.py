"""Adopting a registry trained without the SDK: a lineage assessment of plain-MLflow versions.

``rules``: the pure classification (each input pinned, named but mutable, or missing, with the one-line fix);
``mlflow_reader``: what MLflow holds about a version, read at the edge; ``assess``: the assessment as an
audit result (verdict LINEAGE_INSUFFICIENT) that the existing publish path signs and ledgers; ``supplied``:
a record an owner attaches after training (``repro-audit adopt --data ...``).
"""
