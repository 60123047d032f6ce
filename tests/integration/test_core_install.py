"""``pip install repro-audit`` with no extras gives a working CLI (issue 29, build point 1; acceptance 1).

A fresh virtual environment gets the package from a copy of this checkout, no extras: no MLflow, no
torch, and (typer 0.29 vendors its click) no ``click``. Ten wrong usages each exit 2 with a usage line and
no traceback, ``--help`` of every verb exits 0, the install's size is printed and holds no matplotlib.
Issue 38: the verbs that need MLflow name its extra (exit 2, no traceback) whatever the tracking URI, and
``repro-audit demo`` from an install without the examples says it needs a clone and writes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

WRONG_USAGES = [
    ["frobnicate"],
    ["--nope"],
    ["audit"],
    ["audit", "models:/m/1", "--nope"],
    ["audit", "models:/m/1", "--reruns", "0"],
    ["calibrate", "models:/m/1", "--reruns", "abc"],
    ["nightly", "--date", "2026-13-45"],
    ["audit", "models:/m/1", "--date", "2026-02-30"],
    ["audit", "models:/m/1", "--runner", "no-such-runner"],
    ["evidence", "verify", "a", "b"],
]

# the verbs, as the installed CLI's own command tree lists them
_VERBS = """
import json, typer
from auditor.cli import _load_commands, app
_load_commands()
def walk(group, path):
    for name, command in sorted(group.commands.items()):
        yield [*path, name]
        if hasattr(command, "commands"):
            yield from walk(command, [*path, name])
print(json.dumps(list(walk(typer.main.get_command(app), []))))
"""


@pytest.fixture(scope="module")
def core_env(tmp_path_factory):
    """A venv with ``pip install <copy of the checkout>``, no extras (a copy: the build writes into its source)."""
    base = tmp_path_factory.mktemp("core")
    source = base / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "auditor", source / "auditor", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    # at the committed lock's versions (uv, as make venv installs it; `make lock` points REPRO_TEST_LOCK at the candidate)
    uv = Path(sys.executable).with_name("uv")
    installed = subprocess.run([str(uv), "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                                "-c", os.environ.get("REPRO_TEST_LOCK") or str(ROOT / "requirements" / "dev.lock.txt"), str(source)],
                               capture_output=True, text=True, timeout=900)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return venv


def _env(home: Path) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": os.environ.get("LANG", "C.UTF-8")}


def _cli(venv: Path, argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "repro-audit"), *argv], capture_output=True, text=True, cwd=cwd, env=_env(cwd), timeout=120)


def test_the_core_install_has_no_extras_and_no_matplotlib(core_env):
    python = str(core_env / "bin" / "python")
    probe = "import importlib.util, json; print(json.dumps({m: importlib.util.find_spec(m) is not None for m in ('matplotlib', 'mlflow', 'torch', 'auditor')}))"
    found = json.loads(subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True).stdout)
    site = next((core_env / "lib").glob("python3*/site-packages"))
    size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file() and not f.is_symlink())
    biggest = sorted(((sum(f.stat().st_size for f in d.rglob("*") if f.is_file()), d.name) for d in site.iterdir() if d.is_dir()), reverse=True)[:5]
    print(f"core install: {size / 2**20:.0f} MiB in site-packages; largest: " + ", ".join(f"{n} {s / 2**20:.0f} MiB" for s, n in biggest))
    assert found == {"matplotlib": False, "mlflow": False, "torch": False, "auditor": True}, found
    assert (site / "auditor" / "py.typed").is_file(), "pyproject declares py.typed: the wheel must carry it"


@pytest.mark.parametrize("argv", WRONG_USAGES, ids=[" ".join(a) for a in WRONG_USAGES])
def test_a_wrong_usage_exits_2_without_a_traceback(core_env, argv, tmp_path):
    proc = _cli(core_env, argv, tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, f"{argv}: exit {proc.returncode}\n{out}"
    assert "Traceback" not in out and ("Usage:" in out or "error:" in out.lower()), out
    assert not (tmp_path / ".repro").exists(), "a usage error created state"


def test_help_of_every_verb_exits_0(core_env, tmp_path):
    listed = subprocess.run([str(core_env / "bin" / "python"), "-c", _VERBS], capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    verbs = json.loads(listed.stdout)
    assert {"audit", "nightly", "calibrate"} <= {v[0] for v in verbs} and len(verbs) > 10, verbs
    for verb in [[], *verbs]:
        proc = _cli(core_env, [*verb, "--help"], tmp_path)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"{verb} --help: exit {proc.returncode}\n{out}"
        assert "Traceback" not in out and "Usage:" in out, out


# issue 38, acceptance 4: the verbs that need the registry, pointed at a tracking server
NEEDS_MLFLOW = [
    ["audit", "models:/m/1"],
    ["report", "coverage"],
    ["nightly"],
    ["calibrate", "models:/m/1"],
    ["compare", "models:/m/1", "models:/m/2"],
    ["lineage", "show", "models:/m/1"],
    ["retention", "check"],
]


CASES = [(argv, "http://127.0.0.1:9/") for argv in NEEDS_MLFLOW] + [(["audit", "models:/m/1"], "sqlite:///mlflow.db")]


@pytest.mark.parametrize(("argv", "tracking"), CASES, ids=[f"{' '.join(a)} {t.split(':')[0]}" for a, t in CASES])
def test_a_verb_that_needs_an_extra_names_it(core_env, argv, tracking, tmp_path):
    env = {**_env(tmp_path), "MLFLOW_TRACKING_URI": tracking}
    if tracking.startswith("sqlite:"):  # an existing database (a missing one is answered before MLflow is needed)
        sqlite3.connect(tmp_path / "mlflow.db").close()
    proc = subprocess.run([str(core_env / "bin" / "repro-audit"), *argv], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode in (2, 3), f"{argv}: exit {proc.returncode}\n{out}"
    assert "Traceback" not in out, out
    assert "pip install 'repro-audit[mlflow]'" in out, out


def test_demo_without_the_examples_says_it_needs_a_clone_and_writes_nothing(core_env, tmp_path):
    proc = _cli(core_env, ["demo"], tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out and "needs a clone of the repository" in out, out
    assert list(tmp_path.iterdir()) == [], f"demo wrote {sorted(p.name for p in tmp_path.iterdir())} before its check"
