"""Rebuilding in a reconstructed environment vs the auditor's own, with a dependency that changes the numbers.

``reprotiny`` is a tiny package of our own in two versions (wheels built here, served from a local
folder with ``--find-links``): 1.0 scales the reference model's learning rate by 1.0, 2.0 by 1.5.
The reference model is trained in an environment holding 1.0 and audited from one holding 2.0.

- ``REPRO_REBUILD_ENV=recorded``: the process runner recreates the recorded package
  set with uv (1.0 again) and the verdict is REPRODUCED_BITWISE with no package drift;
- ``REPRO_REBUILD_ENV=auditor``: the rebuild runs under 2.0, the drift names ``reprotiny`` and the
  verdict is not bitwise.

Both environments are the shared dev venv plus the one package: a venv whose ``.pth`` adds the dev
venv's site-packages (``site.addsitedir``, so its editable installs work too), the cheapest way to
hold "everything the auditor has, and this version of reprotiny".
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from auditor import settings as S

# with the image test (also alone: `make test-image`): the first audit builds the environment (~2 min from nothing)
pytestmark = [pytest.mark.slow, pytest.mark.image_e2e, pytest.mark.timeout(1800)]  # the first audit may build the environment

MODEL = "tiny-dependent"
SCALES = {"1.0": "1.0", "2.0": "1.5"}


def _wheel(folder: Path, version: str, scale: str) -> Path:
    """A valid pure-Python wheel of reprotiny ``version`` (its RECORD hashes every file)."""
    name = f"reprotiny-{version}"
    files = {
        "reprotiny/__init__.py": f'"""Scales a learning rate (test package)."""\nLR_SCALE = {scale}\n',
        f"{name}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: reprotiny\nVersion: {version}\n",
        f"{name}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: repro-audit-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{name}.dist-info/RECORD,,")
    files[f"{name}.dist-info/RECORD"] = "\n".join(record) + "\n"
    target = folder / f"{name}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w") as archive:
        for path, text in files.items():
            info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            archive.writestr(info, text)
    return target


def _uv() -> str:
    return str(Path(sys.executable).with_name("uv"))


def _overlay_venv(dest: Path, wheels: Path, version: str) -> Path:
    """The dev venv's packages plus reprotiny ``version``; returns its python."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([_uv(), "venv", "-q", "--python", base, str(dest)], check=True, capture_output=True)
    python = dest / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    dev = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "zz_dev_venv.pth").write_text(f"import site; site.addsitedir({dev!r})\n")
    subprocess.run([_uv(), "pip", "install", "-q", "--python", str(python), "--no-deps", "--no-index",
                    "--find-links", str(wheels), f"reprotiny=={version}"], check=True, capture_output=True)
    return python


@pytest.fixture(scope="module")
def tiny_world(tmp_path_factory):
    from auditor.demo import base_env, make_project
    from auditor.snapshots import create_snapshot

    root = tmp_path_factory.mktemp("tiny-world")
    wheels = root / "wheels"
    wheels.mkdir()
    for version, scale in SCALES.items():
        _wheel(wheels, version, scale)
    trained_with = _overlay_venv(root / "venv-1.0", wheels, "1.0")
    auditor_env = _overlay_venv(root / "venv-2.0", wheels, "2.0")

    env = base_env(root)
    project = make_project(root / "project")
    train = project / "train.py"
    source = train.read_text()
    patched = source.replace("import auditor\n", "import auditor\nimport reprotiny\n", 1).replace(
        'lr=float(cfg["lr"])', 'lr=float(cfg["lr"]) * reprotiny.LR_SCALE', 1)
    assert patched.count("reprotiny") == 2, "the reference train.py changed: update this test's patch"
    train.write_text(patched)
    subprocess.run(["git", "commit", "-q", "-am", "depend on reprotiny"], cwd=project, check=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t.invalid"})
    full = {**os.environ, **env}
    subprocess.run([str(trained_with), str(project / "make_data.py"), str(root / "data")], cwd=project, env=full,
                   check=True, capture_output=True)
    env["REPRO_TRAIN_DATA"] = f"{env[S.SNAPSHOT_STORE.name]}@{create_snapshot(root / 'data', env[S.SNAPSHOT_STORE.name]).id}"
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=env["MLFLOW_TRACKING_URI"])
    client.create_experiment("reference-model", artifact_location=(root / "artifacts").as_uri())
    trained = subprocess.run([str(trained_with), "train.py", "epochs=1"], cwd=project, env={**os.environ, **env},
                             capture_output=True, text=True, check=False)
    assert trained.returncode == 0, trained.stdout[-2000:] + trained.stderr[-3000:]
    import auditor

    experiment = client.get_experiment_by_name("reference-model")
    run_id = client.search_runs([experiment.experiment_id], max_results=1)[0].info.run_id
    version = auditor.register_model(run_id, MODEL, tracking_uri=env["MLFLOW_TRACKING_URI"])
    return {"root": root, "env": env, "wheels": wheels, "auditor_python": auditor_env, "version": str(version)}


def _audit(world, tmp_path, mode: str) -> tuple[int, dict]:
    env = {
        **os.environ,
        **world["env"],
        S.REPORTS.name: str(tmp_path / "reports"),
        S.HOME.name: str(tmp_path / "home"),
        S.REBUILD_ENV.name: mode,
        S.FIND_LINKS.name: f"{world['wheels']},/opt/wheels",
    }
    result = subprocess.run(
        [str(world["auditor_python"]), "-m", "auditor", "audit", f"models:/{MODEL}/{world['version']}", "--runner", "process",
         "--json", "--no-publish"],
        env=env, capture_output=True, text=True, timeout=900, check=False,
    )
    try:
        return result.returncode, json.loads(result.stdout)
    except ValueError:
        pytest.fail(f"audit printed no JSON (exit {result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


def test_the_record_lists_the_version_trained_with(tiny_world):
    from auditor.registry.mlflow import MlflowRegistry

    registry = MlflowRegistry(tracking_uri=tiny_world["env"]["MLFLOW_TRACKING_URI"])
    record, _ = registry.load_record(registry.resolve(f"models:/{MODEL}/{tiny_world['version']}"))
    assert record.environment.packages.get("reprotiny") == "1.0"
    probe = subprocess.run([str(tiny_world["auditor_python"]), "-c", "import reprotiny; print(reprotiny.LR_SCALE)"],
                           capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "1.5"  # the auditor's environment holds the other version


def test_a_reconstructed_environment_reproduces_bitwise(tiny_world, tmp_path):
    code, payload = _audit(tiny_world, tmp_path, "recorded")
    result = payload["result"]
    assert payload["verdict"] == "REPRODUCED_BITWISE", (result.get("error"), result.get("log_tail", "")[-3000:])
    assert code == 0
    drift = result["drift"]
    assert "reprotiny" not in drift["changed"] and not drift["removed"] and not drift["added"], drift


def test_the_auditors_environment_reports_the_package_drift_and_is_not_bitwise(tiny_world, tmp_path):
    code, payload = _audit(tiny_world, tmp_path, "auditor")
    result = payload["result"]
    assert payload["verdict"] != "REPRODUCED_BITWISE", result.get("weight_diff")
    assert result["drift"]["changed"]["reprotiny"] == ["1.0", "2.0"]
    assert code != 0 or payload["verdict"] == "REPRODUCED_WITHIN_TOLERANCE"
