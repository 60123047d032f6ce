"""A rerun pod's entry point: one rerun of a mapped calibration (``Session.calibrate_rerun``), as the Celery task makes.

``--ticket`` is one of ``CalibrationPlan.tickets``: the plan and the rerun, JSON. The pod is the sandbox, so the
rerun runs in it with the process runner, as ``auditor.airflow.pod_main`` audits. Its result goes to the reports
store, written once (a pod retried after its result was stored reruns nothing). Exit status from the one table in
``auditor.errors``: 0 stored; 2 a malformed ticket or setting (no retry fixes it); 3 an outage or a crash, so
Airflow retries the pod. The last line of output is what was stored, as JSON, also in ``/airflow/xcom/return.json``
when the operator collects XCom.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback

from auditor.airflow.pod_main import hand_over
from auditor.errors import EXIT_USAGE, ReproError, describe, exit_code


def main(argv: list[str] | None = None) -> int:
    """Run and store one planned rerun; returns the process exit status."""
    parser = argparse.ArgumentParser(prog="python -m auditor.airflow.rerun_pod", description=__doc__.splitlines()[0])
    parser.add_argument("--ticket", required=True, help='{"planned": CalibrationPlan, "item": PlannedRerun}, JSON')
    args = parser.parse_args(argv)

    from pydantic import ValidationError

    from auditor.rebuild.runners import trainer_output_to
    from auditor.settings import get_settings
    from auditor.steps import Session
    from auditor.steps.mapped import CalibrationPlan, PlannedRerun

    try:
        ticket = json.loads(args.ticket)
        planned = CalibrationPlan.model_validate(ticket["planned"]).model_copy(update={"runner": "process"})
        item = PlannedRerun.model_validate(ticket["item"])
    except (ValueError, KeyError, TypeError, ValidationError) as exc:
        print(f"--ticket is not a calibration ticket ({type(exc).__name__}: {exc}); it comes from the DAG's "
              "check_same_seed or plan task", file=sys.stderr)
        return EXIT_USAGE
    try:
        with trainer_output_to(sys.stderr):  # the pod's log, which the operator relays into the task log
            stored = Session(get_settings()).calibrate_rerun(planned, item)
    except Exception as exc:  # the table decides: a setting no retry fixes (2), an outage or a crash (3)
        if not isinstance(exc, ReproError):
            traceback.print_exc(file=sys.stderr)
        print(f"rerun {item.name} of {planned.ref} was not stored: {describe(exc)}", file=sys.stderr)
        return exit_code(exc)
    return hand_over(stored)


if __name__ == "__main__":
    sys.exit(main())
