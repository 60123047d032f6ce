"""One declaration per setting: each parses its default, a malformed value names its variable, defaults are stated once."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import logging
from dataclasses import fields
from pathlib import Path

import pytest

from auditor import settings as settings_module
from auditor.airflow import check_route, parse_time_pod, rebuild_backend
from auditor.airflow.kubernetes import PodSettings
from auditor.errors import BadInput
from auditor.settings import (
    BY_NAME,
    KUBERNETES_SETTINGS,
    SETTINGS,
    TYPES,
    KubernetesSettings,
    Setting,
    Settings,
    describe,
    get_settings,
)

with contextlib.suppress(ImportError):  # croniter 7 asks `file` for the architecture on import: before the unit guard
    import croniter  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "registry.example/ml/repro-trainer@sha256:" + "ab" * 32
MALFORMED = {"int": "ten", "float": "four hours", "bool": "maybe", "choice": "slurm", "pairs": "no-equals-sign",
             "cron": "every night"}


def test_every_setting_is_declared_once_with_a_type_a_help_line_and_a_field():
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names)) and set(BY_NAME) == set(names)
    assert all(s.type in TYPES and s.help for s in SETTINGS)
    assert all(s.name.startswith(("REPRO_", "MLFLOW_")) for s in SETTINGS)
    top = [s for s in SETTINGS if s not in KUBERNETES_SETTINGS]
    assert [s.attr for s in top] == [f.name for f in fields(Settings) if f.name != "kubernetes"]
    assert [s.attr for s in KUBERNETES_SETTINGS] == [f.name for f in fields(KubernetesSettings)]
    assert all(s.name.startswith("REPRO_K8S_") for s in KUBERNETES_SETTINGS)
    # each declaration has one module-level name other modules import (REPORTS, HOME, ...)
    views = [value for value in vars(settings_module).values() if isinstance(value, Setting)]
    assert sorted(s.name for s in views) == sorted(names)


def test_a_declaration_is_a_pydantic_field_carrying_the_variable_the_help_and_the_bounds():
    delay, timeout = BY_NAME["REPRO_RETRY_DELAY_S"], BY_NAME["REPRO_REBUILD_TIMEOUT_S"]
    assert (delay.info.validation_alias, delay.info.description) == (delay.name, delay.help)
    assert (delay.minimum, delay.maximum, timeout.minimum, timeout.maximum) == (0, 86400, 1, 30 * 86400)
    assert BY_NAME["REPRO_RUNNER"].choices == ("process", "docker")
    assert KubernetesSettings.namespace == "repro-audit"  # a field's class attribute is its default


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
def test_every_setting_parses_to_its_default_when_unset_or_empty(setting):
    assert setting.get({}) == setting.default
    assert setting.get({setting.name: ""}) == setting.default


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.default not in (None, ())], ids=lambda s: s.name)
def test_a_settings_default_written_out_parses_back_to_itself(setting):
    text = {bool: lambda v: str(v).lower(), tuple: ",".join}.get(type(setting.default), str)(setting.default)
    assert setting.get({setting.name: text}) == setting.default


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.type in MALFORMED], ids=lambda s: s.name)
def test_a_malformed_value_raises_bad_input_naming_the_variable_and_the_fix(setting):
    with pytest.raises(BadInput, match=setting.name) as caught:
        setting.get({setting.name: MALFORMED[setting.type]})
    assert caught.value.hint
    # ... and so does reading every setting at once
    with pytest.raises(BadInput, match=setting.name):
        Settings.from_env({setting.name: MALFORMED[setting.type]})


def test_the_parsers_read_what_an_operator_writes():
    env = {"REPRO_REQUIRE_OBJECT_LOCK": " Yes ", "REPRO_NIGHTLY_BUDGET_HOURS": "0.5", "REPRO_LOCK_RETENTION_DAYS": "30",
           "REPRO_REBUILD_BACKEND": " Kubernetes ", "REPRO_K8S_NODE_SELECTOR": "pool=gpu, zone=a",
           "REPRO_K8S_GPUS": "4", "REPRO_HOME": "/srv/repro"}
    settings = Settings.from_env(env)
    assert settings.require_object_lock is True and settings.nightly_budget_hours == 0.5
    assert settings.lock_retention_days == 30 and settings.rebuild_backend == "kubernetes"
    assert settings.kubernetes.node_selector == (("pool", "gpu"), ("zone", "a")) and settings.kubernetes.gpus == 4
    assert settings.home == Path("/srv/repro")
    assert Settings.from_env({"REPRO_REQUIRE_OBJECT_LOCK": "off"}).require_object_lock is False
    for schedule in ("30 3 * * 1-5", "@daily", "@once"):
        assert Settings.from_env({"REPRO_NIGHTLY_SCHEDULE": schedule}).nightly_schedule == schedule


@pytest.mark.parametrize("raw", ["0", "-1", "two"])
def test_the_pods_gpu_count_must_be_a_positive_integer(raw):
    with pytest.raises(BadInput, match=r"REPRO_K8S_GPUS=.* is not a positive integer"):
        Settings.from_env({"REPRO_K8S_GPUS": raw})


def test_the_defaults_are_stated_once_the_dataclass_and_an_empty_environment_agree():
    assert Settings() == Settings.from_env({})
    assert KubernetesSettings() == KubernetesSettings.from_env({})
    # the embedded defaults of `make demo`
    defaults = Settings()
    assert defaults.home == Path(".repro") and defaults.reports == "reports" and defaults.runner == "process"
    assert defaults.rebuild_timeout_s == 3600 and defaults.retry_delay_s == 300 and defaults.rebuild_backend == "celery"
    assert defaults.lock_retention_days == 365 * 7 and defaults.kubernetes.namespace == "repro-audit"


def test_no_default_is_written_a_second_time_in_the_settings_module():
    """The ``Settings`` fields take their defaults from the declarations, never from a literal of their own."""
    tree = ast.parse((ROOT / "auditor" / "settings.py").read_text(encoding="utf-8"))
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    for name in ("Settings", "KubernetesSettings"):
        for stmt in classes[name].body:
            if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                assert not isinstance(stmt.value, ast.Constant), f"{name}.{ast.unparse(stmt.target)} = a literal"


def test_derived_paths_and_uris_live_under_repro_home():
    settings = Settings.from_env({"REPRO_HOME": "/data/repro"})
    assert settings.snapshot_store == str(Path("/data/repro") / "snapshots")
    assert settings.tracking_uri == "sqlite:////data/repro/mlflow.db"
    assert settings.git_cache == Path("/data/repro/git") and settings.work_dir == Path("/data/repro/work")
    assert Settings(home=Path("/data/repro")).snapshot_store == settings.snapshot_store
    explicit = Settings.from_env({"REPRO_HOME": "/data/repro", "REPRO_SNAPSHOT_STORE": "s3://b/s",
                                  "MLFLOW_TRACKING_URI": "http://mlflow:5000"})
    assert explicit.snapshot_store == "s3://b/s" and explicit.tracking_uri == "http://mlflow:5000"


def test_describe_lists_every_setting_with_its_type_default_and_help():
    rows = describe()
    assert [r[0] for r in rows] == [s.name for s in SETTINGS]
    table = {name: (kind, default, text) for name, kind, default, text in rows}
    assert table["REPRO_REBUILD_BACKEND"][:2] == ("choice (celery|kubernetes)", "celery")
    assert table["REPRO_SNAPSHOT_STORE"][1] == "$REPRO_HOME/snapshots"
    assert table["MLFLOW_TRACKING_URI"][1] == "sqlite:///$REPRO_HOME/mlflow.db"
    assert table["REPRO_REQUIRE_OBJECT_LOCK"][:2] == ("bool", "false")
    assert table["REPRO_IMAGE"][1] == "-"
    assert all(isinstance(cell, str) and cell for row in rows for cell in row)


def test_get_or_default_never_raises_it_warns_and_falls_back(caplog):
    setting = BY_NAME["REPRO_RETRY_DELAY_S"]
    with caplog.at_level(logging.WARNING, logger="auditor.settings"):
        assert setting.get_or_default({"REPRO_RETRY_DELAY_S": "soon"}) == 300
    assert "REPRO_RETRY_DELAY_S" in caplog.text
    assert setting.get_or_default({"REPRO_RETRY_DELAY_S": "7"}) == 7


@pytest.mark.parametrize(("name", "raw", "words"), [
    ("REPRO_RETRY_DELAY_S", "-1", "an integer of at least 0"),
    ("REPRO_RETRY_DELAY_S", "99999999999999", "an integer of at most 86400"),
    ("REPRO_REBUILD_TIMEOUT_S", "0", "a positive integer"),
    ("REPRO_REBUILD_TIMEOUT_S", str(30 * 86400 + 1), "an integer of at most 2592000"),
    ("REPRO_MLFLOW_HTTP_RETRIES", "-1", "an integer of at least 0"),
    ("REPRO_OVERDUE_DAYS", "0", "a positive integer"),
])
def test_the_bounds_of_a_declaration_are_enforced_by_both_readers(name, raw, words):
    for read in (BY_NAME[name].get, Settings.from_env):
        with pytest.raises(BadInput, match=f"{name}={raw!r} is not {words}"):
            read({name: raw})


def test_from_env_reads_the_process_environment_by_the_variables_exact_names(monkeypatch):
    monkeypatch.setenv("REPRO_REPORTS", "s3://bucket/reports")
    monkeypatch.delenv("REPRO_RUNNER", raising=False)
    monkeypatch.setenv("repro_runner", "docker")  # names are case-sensitive: not REPRO_RUNNER
    monkeypatch.setenv("REPRO_K8S_GPUS", "")  # empty is unset
    settings = Settings.from_env()
    assert (settings.reports, settings.runner, settings.kubernetes.gpus) == ("s3://bucket/reports", "process", 1)


def test_settings_stay_a_frozen_dataclass_that_replace_updates():
    settings = dataclasses.replace(Settings(), tracking_uri="http://mlflow:5000", nightly_max_models=2)
    assert (settings.tracking_uri, settings.nightly_max_models, settings.snapshot_store) == (
        "http://mlflow:5000", 2, str(Path(".repro") / "snapshots"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.reports = "elsewhere"  # type: ignore[misc]


def test_get_settings_is_read_once_and_cached():
    assert get_settings() is get_settings()


def test_the_kubernetes_route_reads_its_settings_from_a_settings_object():
    settings = Settings.from_env({"REPRO_K8S_IMAGE": IMAGE, "REPRO_K8S_GPUS": "2", "REPRO_REBUILD_TIMEOUT_S": "1800",
                                  "REPRO_K8S_NODE_SELECTOR": "pool=gpu"})
    pod = PodSettings.from_settings(settings)
    assert (pod.image, pod.gpus, pod.timeout_s, pod.node_selector) == (IMAGE, 2, 1800, {"pool": "gpu"})
    assert PodSettings.from_env({"REPRO_K8S_IMAGE": IMAGE}) == PodSettings(image=IMAGE)
    assert rebuild_backend(settings=Settings.from_env({"REPRO_REBUILD_BACKEND": "kubernetes"})) == "kubernetes"


def test_a_dag_file_gets_the_celery_route_when_the_kubernetes_one_cannot_be_rendered(caplog):
    assert parse_time_pod({}) is None
    assert parse_time_pod({"REPRO_REBUILD_BACKEND": "slurm"}) is None
    assert parse_time_pod({"REPRO_REBUILD_BACKEND": "kubernetes", "REPRO_K8S_IMAGE": IMAGE}) == PodSettings(image=IMAGE)
    # another malformed setting does not change the route
    assert parse_time_pod({"REPRO_REBUILD_BACKEND": "kubernetes", "REPRO_K8S_IMAGE": IMAGE,
                           "REPRO_RETRY_DELAY_S": "soon"}) is not None
    with caplog.at_level(logging.WARNING, logger="auditor.airflow"):
        for env in ({}, {"REPRO_K8S_IMAGE": "trainer:latest"}, {"REPRO_K8S_IMAGE": IMAGE, "REPRO_K8S_GPUS": "zero"}):
            assert parse_time_pod({"REPRO_REBUILD_BACKEND": "kubernetes", **env}) is None
    assert "REPRO_K8S_IMAGE" in caplog.text and "REPRO_K8S_GPUS" in caplog.text


def test_the_task_of_a_fallen_back_route_fails_with_the_reason():
    check_route("celery", Settings())
    with pytest.raises(BadInput, match="REPRO_K8S_IMAGE"):
        check_route("celery", Settings.from_env({"REPRO_REBUILD_BACKEND": "kubernetes"}))
    with pytest.raises(BadInput, match="REPRO_REBUILD_BACKEND=kubernetes"):
        check_route("celery", Settings.from_env({"REPRO_REBUILD_BACKEND": "kubernetes", "REPRO_K8S_IMAGE": IMAGE}))


def test_setting_names_are_string_literals_only_in_the_settings_module_among_its_readers():
    """auditor/settings.py, auditor/airflow/ and the DAG files read settings; only the first spells their names."""
    names = set(BY_NAME)
    for path in [*sorted((ROOT / "auditor" / "airflow").glob("*.py")), *sorted((ROOT / "dags").glob("*.py"))]:
        literals = {n.value for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                    if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not literals & names, f"{path.relative_to(ROOT)} spells {sorted(literals & names)}"
    assert settings_module.SETTINGS is SETTINGS


def test_a_training_process_reads_only_the_settings_it_uses():
    """The SDK's tracking URI and snapshot store do not parse the auditor's other settings (a bad one stays theirs)."""
    from auditor.settings import snapshot_store_from, tracking_uri_from

    env = {"REPRO_RETRY_DELAY_S": "soon", "REPRO_K8S_GPUS": "zero", "REPRO_HOME": "/h"}
    with pytest.raises(BadInput, match="REPRO_RETRY_DELAY_S"):
        Settings.from_env(env)
    assert tracking_uri_from(env) == Settings.from_env({"REPRO_HOME": "/h"}).tracking_uri == "sqlite:////h/mlflow.db"
    assert snapshot_store_from(env) == Settings.from_env({"REPRO_HOME": "/h"}).snapshot_store
    assert tracking_uri_from({**env, "MLFLOW_TRACKING_URI": "http://127.0.0.1:5000"}) == "http://127.0.0.1:5000"
    assert snapshot_store_from({**env, "REPRO_SNAPSHOT_STORE": "memory://s"}) == "memory://s"
