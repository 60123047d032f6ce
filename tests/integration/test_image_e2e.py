"""Train and audit inside the trainer image, end to end, through a real registry on loopback.

The CPU trainer image is built from the real ``docker/Dockerfile`` on a Debian base made from
Debian's packages (tests/fixtures/images.py, cached by recipe digest), pushed to Debian's
``docker-registry`` on 127.0.0.1, and the reference model is trained in a container of it with
``REPRO_IMAGE``/``REPRO_IMAGE_DIGEST`` set to the pushed reference, so the record pins the image.
The model is registered in MLflow (SQLite, bind-mounted at the same path inside the container), the
local image is deleted, and ``repro-audit audit --runner docker`` pulls it back by digest and
rebuilds with no network, a read-only root and a non-root user.

The tests run in order on one module-scoped world: the audit after the tag was moved to another
image, then the registry stopped (ERROR, retryable), then the manifest deleted through the registry
API (NOT_REPRODUCIBLE naming the digest).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from auditor import settings as S
from auditor.contract import ENV_TORCH_THREADS
from tests.fixtures.images import push, record_timing

# the first test pays for the fixtures: on a fresh machine that is building the trainer image (minutes)
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.image_e2e, pytest.mark.timeout(3000)]

REPOSITORY = "repro/trainer"
TAG = "e2e"
MODEL = "credit-scorer"


def _engine_socket(engine) -> str:
    return engine.repro_docker_host  # tests/fixtures/docker.py: the private engine's socket


def _drop_local(engine, repository: str, *also: str) -> None:
    """No local copy of the pushed image is left in the engine: every image named by ``repository``, or by id."""
    doomed = set(also)
    for image in engine.images.list(all=True):
        names = list(image.tags) + list(image.attrs.get("RepoDigests") or [])
        if any(name.startswith(repository + ":") or name.startswith(repository + "@") for name in names):
            doomed.add(image.id)
    import docker

    for _ in range(len(doomed) + 1):  # children first: an image with a dependent child cannot go yet
        for image_id in list(doomed):
            try:
                engine.images.remove(image_id, force=True)
                doomed.discard(image_id)
            except docker.errors.NotFound:
                doomed.discard(image_id)
            except docker.errors.APIError as exc:
                if "dependent child" not in str(exc):
                    raise
    assert not doomed, f"could not remove {doomed}"


class World:
    def __init__(self, root: Path, env: dict[str, str], reference: str, digest: str, version: str, host_socket: str):
        self.root, self.env, self.reference, self.digest, self.version = root, env, reference, digest, version
        self.host_socket = host_socket

    def audit(self, tmp: Path, date: str) -> tuple[int, dict]:
        env = {
            **os.environ,
            **self.env,
            "DOCKER_HOST": self.host_socket,
            S.REPORTS.name: str(tmp / "reports"),
            S.HOME.name: str(tmp / "home"),
            S.RUNNER.name: "docker",
        }
        start = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "auditor", "audit", f"models:/{MODEL}/{self.version}", "--runner", "docker",
             "--json", "--date", date],
            env=env, capture_output=True, text=True, timeout=900, check=False,
        )
        record_timing(f"audit ({date})", time.monotonic() - start)
        try:
            payload = json.loads(result.stdout)
        except ValueError:
            pytest.fail(f"audit printed no JSON (exit {result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        return result.returncode, payload


@pytest.fixture(scope="module")
def world(docker_engine, trainer_image, local_registry, tmp_path_factory) -> World:
    """The reference model trained in a container of the pushed trainer image, and registered."""
    import auditor
    from auditor.demo import base_env, make_project
    from auditor.snapshots import create_snapshot

    repository = f"{local_registry.host}/{REPOSITORY}"
    reference, seconds = push(docker_engine, trainer_image.id, repository, TAG)
    record_timing("push trainer", seconds)
    digest = reference.rsplit("@", 1)[1]
    assert local_registry.manifest_digest(REPOSITORY, TAG) == digest  # read back from the registry itself

    root = tmp_path_factory.mktemp("image-world")
    env = base_env(root)  # it names a signing key and makes it: publishing refuses a missing one
    project = make_project(root / "project")
    subprocess.run([sys.executable, str(project / "make_data.py"), str(root / "data")], cwd=project, check=True,
                   env={**os.environ, **env}, capture_output=True)
    snapshot = create_snapshot(root / "data", env[S.SNAPSHOT_STORE.name]).id
    env["REPRO_TRAIN_DATA"] = f"{env[S.SNAPSHOT_STORE.name]}@{snapshot}"
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=env["MLFLOW_TRACKING_URI"])
    client.create_experiment("reference-model", artifact_location=(root / "artifacts").as_uri())

    from docker.types import Mount

    start = time.monotonic()
    train_env = {
        **{k: v for k, v in env.items() if k != S.HOME.name},
        S.IMAGE.name: f"{repository}:{TAG}",  # what the orchestrator sets: the reference it ran, and its digest
        S.IMAGE_DIGEST.name: digest,
        ENV_TORCH_THREADS: "2",
        "HOME": "/tmp",
    }
    # Training as an orchestrator would run it: the image by digest, the world at the same path inside.
    container = docker_engine.containers.run(
        reference, ["python", "train.py", "epochs=2"], working_dir=str(project), environment=train_env,
        mounts=[Mount(str(root), str(root), type="bind")], network_mode="none", user="0:0", detach=True,
    )
    try:
        status = container.wait(timeout=600)
        log = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    assert status["StatusCode"] == 0, log[-4000:]
    record_timing("train in the trainer image", time.monotonic() - start)
    experiment = client.get_experiment_by_name("reference-model")
    run_id = client.search_runs([experiment.experiment_id], max_results=1)[0].info.run_id
    version = auditor.register_model(run_id, MODEL, tracking_uri=env["MLFLOW_TRACKING_URI"])

    # The tag moves to another image (a one-layer image built here); the record keeps the digest.
    other = docker_engine.images.build(fileobj=_dockerfile(f"FROM {trainer_image.tag}\nLABEL moved=1\n"), tag="repro-audit/moved:1",
                                       rm=True, network_mode="none")[0]
    _, _ = push(docker_engine, other.id, repository, TAG)
    assert local_registry.manifest_digest(REPOSITORY, TAG) not in (None, digest)
    # No local copy of the recorded image (under any name): the audit must pull it by digest.
    _drop_local(docker_engine, repository, trainer_image.id, other.id)
    for image in docker_engine.images.list(all=True):
        assert image.id != trainer_image.id and not any(rd.endswith(digest) for rd in image.attrs.get("RepoDigests") or [])
    return World(root, env, reference, digest, str(version), _engine_socket(docker_engine))


def _dockerfile(text: str):
    import io

    return io.BytesIO(text.encode())


def test_the_record_pins_the_pushed_image(world):
    from mlflow import MlflowClient

    from auditor.registry.mlflow import MlflowRegistry

    registry = MlflowRegistry(tracking_uri=world.env["MLFLOW_TRACKING_URI"])
    record, _ = registry.load_record(registry.resolve(f"models:/{MODEL}/{world.version}"))
    assert record.environment.image_digest == world.digest
    assert record.environment.image_ref.endswith(f"/{REPOSITORY}:{TAG}")
    assert record.environment.python.startswith("3.11")
    assert MlflowClient  # the registry above is MLflow's, read from the host


def test_audit_pulls_by_digest_after_the_tag_moved_and_reproduces_bitwise(world, docker_engine, tmp_path):
    code, payload = world.audit(tmp_path, "2026-01-01")
    result = payload["result"]
    assert payload["verdict"] == "REPRODUCED_BITWISE", (result.get("error"), result.get("findings"), result.get("log_tail", "")[-3000:])
    assert code == 0
    drift = result["drift"]
    assert drift is not None and not any(drift[k] for k in ("added", "removed", "changed", "fields")), drift
    assert result["runner"] == "docker"
    # pulled by digest: the engine holds the recorded image again, under its repo digest
    assert any(world.digest in rd for image in docker_engine.images.list() for rd in image.attrs.get("RepoDigests") or [])


def test_with_the_registry_down_the_audit_is_an_error_to_retry(world, docker_engine, local_registry, tmp_path):
    _drop_local(docker_engine, f"{local_registry.host}/{REPOSITORY}")
    local_registry.stop()
    try:
        code, payload = world.audit(tmp_path, "2026-01-02")
    finally:
        local_registry.start()
    assert payload["verdict"] == "ERROR", payload["result"].get("error")
    assert code == 3
    assert world.digest in payload["result"]["error"] and "retry" in payload["result"]["error"]


def test_with_the_image_deleted_from_the_registry_the_audit_is_not_reproducible_naming_the_digest(
    world, docker_engine, local_registry, tmp_path
):
    _drop_local(docker_engine, f"{local_registry.host}/{REPOSITORY}")
    local_registry.delete_manifest(REPOSITORY, world.digest)
    assert local_registry.manifest_digest(REPOSITORY, world.digest) is None
    code, payload = world.audit(tmp_path, "2026-01-03")
    assert payload["verdict"] == "NOT_REPRODUCIBLE", payload["result"].get("error")
    assert code == 1
    assert world.digest in payload["result"]["error"]
