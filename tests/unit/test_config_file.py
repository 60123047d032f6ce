"""Issue 44, build 3: settings from a committed file (``repro-audit.toml`` or ``[tool.repro-audit]`` in
``pyproject.toml``), environment variables over it, each value through the same types and bounds.

Every test builds its own project folder under ``tmp_path``; the process-wide reads (``Setting.get()``,
``Settings.from_env()``, ``get_settings()``) are tested from inside it with the settings' variables removed.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from auditor.catalog import Configured, configured, find_config, read_config
from auditor.errors import BadInput
from auditor.settings import (
    BY_NAME,
    MLFLOW_HTTP_RETRIES,
    NIGHTLY_BUDGET_HOURS,
    REDACTED,
    REPORTS,
    RUNNER,
    SETTINGS,
    TRACKING_URI,
    WEBHOOK_SECRET,
    Settings,
    explain,
    get_settings,
)

PROJECT_TOML = """\
# committed by the model-risk team
reports = "s3://audits/reports"
tracking_uri = "http://mlflow.internal:5000"
nightly_budget_hours = 6.5
"""


def _project(tmp_path: Path, text: str = PROJECT_TOML, name: str = "repro-audit.toml") -> Path:
    project = tmp_path / "project"
    (project / "src" / "models").mkdir(parents=True, exist_ok=True)
    (project / name).write_text(text, encoding="utf-8")
    return project


@pytest.fixture()
def no_setting_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for setting in SETTINGS:
        monkeypatch.delenv(setting.name, raising=False)


def test_a_project_file_sets_values_an_environment_variable_overrides_and_the_rest_keep_their_defaults(tmp_path):
    project = _project(tmp_path)
    env = {REPORTS.name: "/mnt/reports"}
    settings = Settings.from_env(env, cwd=project / "src" / "models")  # found from a subfolder, upward
    assert settings.reports == "/mnt/reports"
    assert settings.tracking_uri == "http://mlflow.internal:5000"
    assert settings.nightly_budget_hours == 6.5
    assert settings.runner == RUNNER.default and settings.retry_delay_s == 300

    path, rows = explain(env, cwd=project)
    sources = {row.setting.name: row.source for row in rows}
    assert path == project / "repro-audit.toml"
    assert sources[REPORTS.name] == "environment"
    assert sources[TRACKING_URI.name] == sources[NIGHTLY_BUDGET_HOURS.name] == f"file {project / 'repro-audit.toml'}"
    assert sources[RUNNER.name] == "default"
    assert [row.setting for row in rows] == list(SETTINGS)


def test_pyproject_tool_table_is_read_and_repro_audit_toml_wins_beside_it(tmp_path, caplog):
    project = _project(tmp_path, '[project]\nname = "credit"\n\n[tool.repro-audit]\nnightly_max_models = 9\nreports = "r"\n',
                       name="pyproject.toml")
    assert find_config(project / "src") == project / "pyproject.toml"
    settings = Settings.from_env({}, cwd=project)
    assert (settings.nightly_max_models, settings.reports) == (9, str(project / "r"))

    (project / "repro-audit.toml").write_text('reports = "from-toml"\n', encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="auditor.catalog"):
        assert find_config(project) == project / "repro-audit.toml"
        settings = Settings.from_env({}, cwd=project)
    assert (settings.nightly_max_models, settings.reports) == (5, str(project / "from-toml"))  # the table is not merged in
    assert "only" in caplog.text and "repro-audit.toml is read" in caplog.text


def test_the_first_folder_with_a_project_file_ends_the_search(tmp_path):
    outer = _project(tmp_path)  # holds a repro-audit.toml
    inner = outer / "src" / "models"
    (inner / "pyproject.toml").write_text('[project]\nname = "inner"\n', encoding="utf-8")
    assert find_config(inner) is None  # a pyproject.toml without the table: this project has no configuration
    assert Settings.from_env({}, cwd=inner) == Settings.from_env({})


def test_no_file_gives_what_the_environment_and_the_defaults_give(tmp_path):
    (tmp_path / "empty").mkdir()
    env = {NIGHTLY_BUDGET_HOURS.name: "2"}
    assert Settings.from_env(env, cwd=tmp_path / "empty") == Settings.from_env(env)
    assert Settings.from_env({}, cwd=tmp_path / "empty") == Settings()
    path, rows = explain({}, cwd=tmp_path / "empty")
    assert path is None and {row.source for row in rows} == {"default"}


def test_a_mapping_given_is_hermetic_unless_a_file_is_asked_for(tmp_path, monkeypatch, no_setting_variables):
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    assert Settings.from_env({}) == Settings()  # tests build settings from their own mapping, the file not read
    assert REPORTS.get({}) == REPORTS.default
    assert Settings.from_env({}, config_file=project / "repro-audit.toml").reports == "s3://audits/reports"


def test_this_processs_reads_honour_the_file_get_settings_included(tmp_path, monkeypatch, no_setting_variables):
    project = _project(tmp_path)
    monkeypatch.chdir(project / "src")
    assert REPORTS.get() == "s3://audits/reports" and NIGHTLY_BUDGET_HOURS.get_or_default() == 6.5
    assert Settings.from_env().tracking_uri == "http://mlflow.internal:5000"
    get_settings.cache_clear()
    try:
        assert get_settings().reports == "s3://audits/reports"
        monkeypatch.setenv(REPORTS.name, "/env/reports")
        assert REPORTS.get() == "/env/reports"
        monkeypatch.setenv(REPORTS.name, "")  # an empty variable is unset: the file's value applies
        assert REPORTS.get() == "s3://audits/reports"
    finally:
        get_settings.cache_clear()


@pytest.mark.parametrize(("line", "closest"), [
    ('report = "r"', "reports"),
    ('REPRO_REPORTS = "r"', "reports"),  # a variable's name written as the key
    ("nightly_budget = 4", "nightly_budget_hours"),
    ('tracking-uri = "http://x"', "tracking_uri"),
])
def test_an_unknown_key_names_the_file_the_key_and_the_closest_key(tmp_path, line, closest):
    project = _project(tmp_path, f"{line}\n")
    key = line.split(" =")[0]
    with pytest.raises(BadInput) as caught:
        Settings.from_env({}, cwd=project)
    assert str(project / "repro-audit.toml") in str(caught.value) and f": {key}: no setting has this key" in str(caught.value)
    assert f"did you mean {closest!r}?" in caught.value.hint


def test_a_secret_is_refused_in_a_file_and_told_where_it_belongs(tmp_path):
    project = _project(tmp_path, f'{WEBHOOK_SECRET.key} = "0123456789abcdef"\n')
    with pytest.raises(BadInput, match=f"{WEBHOOK_SECRET.key} is a secret") as caught:
        Settings.from_env({}, cwd=project)
    assert "0123456789abcdef" not in str(caught.value)
    assert WEBHOOK_SECRET.name in caught.value.hint and "environment" in caught.value.hint
    assert "Airflow connection" in caught.value.hint and "secrets backend" in caught.value.hint


def test_only_the_webhook_secret_is_a_secret_the_names_of_where_secrets_live_are_not():
    assert [s.name for s in SETTINGS if s.secret] == [WEBHOOK_SECRET.name]


def test_a_url_carrying_a_password_is_refused_in_a_file(tmp_path):
    project = _project(tmp_path, 'tracking_uri = "postgresql://mlflow:hunter2@db:5432/mlflow"\n')
    with pytest.raises(BadInput, match="carries a password") as caught:
        Settings.from_env({}, cwd=project)
    assert "hunter2" not in str(caught.value) and "MLFLOW_TRACKING_PASSWORD" in caught.value.hint
    assert Settings.from_env({}, config_file=_project(tmp_path, 'tracking_uri = "http://mlflow@host:5000"\n')
                             / "repro-audit.toml").tracking_uri == "http://mlflow@host:5000"  # a user alone is no secret


@pytest.mark.parametrize(("line", "words"), [
    ('nightly_budget_hours = "all night"', "nightly_budget_hours = 'all night' is not a number"),
    ("rebuild_timeout_s = 0", "rebuild_timeout_s = '0' is not a positive integer"),
    ("retry_delay_s = 1.5", "retry_delay_s = '1.5' is not an integer"),
    ('rebuild_backend = "slurm"', "rebuild_backend = 'slurm' is not one of celery, kubernetes"),
    ('nightly_schedule = "every night"', "nightly_schedule = 'every night' is not a cron expression"),
    ('reports = ["a", "b"]', "reports is a TOML array, which REPRO_REPORTS cannot take"),
    ('k8s_node_selector = "pool"', "k8s_node_selector = 'pool' is not key=value"),
])
def test_a_malformed_value_names_the_file_and_the_key_and_the_fix(tmp_path, line, words):
    project = _project(tmp_path, f"{line}\n")
    where = f"{project / 'repro-audit.toml'}: "
    with pytest.raises(BadInput) as caught:
        Settings.from_env({}, cwd=project)
    assert str(caught.value).startswith(where + words), caught.value
    assert str(project / "repro-audit.toml") in caught.value.hint
    key = line.split(" =")[0]
    if "TOML" not in words:  # a single read names them alike
        with pytest.raises(BadInput, match=f"{key} = "):
            BY_NAME[next(s.name for s in SETTINGS if s.key == key)].get(configured({}, cwd=project))


def test_a_file_that_is_not_toml_is_named(tmp_path):
    project = _project(tmp_path, "reports = \n")
    with pytest.raises(BadInput, match=r"configuration file .*repro-audit.toml is not valid TOML"):
        Settings.from_env({}, cwd=project)


def test_arrays_and_tables_are_read_as_the_variables_would_be(tmp_path):
    project = _project(tmp_path, 'production_aliases = ["Champion", " prod "]\nrequire_object_lock = true\n'
                                 'k8s_node_selector = { "nvidia.com/gpu.product" = "NVIDIA-H100-80GB-HBM3", zone = "a" }\n'
                                 'metric_directions = ["auc=higher", "brier=lower"]\nk8s_gpus = 2\n')
    settings = Settings.from_env({}, cwd=project)
    assert settings.production_aliases == ("champion", "prod") and settings.require_object_lock is True
    assert settings.kubernetes.node_selector == (("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"), ("zone", "a"))
    assert settings.metric_directions == (("auc", "higher"), ("brier", "lower")) and settings.kubernetes.gpus == 2


def test_the_environment_wins_over_the_file_for_the_kubernetes_settings_too(tmp_path):
    project = _project(tmp_path, "k8s_gpus = 2\nk8s_namespace = \"ml\"\n")
    settings = Settings.from_env({"REPRO_K8S_GPUS": "4"}, cwd=project)
    assert (settings.kubernetes.gpus, settings.kubernetes.namespace) == (4, "ml")


def test_every_setting_has_one_key_and_the_key_names_it_back():
    keys = [s.key for s in SETTINGS]
    assert len(keys) == len(set(keys)) and all(key == key.lower() and key.isidentifier() for key in keys)
    assert (REPORTS.key, TRACKING_URI.key, NIGHTLY_BUDGET_HOURS.key, MLFLOW_HTTP_RETRIES.key) == (
        "reports", "tracking_uri", "nightly_budget_hours", "mlflow_http_retries")
    assert isinstance(configured({}), Configured) and configured({}).file is None


def test_every_default_written_in_a_file_reads_back_to_itself(tmp_path):
    lines = [f"{s.key} = {s.text(s.default)!r}" for s in SETTINGS if s.text(s.default) and not s.secret and not s.derived]
    project = _project(tmp_path, "\n".join(lines).replace("'", '"') + "\n")
    assert len(read_config(project / "repro-audit.toml").texts) == len(lines) > 30
    read = Settings.from_env({}, cwd=project)
    anchored = {s.attr for s in SETTINGS if s.location}  # a relative path in a file is from the file's folder
    assert read.home == project / ".repro" and read.reports == str(project / "reports")
    assert read == Settings(**{attr: getattr(read, attr) for attr in anchored if hasattr(Settings, attr)})


def test_a_relative_location_in_a_file_is_from_the_files_folder_whatever_the_working_folder(tmp_path):
    """The file is found from any subfolder upward: a relative path in it cannot mean the working folder, which moves."""
    project = _project(tmp_path, 'reports = "audit-reports"\ntracking_uri = "sqlite:///registry/mlflow.db"\n'
                                 'signing_key = "keys/auditor.pem"\nsnapshot_store = "s3://bucket/snapshots"\n'
                                 'home = "/var/lib/repro"\nproduction_aliases = "champion"\n')
    for cwd in (project, project / "src" / "models"):
        settings = Settings.from_env({}, cwd=cwd)
        assert settings.reports == str(project / "audit-reports")
        assert settings.tracking_uri == f"sqlite:///{(project / 'registry' / 'mlflow.db').as_posix()}"
        assert settings.signing_key == str(project / "keys" / "auditor.pem")
        assert settings.snapshot_store == "s3://bucket/snapshots" and settings.home == Path("/var/lib/repro")
        assert settings.production_aliases == ("champion",)  # not a location: as written
    assert Settings.from_env({REPORTS.name: "rel"}, cwd=project).reports == "rel"  # a variable: as the process reads it


def test_a_secret_is_shown_redacted():
    _, rows = explain({WEBHOOK_SECRET.name: "s3cr3t-value"})
    row = next(r for r in rows if r.setting is WEBHOOK_SECRET)
    assert (row.shown, row.source) == (REDACTED, "environment")
    assert next(r for r in explain({})[1] if r.setting is WEBHOOK_SECRET).shown is None


def test_a_dag_file_read_falls_back_when_the_file_cannot_be_read(tmp_path, monkeypatch, no_setting_variables, caplog):
    project = _project(tmp_path, "runners = \"docker\"\n")
    monkeypatch.chdir(project)
    with caplog.at_level(logging.WARNING, logger="auditor.catalog"):
        assert RUNNER.get_or_default() == RUNNER.default
    assert "runners: no setting has this key" in caplog.text
    with pytest.raises(BadInput, match="did you mean 'runner'"):
        RUNNER.get()


def test_a_dag_file_takes_the_route_the_file_configures(tmp_path, monkeypatch, no_setting_variables):
    from auditor.airflow import parse_time_pod

    image = "registry.example/ml/repro-trainer@sha256:" + "ab" * 32
    project = _project(tmp_path, f'rebuild_backend = "kubernetes"\nk8s_image = "{image}"\nk8s_gpus = 2\n')
    monkeypatch.chdir(project)
    pod = parse_time_pod()
    assert pod is not None and (pod.image, pod.gpus) == (image, 2)
    assert parse_time_pod({}) is None  # a mapping given is read alone


def test_variables_set_over_the_configuration_keep_the_file_beneath(tmp_path):
    project = _project(tmp_path)
    values = configured({}, cwd=project).over({REPORTS.name: "/task/reports"})
    assert values.source(REPORTS.name) == "environment" and values.file_of(TRACKING_URI.name) is not None
    settings = Settings.from_env(values)
    assert (settings.reports, settings.tracking_uri) == ("/task/reports", "http://mlflow.internal:5000")


def test_a_word_a_location_setting_takes_stays_a_word(tmp_path):
    project = _project(tmp_path, 'ledger_anchor = "off"\ntracking_uri = "databricks"\nregistry_uri = "databricks-uc"\n')
    settings = Settings.from_env({}, cwd=project)
    assert (settings.ledger_anchor, settings.tracking_uri, settings.registry_uri) == ("off", "databricks", "databricks-uc")


def test_this_processs_own_environment_mapping_reads_the_file_too(tmp_path, monkeypatch, no_setting_variables):
    """``os.environ`` passed as it is (the SDK's capture and tracing do) means this process's configuration."""
    import os

    project = _project(tmp_path, 'reports = "audit-out"\n')
    monkeypatch.chdir(project / "src")
    assert REPORTS.get(os.environ) == str(project / "audit-out")
    from auditor.lineage.own import own_locations

    assert project / "audit-out" in own_locations(os.environ)
    assert REPORTS.get(dict(os.environ)) == REPORTS.default  # a copy is a mapping like any other: hermetic


def test_a_pyproject_that_is_not_utf8_is_named_and_a_dag_parse_read_keeps_the_environment(tmp_path, monkeypatch,
                                                                                         no_setting_variables):
    project = tmp_path / "p"
    project.mkdir()
    (project / "pyproject.toml").write_bytes(b"[project]\nname = \"caf\xe9\"\n")
    monkeypatch.chdir(project)
    with pytest.raises(BadInput, match="cannot be read as UTF-8 TOML"):
        RUNNER.get()
    monkeypatch.setenv(RUNNER.name, "docker")
    assert RUNNER.get_or_default() == "docker"  # the file failed, the environment still counts
