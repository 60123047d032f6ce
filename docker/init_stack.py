"""One-shot stack initialisation (the compose service ``repro-init``); safe to run again.

1. ``airflow db migrate``: Airflow's metadata schema in PostgreSQL;
2. the ``repro_gpu`` pool, sized by ``REPRO_GPU_POOL_SLOTS``: a task naming a pool that does
   not exist is never scheduled, so the pool must exist before the first nightly run;
3. the buckets named in ``REPRO_BUCKETS`` on ``AWS_ENDPOINT_URL``, versioned; with
   ``REPRO_REQUIRE_OBJECT_LOCK=true`` the reports bucket is created with Object Lock, which S3
   only allows at creation time.

Credentials come from the environment the way boto3 reads them; nothing is printed but names.
"""

from __future__ import annotations

import os
import subprocess
import sys

from auditor.errors import BadInput
from auditor.settings import REPORTS, REQUIRE_OBJECT_LOCK


def migrate() -> None:
    """Create or upgrade Airflow's metadata schema."""
    subprocess.run(["airflow", "db", "migrate"], check=True)


def gpu_pool(slots: int) -> None:
    """The pool rebuild tasks run in: one slot per accelerator the gpu workers hold."""
    subprocess.run(["airflow", "pools", "set", "repro_gpu", str(slots), "repro-audit rebuilds, one per GPU"], check=True)


def buckets(names: list[str], locked: set[str]) -> None:
    """Create each bucket when missing, versioned; those in ``locked`` with Object Lock."""
    import boto3
    from botocore.exceptions import ClientError

    s3 = boto3.client("s3")
    for name in names:
        try:
            s3.head_bucket(Bucket=name)
            print(f"bucket {name}: exists")
            continue
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in {"404", "NoSuchBucket", "NotFound"}:
                raise
        s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=name in locked)
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
        print(f"bucket {name}: created{' with Object Lock' if name in locked else ''}")


def main() -> int:
    try:  # a malformed setting stops the init before anything is created, naming the variable
        REQUIRE_OBJECT_LOCK.get(), REPORTS.get()
    except BadInput as exc:
        print(f"repro-init: {exc}", file=sys.stderr)
        return 2
    migrate()
    gpu_pool(int(os.environ.get("REPRO_GPU_POOL_SLOTS") or 1))
    names = (os.environ.get("REPRO_BUCKETS") or "").split()
    locked: set[str] = set()
    if REQUIRE_OBJECT_LOCK.get():  # a malformed value stops the init, naming the variable
        reports = str(REPORTS.get())
        if reports.startswith("s3://"):
            locked.add(reports[5:].split("/", 1)[0])
    buckets(names, locked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
