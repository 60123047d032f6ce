"""docker/init_stack.py's bucket step, against the loopback S3 server (the Airflow steps are the Airflow CLI)."""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "docker" / "init_stack.py"


@pytest.fixture()
def init_stack():
    spec = importlib.util.spec_from_file_location("init_stack", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_init_step_creates_versioned_buckets_and_locks_the_reports_bucket_when_asked(init_stack, s3_endpoint):
    import boto3

    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    reports, artifacts = f"reports-{uuid.uuid4().hex[:8]}", f"mlflow-{uuid.uuid4().hex[:8]}"
    init_stack.buckets([reports, artifacts], locked={reports})
    init_stack.buckets([reports, artifacts], locked={reports})  # a second start finds them and changes nothing
    for name in (reports, artifacts):
        assert s3.get_bucket_versioning(Bucket=name)["Status"] == "Enabled"
    assert s3.get_object_lock_configuration(Bucket=reports)["ObjectLockConfiguration"]["ObjectLockEnabled"] == "Enabled"
    with pytest.raises(s3.exceptions.ClientError):
        s3.get_object_lock_configuration(Bucket=artifacts)
