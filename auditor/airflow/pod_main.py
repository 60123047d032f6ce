"""The rebuild pod's entry point: one call through the audit door (``Session.audit``), as the Celery task makes.

Exit status is what ``KubernetesPodOperator`` turns into task success or failure:
0 when the audit reached a published verdict (the ``verdict`` task after it judges it); an
ERROR on a try with retries left (``--last-try false``) is not published but exit 3, so that
Airflow's retry audits afresh, as on the Celery route; otherwise the code the one table in
``auditor.errors`` gives the exception: 3 when publishing itself failed (``InfrastructureError``)
or the entry point crashed, so Airflow retries the pod (publishing is idempotent); 2 for a
malformed setting or argument (an unrendered date template included): Airflow's retries cannot
fix it, and the task fails once they are spent.
The last line of output is the result as JSON; when ``KubernetesPodOperator``
collects XCom (its ``/airflow/xcom`` volume is mounted) the result is also
written to ``return.json`` there, so the DAG's publish step receives it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import traceback
from pathlib import Path

from auditor.errors import EXIT_OK, TASK_OUTCOMES, ReproError, describe, exit_code
from auditor.uris import REF_HELP

XCOM_DIR = Path("/airflow/xcom")  # KubernetesPodOperator's fixed mount path for the XCom sidecar


def _iso_date(text: str) -> str:
    """``YYYY-MM-DD``; anything else (an unrendered ``{{ … }}`` template) is a usage error, exit 2."""
    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date YYYY-MM-DD") from None


def _flag(text: str) -> bool:
    """``true`` or ``false`` (what ``LAST_TRY_TEMPLATE`` renders to); anything else is a usage error, exit 2."""
    if text not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"{text!r} is not true or false")
    return text == "true"


def main(argv: list[str] | None = None) -> int:
    """Audit and publish one model version; returns the process exit status."""
    parser = argparse.ArgumentParser(prog="python -m auditor.airflow.pod_main", description=__doc__.splitlines()[0])
    parser.add_argument("--ref", required=True, help=REF_HELP)
    parser.add_argument("--date", required=True, type=_iso_date,
                        help="the audit date, YYYY-MM-DD (auditor.airflow.context: the date param, else the logical date)")
    parser.add_argument("--audit-run", required=True, help="the Airflow DAG run that asked for the audit")
    parser.add_argument("--reruns", type=int, default=1)
    parser.add_argument("--last-try", type=_flag, default=True,
                        help="true: publish an ERROR verdict; false (retries left): exit 3 for Airflow's retry instead")
    args = parser.parse_args(argv)

    from auditor.rebuild.runners import trainer_output_to
    from auditor.settings import get_settings
    from auditor.steps import AuditOptions, Session

    try:
        session = Session(get_settings())  # resolved once, here, and passed down
        options = AuditOptions(date=args.date, audit_run=args.audit_run, runner="process", reruns=args.reruns,
                               task=True, last_try=args.last_try)
        with trainer_output_to(sys.stderr):  # the pod's log, which the operator relays into the task log
            result = session.audit(args.ref, options).row
    except Exception as exc:  # the table decides: a setting no retry fixes (2), an outage or a crash (3)
        if not isinstance(exc, ReproError):  # a bug of ours: the pod's log is the only record of its traceback
            traceback.print_exc(file=sys.stderr)
        code = exit_code(exc)
        then = "the task will retry" if TASK_OUTCOMES.get(code) == "retry" else "fix the input"
        print(f"the audit could not be published, {then}: {describe(exc)}", file=sys.stderr)
        return code
    return hand_over(result)


def hand_over(result: object) -> int:
    """A pod's result as its last line of output, and to ``KubernetesPodOperator``'s XCom sidecar when it collects one."""
    text = json.dumps(result, sort_keys=True, default=str)
    if XCOM_DIR.is_dir():
        (XCOM_DIR / "return.json").write_text(text)
    print(text)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
