"""The step layer: one ``Session`` per entry point, one door per verb (see ``auditor.steps.session``).

The CLI, the Airflow tasks, the rebuild pod and the demo open a session from resolved settings and call
its verbs; each verb lives in its own module here (rebuild, calibrate, audit, segments, publish,
nightly, coverage).
"""

from auditor.steps.options import AuditOptions, AuditOutcome
from auditor.steps.session import Session

__all__ = ["AuditOptions", "AuditOutcome", "Session"]
