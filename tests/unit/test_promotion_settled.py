"""The promotion gate settles a move that can never be compared (the diff review): a red ``not_comparable`` row, so
``remember`` runs and the move is not compared again every poll; a transient failure is raised, so the move stays
unseen and the next run compares it. Pure: ``compared_row`` is given the comparison as a callable."""

from __future__ import annotations

import pytest

pytest.importorskip("airflow")

from auditor.errors import BadInput, InfrastructureError, LineageIncomplete  # noqa: E402
from auditor.lineage.findings import Finding  # noqa: E402

MOVE = {"model": "m", "alias": "champion", "candidate": "models:/m/2", "incumbent": "models:/m/1"}


def _raise(exc):
    def call():
        raise exc
    return call


@pytest.mark.parametrize("exc", [BadInput("models:/m/1 has no run record"), LineageIncomplete([Finding(code="seeds.missing", path="seeds", severity="blocking", message="no seed recorded",
                                                            hint="pass seed= to track()")])])
def test_a_move_that_can_never_be_compared_is_a_settled_red_row(exc):
    from auditor.airflow.promotion import compared_row

    row = compared_row(MOVE, _raise(exc))
    assert row["gate"] == "not_comparable" and str(exc) in row["words"] and row["candidate"] == "models:/m/2"
    from airflow.sdk.exceptions import AirflowFailException

    from auditor.airflow.promotion import PromotionGate

    with pytest.raises(AirflowFailException, match="not comparable"):  # the gate shows it red, never retried
        PromotionGate(row=row).execute({})


def test_a_transient_failure_is_raised_so_the_move_is_compared_again():
    from auditor.airflow.promotion import compared_row

    with pytest.raises(InfrastructureError):
        compared_row(MOVE, _raise(InfrastructureError("the registry did not answer")))
