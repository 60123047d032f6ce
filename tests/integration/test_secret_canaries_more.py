"""Acceptance (issue 27, point 1, acceptances 1-2): what the first canary suite did not plant.

Planted in a real git project trained through the SDK on MLflow (SQLite) and audited through the CLI:
hard-coded and uncommitted secrets in the training script itself (the pyfunc LoggedModel serves a copy of
it, ``code/train.py``), plain-prose lines in the rebuild's log, a mapping under a secret-looking key, a
secret used as a config *key*, provider token shapes (Databricks, Google, Azure DevOps, Hugging Face,
OpenAI-style), base64 registry auth, and tokens in the git remote URL and the branch name. Then the MLflow
database, every artifact (the LoggedModel's included), the reports and every CLI output are searched:
no canary, and every JSON output parses. The self-checks show each place was there to leak.

Issue 42 (point 8, acceptance 6) adds the two that still leaked: a secret used as a key of ``hmac_keys``, and a
whole Docker config base64-encoded (its ``auth`` itself base64 of ``user:password``) under innocuous names, as a
config value, an environment variable, and printed by the rebuild (as JSON and as YAML); the CLI's plain output
is searched too.
"""

from __future__ import annotations

import base64
import json
import shutil
import uuid
from pathlib import Path

import pytest

from tests.fixtures.gitrepo import git, init_repo
from tests.integration.test_secret_canaries import _clean_env, _run, project_python  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow


def _hex(n: int = 20) -> str:
    return uuid.uuid4().hex[:n]


TOKENS = {  # provider-shaped canaries: each is searched for whole
    "databricks": "dapi" + uuid.uuid4().hex,
    "google": "AIza" + ("Canary" + uuid.uuid4().hex)[:35],
    "azure devops": "canary" + "".join(c for c in uuid.uuid4().hex * 4 if c in "abcdef234567" or c.isalpha())[:46],
    "hugging face": "hf_CANARY" + _hex(),
    "openai": "sk-proj-CANARY" + _hex(),
}
PLAIN = {name: f"CANARY-{_hex()}" for name in (
    "script hard-coded DB_PASSWORD", "script uncommitted API_SECRET", "script comment", "log prose password",
    "log prose token", "log mapping under credentials", "config mapping under credentials", "config key url password",
    "registry auth password", "remote url token user", "hmac key used as a key", "base64 docker config password",
)}
KEY_TOKEN = "ghp_" + "CANARYKEY" + uuid.uuid4().hex[:27]  # a secret used as a config key
BRANCH_TOKEN = "hf_CANARYBRANCH" + _hex()
AUTH_B64 = base64.b64encode(f"robot:{PLAIN['registry auth password']}".encode()).decode()
# issue 42: the whole config encoded, its registry's auth encoded inside it
DOCKER_AUTH = base64.b64encode(f"robot:{PLAIN['base64 docker config password']}".encode()).decode()
DOCKER_B64 = base64.b64encode(json.dumps({"auths": {"reg2.example": {"auth": DOCKER_AUTH}}}).encode()).decode()
SEARCHED = {**TOKENS, **PLAIN, "config key token": KEY_TOKEN, "branch token": BRANCH_TOKEN, "base64 registry auth": AUTH_B64,
            "base64 docker config": DOCKER_B64, "base64 docker config's auth": DOCKER_AUTH}

TRAIN_PY = '''
import json
import os
import torch
import yaml
import auditor

DB_PASSWORD = "@DB@"  # the db password is @COMMENT@

def build_model():
    return torch.nn.Linear(3, 1)

torch.manual_seed(0)
x = torch.randn(16, 3)
with auditor.track(config="config.yaml", data={"train": auditor.generated(x=x.numpy())}, experiment="canaries2") as run:
    if run.rebuild:
        print("the password is @PROSE@.")
        print("connecting: the token for the registry was @TOKEN@")
        print(json.dumps({"credentials": {"value": "@MAPPING@", "pin": 1234}, "epochs": 2}))
        print("tokens seen: @TOKENS@")
        raw = json.loads(open("config.yaml").read())
        print(json.dumps(raw))
        print(yaml.safe_dump(raw))  # as OmegaConf.to_yaml prints a config: hmac_keys' entries on lines of their own
        print("BUILD_SETTINGS=" + raw["build"]["registry_config"])
        print("LEAKTEST printed every secret", flush=True)
        raise ValueError("planted crash")
    os.environ.get("BUILD_SETTINGS")  # a traced read: recorded by name and hash
    model = build_model()
    run.log_metrics({"loss": float(model(x).pow(2).mean())})
    run.save_weights(model.state_dict(), factory="train:build_model", input_example=x[:2])
print("VERSION", auditor.register_model(run, "canaries2"), flush=True)
'''


def _project(tmp_path: Path) -> Path:
    script = (TRAIN_PY.replace("@DB@", PLAIN["script hard-coded DB_PASSWORD"]).replace("@COMMENT@", PLAIN["script comment"])
              .replace("@PROSE@", PLAIN["log prose password"]).replace("@TOKEN@", PLAIN["log prose token"])
              .replace("@MAPPING@", PLAIN["log mapping under credentials"]).replace("@TOKENS@", " ".join(TOKENS.values())))
    config = {"seed": 7, "credentials": {"user": "app", "value": PLAIN["config mapping under credentials"], "pin": 4321},
              "mirrors": {f"https://robot:{PLAIN['config key url password']}@pypi.internal/simple": 1},
              "deploy_tokens": {KEY_TOKEN: "ci"}, "registry": {"auths": {"reg.example": {"auth": AUTH_B64}}},
              "hmac_keys": {PLAIN["hmac key used as a key"]: "v1"}, "build": {"registry_config": DOCKER_B64}}
    project = init_repo(tmp_path / "proj", {"train.py": script, "config.yaml": json.dumps(config, indent=2) + "\n",
                                            ".gitignore": ".repro/\nmlruns/\nreports/\n"})
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "--bare", "-q", str(project), str(origin))
    # the remote names a token as its user; git is told to fetch it from the local bare copy
    git(project, "remote", "add", "origin", f"https://{PLAIN['remote url token user']}@git.example/o/r.git")
    git(project, "config", f"url.{origin.as_uri()}.insteadOf", "https://git.example/o/r.git")
    git(project, "checkout", "-q", "-b", f"deploy/{BRANCH_TOKEN}")
    # an uncommitted secret line in the script itself
    (project / "train.py").write_text(script.replace("import json\n", f'import json\nAPI_SECRET = "{PLAIN["script uncommitted API_SECRET"]}"\n', 1))
    return project


def _help_texts() -> dict[str, str]:
    """Every verb's --help, as the CLI prints it (in process: fast)."""
    import typer.main
    from typer.testing import CliRunner

    from auditor.cli import _load_commands, app

    _load_commands()
    runner, out = CliRunner(), {}
    group = typer.main.get_command(app)

    def walk(command, path):
        out[" ".join(path) or "repro-audit"] = runner.invoke(app, [*path, "--help"]).output
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(group, [])
    return out


def test_our_help_texts_are_not_taken_for_secrets():
    from auditor.lineage.redact import redact_text

    texts = _help_texts()
    assert len(texts) > 10
    mangled = {verb: text for verb, text in texts.items() if redact_text(text) != text}
    assert mangled == {}, sorted(mangled)


def test_no_secret_in_the_script_copy_logs_json_or_provider_shapes(project_python, tmp_path, _mlflow_sqlite_template):  # noqa: F811
    project = _project(tmp_path)
    (project / ".repro").mkdir()
    shutil.copyfile(_mlflow_sqlite_template, project / ".repro" / "mlflow.db")
    env = {**_clean_env(), "DOCKER_AUTH_CONFIG": json.dumps({"auths": {"reg.example": {"auth": AUTH_B64}}}),
           "BUILD_SETTINGS": DOCKER_B64}
    outputs: dict[str, str] = {}
    trained = _run(project_python, project, "train.py", env=env)
    outputs["training"] = trained.stdout + trained.stderr
    assert trained.returncode == 0, trained.stderr[-4000:]
    from auditor.lineage.redact import marker

    # the record names the remote with its token redacted; git fetches that URL from the local bare copy
    cli_env = {**_clean_env(), "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.{(tmp_path / 'origin.git').as_uri()}.insteadOf",
               "GIT_CONFIG_VALUE_0": f"https://{marker(PLAIN['remote url token user'])}@git.example/o/r.git"}
    for name, args in (("audit --json", ["audit", "models:/canaries2/1", "--json", "--date", "2026-01-01"]),
                       ("lineage --json", ["lineage", "show", "models:/canaries2/1", "--json"]),
                       ("verify --json", ["evidence", "verify", "--json"]),
                       ("audit", ["audit", "models:/canaries2/1", "--date", "2026-01-02"]),
                       ("lineage", ["lineage", "show", "models:/canaries2/1"])):
        done = _run(project_python, project, "-m", "auditor", *args, env=cli_env)
        outputs[f"{name} stdout"], outputs[f"{name} stderr"] = done.stdout, done.stderr
        if "--json" in name:
            json.loads(done.stdout)  # every JSON output parses

    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{project / '.repro' / 'mlflow.db'}")
    version = client.get_model_version("canaries2", "1")
    run = client.get_run(version.run_id)
    model_root = Path(version.source.removeprefix("file://")).parent  # the LoggedModel: MLmodel, code/, artifacts/
    blobs = {where: text.encode() for where, text in outputs.items()}
    files = {p for p in (project / ".repro").rglob("*") if p.is_file() and "git" not in p.relative_to(project / ".repro").parts[0]}
    files |= {p for folder in (project / "mlruns", project / "reports", model_root,
                               Path(run.info.artifact_uri.removeprefix("file://"))) if folder.exists()
              for p in folder.rglob("*") if p.is_file()}
    for path in files:
        blobs[str(path)] = path.read_bytes()
    leaks = [(name, where) for name, canary in SEARCHED.items() for where, data in blobs.items() if canary.encode() in data]
    # self-checks: the copy is there, it is the script, it loads and serves; the rebuild printed its secrets
    copies = [p for p in files if p.name == "train.py" and "code" in p.parts]
    assert copies and "def build_model" in copies[0].read_text()
    audit = json.loads(outputs["audit --json stdout"])
    print(audit["verdict"], audit["result"].get("error"), audit["result"]["tiers"])
    assert "LEAKTEST printed every secret" in audit["result"]["log_tail"]
    assert "<redacted:" in audit["result"]["log_tail"]
    assert "BUILD_SETTINGS=<redacted:" in audit["result"]["log_tail"]  # the rebuild printed the encoded config
    assert "\nhmac_keys:\n  <redacted:" in audit["result"]["log_tail"]  # and the config as YAML
    lineage = json.loads(outputs["lineage --json stdout"])
    print(json.dumps(lineage)[:2000])
    assert "hmac_keys" in json.dumps(lineage) and "registry_config" in json.dumps(lineage)  # the config was recorded
    assert run.data.tags.get("mlflow.source.git.branch", "").startswith("deploy/")
    for name, where in leaks:
        print(f"LEAK {name!r} in {where}")
    assert leaks == []
