"""The Object Lock check: when required, publish only into a bucket that keeps every version for long enough.

We ask the bucket for its lock configuration ourselves rather than trusting
that writes would fail: S3-compatible servers (moto among them) accept writes
to buckets whose retention was shortened or downgraded, so a refused write
would never tell us.
"""

from __future__ import annotations

import json

from auditor.errors import BadInput
from auditor.settings import REQUIRE_OBJECT_LOCK
from auditor.storage import BlobStore
from auditor.storage.s3 import S3Store  # boto3 itself is imported only when the store makes a client

DAYS_PER_YEAR = 365


def _config_hint(bucket: str, days: int) -> str:
    config = {"ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": days}}}
    return (
        f"create the bucket with Object Lock enabled, then: aws s3api put-object-lock-configuration --bucket {bucket} "
        f"--object-lock-configuration '{json.dumps(config)}'; or set {REQUIRE_OBJECT_LOCK.name}=false"
    )


def require_object_lock(store: BlobStore, retention_days: int) -> None:
    """Raise ``BadInput`` unless ``store`` is an S3 bucket with default COMPLIANCE retention >= ``retention_days``."""
    if not isinstance(store, S3Store):
        raise BadInput(
            f"{REQUIRE_OBJECT_LOCK.name} is set but {store.uri} is not an S3 bucket, so nothing there is locked",
            hint=f"publish to s3://bucket/prefix with Object Lock, or set {REQUIRE_OBJECT_LOCK.name}=false",
        )
    bucket = store.bucket
    lock = store.object_lock()
    if lock is None:
        raise BadInput(
            f"refusing to publish to s3://{bucket}: the bucket has no Object Lock configuration",
            hint=_config_hint(bucket, retention_days),
        )
    days = (lock.days or 0) or (lock.years or 0) * DAYS_PER_YEAR
    problem = None
    if not lock.enabled:
        problem = "Object Lock is not enabled"
    elif lock.mode != "COMPLIANCE":
        problem = f"its default retention mode is {lock.mode or 'unset'}, not COMPLIANCE (governance mode can be lifted)"
    elif days < retention_days:
        problem = f"its default retention is {days} days, less than the required {retention_days}"
    if problem:
        raise BadInput(f"refusing to publish to s3://{bucket}: {problem}", hint=_config_hint(bucket, retention_days))
