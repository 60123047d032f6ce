"""Acceptance (issue 14, point 2): secrets planted everywhere a training run can hold one never leave the process.

Each placement is a unique canary (``CANARY-<hex>``) in a secret-looking position: environment
variables, command-line flags and overrides, a config file (flat and nested keys), an untracked JSON file
and an untracked private key, a committed ``.env`` whose neighbouring line changed (its lines would be
context lines of the stored diff), a secret on a changed line, URLs of each shape, and a training log that
prints a dict, a JSON object and exception reprs before crashing. Everything is real: a git repository, the
SDK, MLflow on the default SQLite file, the audit through the CLI (``python -m auditor``) with and without
``--json``, published reports. Then the bytes of the MLflow database, the artifact store, the reports, the
snapshot store and every CLI stdout/stderr are searched: no canary may appear.

The suite can fail: the training script counts the canaries it was given and logs that count as a metric,
and the rebuild's log is shown to carry the crash's lines (redacted), so "0 leaks" means the secrets were
there to leak.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import uuid
from pathlib import Path

import pytest

from tests.fixtures.gitrepo import git, init_repo

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _canary() -> str:
    return f"CANARY-{uuid.uuid4().hex[:20]}"


# placement -> canary; the training-time ones are read by the script, the log ones printed by its rebuild
TRAINING = {name: _canary() for name in (
    "env PGPASSWORD", "env DB_PASS", "env AWS_SECRET_ACCESS_KEY", "env MY_API_TOKEN", "env MYSQL_PWD",
    "env DATABASE_URL user:pw@", "argv --password X", "argv --db-url postgres://u:X@h/db", "argv --cache-url redis://:X@h",
    "argv --jdbc jdbc:…?user=u&password=X", "argv --webhook https://h/x?token=X", "argv --signed-url …&sig=X",
    "argv override client_secret=X", "config flat api_key", "config nested db.password", "config nested storage.endpoint user:pw@",
    "untracked JSON flat db_password", "untracked JSON nested service.token", "untracked private key block",
    "committed .env PGPASSWORD (context line)", "committed .env SECRET_KEY (context line)",
    "changed line of .env NEW_API_TOKEN",
)}
LOGGED = {name: _canary() for name in (
    "log dict {'db_password': X}", "log JSON {\"api_key\": X}", "log KeyError('token=X') repr", "log Authorization: Bearer X",
    "log redis://:X@host", "log jdbc ?password=X", "log PGPASSWORD=X", "log DB_PASS=X", "crash ValueError({'secret': X})",
)}
CLI_ERROR = {"cli error: a model ref carrying ?token=X": _canary()}
PLACEMENTS = {**TRAINING, **LOGGED, **CLI_ERROR}

TRAIN_PY = '''
"""A tiny training whose rebuild prints secrets and crashes: the canary suite's script."""
import argparse
import json
import os
import sys
from pathlib import Path

import torch

import auditor

parser = argparse.ArgumentParser()
for flag in ("--password", "--db-url", "--cache-url", "--jdbc", "--webhook", "--signed-url"):
    parser.add_argument(flag)
args, rest = parser.parse_known_args()
here = Path(__file__).parent
sources = [*os.environ.values(), *sys.argv, *(p.read_text() for p in
           (here / "config.yaml", here / "extra.json", here / ".env", here / "deploy_key.pem") if p.exists())]
seen = sum(s.count("CANARY-") for s in sources)

torch.manual_seed(0)
x = torch.randn(16, 3)
with auditor.track(config=here / "config.yaml", overrides=rest, data={"train": auditor.generated(x=x.numpy())},
                   experiment="canaries") as run:
    if run.rebuild:
        print({"db_password": "@LOG dict@", "lr": 0.1})
        print(json.dumps({"api_key": "@LOG JSON@", "epochs": 2}))
        print(repr(KeyError("token=@LOG KeyError@")))
        print("Authorization: Bearer @LOG Bearer@")
        print("cache at redis://:@LOG redis@@cache:6379/0")
        print("connecting to jdbc:postgresql://db.internal/train?user=app&password=@LOG jdbc@")
        print("env: PGPASSWORD=@LOG PGPASSWORD@ DB_PASS=@LOG DB_PASS@")
        print("LEAKTEST printed every secret", flush=True)
        raise ValueError({"secret": "@CRASH@"})
    model = torch.nn.Linear(3, 1)
    run.log_metrics({"canaries_seen": seen, "loss": float(model(x).pow(2).mean())})
    run.save_weights(model.state_dict())
print("VERSION", auditor.register_model(run, "canaries"), flush=True)
'''


def _script() -> str:
    text = TRAIN_PY
    for token, name in (("@LOG dict@", "log dict {'db_password': X}"), ("@LOG JSON@", "log JSON {\"api_key\": X}"),
                        ("@LOG KeyError@", "log KeyError('token=X') repr"), ("@LOG Bearer@", "log Authorization: Bearer X"),
                        ("@LOG redis@", "log redis://:X@host"), ("@LOG jdbc@", "log jdbc ?password=X"),
                        ("@LOG PGPASSWORD@", "log PGPASSWORD=X"), ("@LOG DB_PASS@", "log DB_PASS=X"),
                        ("@CRASH@", "crash ValueError({'secret': X})")):
        text = text.replace(token, LOGGED[name])
    assert "@" not in text.replace("@cache", "").replace("@host", "")  # every token replaced
    return text


@pytest.fixture(scope="module")
def project_python(tmp_path_factory) -> Path:
    """A venv over the auditor's site-packages with this checkout on its path (as in test_onboarding): the
    rebuild runs in the auditor's interpreter with a scrubbed environment, so it must import this checkout."""
    venv = tmp_path_factory.mktemp("canary-env") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "00-repro-audit-checkout.pth").write_text(f"{ROOT}\n")
    (site / "01-shared.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    return python


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("REPRO_", "MLFLOW_")) and k != "PYTHONPATH"}


def _project(tmp_path: Path) -> Path:
    t = TRAINING
    config = (f"seed: 7\nlr: 0.1\napi_key: {t['config flat api_key']}\ndb:\n  host: db.internal\n  password: {t['config nested db.password']}\n"
              f"storage:\n  endpoint: https://minio:{t['config nested storage.endpoint user:pw@']}@minio.internal:9000\n")
    dotenv = (f"DEBUG=0\nPGPASSWORD={t['committed .env PGPASSWORD (context line)']}\n"
              f"SECRET_KEY={t['committed .env SECRET_KEY (context line)']}\nLOG_LEVEL=info\n")
    project = init_repo(tmp_path / "proj", {"train.py": _script(), "config.yaml": config, ".env": dotenv,
                                            ".gitignore": ".repro/\nmlruns/\nreports/\n"})
    git(project, "remote", "add", "origin", project.as_uri())
    # the working tree: a changed line beside committed secrets, a secret on a changed line, untracked files
    (project / ".env").write_text(dotenv.replace("DEBUG=0", "DEBUG=1").replace("LOG_LEVEL=info", "LOG_LEVEL=debug")
                                  + f"NEW_API_TOKEN={t['changed line of .env NEW_API_TOKEN']}\n")
    (project / "extra.json").write_text(json.dumps({"db_password": t["untracked JSON flat db_password"],
                                                    "service": {"token": t["untracked JSON nested service.token"], "retries": 3}}, indent=2) + "\n")
    body = t["untracked private key block"]
    (project / "deploy_key.pem").write_text(f"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA{body}\nq83bXn0ZyQ{body[::-1]}\n-----END RSA PRIVATE KEY-----\n")
    return project


def _run(python: Path, project: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), *args], cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False)


def _leaks(blobs: dict[str, bytes]) -> list[tuple[str, str]]:
    return [(placement, where) for placement, canary in PLACEMENTS.items() for where, data in blobs.items()
            if canary.encode() in data]


def test_no_planted_secret_reaches_mlflow_artifacts_reports_logs_or_cli_output(project_python, tmp_path, _mlflow_sqlite_template):
    print(f"\n{len(PLACEMENTS)} canary placements")
    assert len(PLACEMENTS) >= 20
    project = _project(tmp_path)
    # the default tracking URI (.repro/mlflow.db), from the session's migrated template: migrating costs seconds
    (project / ".repro").mkdir()
    shutil.copyfile(_mlflow_sqlite_template, project / ".repro" / "mlflow.db")
    t = TRAINING
    env = {**_clean_env(), "PGPASSWORD": t["env PGPASSWORD"], "DB_PASS": t["env DB_PASS"],
           "AWS_SECRET_ACCESS_KEY": t["env AWS_SECRET_ACCESS_KEY"], "MY_API_TOKEN": t["env MY_API_TOKEN"],
           "MYSQL_PWD": t["env MYSQL_PWD"], "DATABASE_URL": f"postgresql://app:{t['env DATABASE_URL user:pw@']}@db.internal/train"}
    argv = ["train.py", "--password", t["argv --password X"], "--db-url", f"postgres://u:{t['argv --db-url postgres://u:X@h/db']}@h/db",
            "--cache-url", f"redis://:{t['argv --cache-url redis://:X@h']}@cache:6379/0",
            "--jdbc", f"jdbc:postgresql://h/db?user=u&password={t['argv --jdbc jdbc:…?user=u&password=X']}",
            "--webhook", f"https://hooks.example/x?token={t['argv --webhook https://h/x?token=X']}",
            "--signed-url", f"https://bucket.example/o?X-Amz-Date=20260101&sig={t['argv --signed-url …&sig=X']}",
            f"client_secret={t['argv override client_secret=X']}"]
    outputs: dict[str, str] = {}
    trained = _run(project_python, project, *argv, env=env)
    outputs["training stdout+stderr"] = trained.stdout + trained.stderr
    assert trained.returncode == 0, trained.stderr[-4000:]
    assert "VERSION 1" in trained.stdout

    cli_env = _clean_env()  # the auditor runs without the training's secrets in its environment
    ref = "models:/canaries/1"
    for name, args in (("audit --json", ["audit", ref, "--json", "--date", "2026-01-01"]),
                       ("audit", ["audit", ref, "--date", "2026-01-02"]),
                       ("evidence verify", ["evidence", "verify"]),
                       ("audit of a bad ref", ["audit", f"models:/canaries/1?token={CLI_ERROR['cli error: a model ref carrying ?token=X']}"])):
        done = _run(project_python, project, "-m", "auditor", *args, env=cli_env)
        outputs[f"{name} stdout"], outputs[f"{name} stderr"] = done.stdout, done.stderr
        outputs[f"{name} rc"] = str(done.returncode)

    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{project / '.repro' / 'mlflow.db'}")
    run = client.get_run(client.get_model_version("canaries", "1").run_id)
    artifacts = Path(run.info.artifact_uri.removeprefix("file://"))
    blobs = {where: text.encode() for where, text in outputs.items()}
    # the git mirror under .repro/ is a clone of the user's own repository (committed files are theirs to keep)
    searched = {p for p in (project / ".repro").rglob("*") if p.is_file() and "git" not in p.relative_to(project / ".repro").parts[0]}
    searched |= {p for folder in (project / "mlruns", project / "reports", artifacts) for p in folder.rglob("*") if p.is_file()}
    for path in sorted(searched):
        blobs[str(path)] = path.read_bytes()
    leaks = _leaks(blobs)
    leaked = sorted({p for p, _ in leaks})
    print(f"{len(leaked)} of {len(PLACEMENTS)} placements leaked")
    for placement, where in leaks:
        print(f"  LEAK {placement!r} in {where}")
    # the self-checks: the secrets were there to leak, and every place was searched
    assert run.data.metrics["canaries_seen"] == len(TRAINING)  # the script read every one
    assert project / ".repro" / "mlflow.db" in searched
    assert {"diff.patch", "run_record.json"} <= {p.name for p in searched}, sorted(map(str, searched))
    reports = project / "reports"
    assert any(reports.rglob("*.html")) and any(reports.rglob("*.json"))
    result = json.loads(outputs["audit --json stdout"])
    # the rebuild (or the re-evaluation of the registered weights) crashed after printing every secret
    assert result["verdict"] in ("ERROR", "NOT_REPRODUCIBLE"), result["result"]["tiers"]
    assert "LEAKTEST printed every secret" in result["result"]["log_tail"]
    assert "ValueError" in (result["result"]["error"] or "") + result["result"]["log_tail"]
    assert outputs["audit of a bad ref rc"] == "2", outputs["audit of a bad ref stderr"]

    assert leaks == []
