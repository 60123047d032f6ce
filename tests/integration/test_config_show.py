"""Issue 44, acceptance 3: a ``repro-audit.toml`` in a project sets the reports location, the tracking URI and a
budget; an environment variable overrides one of them; ``repro-audit config show`` prints the three sources.

The real console script in a subprocess, run from a subfolder of the project (the file is found upward), with
none of the settings' variables but the one that overrides.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from auditor.settings import NIGHTLY_BUDGET_HOURS, REPORTS, RUNNER, TRACKING_URI, WEBHOOK_SECRET

CLI = str(Path(sys.executable).with_name("repro-audit"))
PROJECT_TOML = """\
reports = "s3://audits/reports"
tracking_uri = "http://mlflow.internal:5000"
nightly_budget_hours = 6.5
"""


def _project(tmp_path: Path, text: str = PROJECT_TOML, name: str = "repro-audit.toml") -> Path:
    project = tmp_path / "credit-scorer"
    (project / "training").mkdir(parents=True, exist_ok=True)
    (project / name).write_text(text, encoding="utf-8")
    return project


def _show(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("REPRO_", "MLFLOW_"))}
    base.update({"HOME": str(cwd), "COLUMNS": "400"})  # wide enough that no row wraps
    return subprocess.run([CLI, "config", "show", *args], cwd=cwd, env={**base, **env}, capture_output=True, text=True,
                          timeout=120)


def _rows(stdout: str) -> dict[str, list[str]]:
    """The table's rows by variable: [key, value, source] (cells split on the table's bars)."""
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) == 4 and cells[0].startswith(("REPRO_", "MLFLOW_")):
            rows[cells[0]] = cells[1:]
    return rows


def test_config_show_prints_the_file_the_environment_and_the_defaults_as_sources(tmp_path):
    project = _project(tmp_path)
    file = project / "repro-audit.toml"
    shown = _show(project / "training", **{REPORTS.name: "/mnt/override/reports", WEBHOOK_SECRET.name: "hmac-0123456789"})
    assert shown.returncode == 0, shown.stderr
    assert f"configuration file: {file}" in shown.stdout
    rows = _rows(shown.stdout)
    assert rows[REPORTS.name] == ["reports", "/mnt/override/reports", "environment"]
    assert rows[TRACKING_URI.name] == ["tracking_uri", "http://mlflow.internal:5000", f"file {file}"]
    assert rows[NIGHTLY_BUDGET_HOURS.name] == ["nightly_budget_hours", "6.5", f"file {file}"]
    assert rows[RUNNER.name] == ["runner", "process", "default"]
    assert rows[WEBHOOK_SECRET.name] == ["webhook_secret", "***", "environment"]
    assert "hmac-0123456789" not in shown.stdout + shown.stderr

    as_json = _show(project / "training", "--json", **{REPORTS.name: "/mnt/override/reports"})
    assert as_json.returncode == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    by_name = {row["name"]: row for row in doc["settings"]}
    assert doc["config_file"] == str(file)
    assert by_name[REPORTS.name] == {"name": REPORTS.name, "file_key": "reports", "value": "/mnt/override/reports",
                                     "source": "environment"}
    assert (by_name[NIGHTLY_BUDGET_HOURS.name]["value"], by_name[NIGHTLY_BUDGET_HOURS.name]["source"]) == (6.5, f"file {file}")
    assert by_name[RUNNER.name]["source"] == "default"
    assert {row["source"] for row in doc["settings"]} == {"environment", f"file {file}", "default"}


def test_pyproject_tool_table_is_a_configuration_file_too(tmp_path):
    project = _project(tmp_path, '[project]\nname = "credit-scorer"\n\n[tool.repro-audit]\nnightly_max_models = 9\n',
                       name="pyproject.toml")
    doc = json.loads(_show(project / "training", "--json").stdout)
    row = next(r for r in doc["settings"] if r["file_key"] == "nightly_max_models")
    assert doc["config_file"] == str(project / "pyproject.toml")
    assert (row["value"], row["source"]) == (9, f"file {project / 'pyproject.toml'}")


def test_no_configuration_file_says_so_and_every_source_is_the_environment_or_the_default(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n', encoding="utf-8")  # ends the search here
    shown = _show(tmp_path, "--json", **{RUNNER.name: "docker"})
    doc = json.loads(shown.stdout)
    assert doc["config_file"] is None
    assert {r["source"] for r in doc["settings"]} == {"environment", "default"}
    assert "configuration file: none" in _show(tmp_path).stdout


def test_a_file_that_cannot_be_used_is_a_usage_error_naming_the_file_and_the_key(tmp_path):
    project = _project(tmp_path, 'report = "s3://audits/reports"\n')
    refused = _show(project)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert f"{project / 'repro-audit.toml'}: report: no setting has this key" in refused.stderr
    assert "did you mean 'reports'?" in refused.stderr

    (project / "repro-audit.toml").write_text(f'{WEBHOOK_SECRET.key} = "hmac-0123456789"\n', encoding="utf-8")
    refused = _show(project, "--json")
    doc = json.loads(refused.stdout)
    assert refused.returncode == doc["exit_code"] == 2
    assert "is a secret" in doc["error"] and "environment" in doc["hint"]
    assert "hmac-0123456789" not in refused.stdout + refused.stderr

    (project / "repro-audit.toml").write_text("nightly_budget_hours = \"all night\"\n", encoding="utf-8")
    refused = _show(project)
    assert refused.returncode == 2
    assert f"{project / 'repro-audit.toml'}: nightly_budget_hours = 'all night' is not a number" in refused.stderr
