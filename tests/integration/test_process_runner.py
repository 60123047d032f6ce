"""The process runner: exit codes, captured logs, a timeout that ends the whole process group, a clean env."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from auditor.errors import InputUnrecoverable
from auditor.rebuild.runners import ProcessRunner, RunSpec


@pytest.fixture(autouse=True, params=["fresh", "warm"])
def start(request, monkeypatch):
    """Every test twice: rebuilds started as fresh interpreters, and forked from a warm worker (issue 41). The pool
    sends a spec whose PYTHONHASHSEED is not pinned to a fresh interpreter (tests/unit/test_warm.py); here it takes
    every spec, so the same isolation is checked on both paths."""
    from auditor.rebuild import warm

    monkeypatch.setattr(warm, "_pinned_hash", lambda env: request.param == "warm")
    return request.param


def _alive(pid: int) -> bool:
    """Running and not a zombie (PID 1 here may not reap orphans, so a dead child can linger as Z)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in {"Z", "X"}


def _spec(tmp_path: Path, code: str, **kwargs) -> RunSpec:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "script.py").write_text(textwrap.dedent(code))
    return RunSpec(argv=["python", "script.py"], cwd=project, output_dir=tmp_path / "out", **kwargs)


def test_exit_code_and_full_log_are_returned_and_kept_in_a_file(tmp_path):
    spec = _spec(
        tmp_path,
        """
        import sys
        for i in range(2000):
            print(f"line {i}")
        print("to stderr", file=sys.stderr)
        sys.exit(3)
        """,
    )
    outcome = ProcessRunner().run(spec)
    assert outcome.exit_code == 3
    assert not outcome.ok and not outcome.timed_out
    assert outcome.log.startswith("line 0\n")
    assert "line 1999" in outcome.log and "to stderr" in outcome.log
    assert outcome.log_tail.endswith("to stderr\n") and len(outcome.log_tail) < len(outcome.log)
    assert outcome.log_path == tmp_path / "out" / "rebuild.log"
    assert outcome.log_path.read_text() == outcome.log
    assert outcome.accelerator_s is None


def test_a_successful_run_writes_into_the_output_dir_it_is_given(tmp_path):
    spec = _spec(
        tmp_path,
        """
        import os, pathlib
        pathlib.Path(os.environ["REPRO_OUTPUT_DIR"], "metrics.json").write_text('{"metric": 1.0}')
        """,
    )
    outcome = ProcessRunner().run(spec)
    assert outcome.ok, outcome.log
    assert json.loads((tmp_path / "out" / "metrics.json").read_text()) == {"metric": 1.0}


def test_timeout_kills_the_process_group_including_grandchildren_that_ignore_sigterm(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    spec = _spec(
        tmp_path,
        f"""
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        print("started", flush=True)
        time.sleep(120)
        """,
        timeout_s=3,
    )
    start = time.monotonic()
    outcome = ProcessRunner(kill_grace_s=0.5).run(spec)
    assert outcome.timed_out
    assert outcome.exit_code == -9  # SIGTERM was ignored, so the group got SIGKILL
    assert "started" in outcome.log
    assert time.monotonic() - start < 60  # generous: only proves we did not wait for the 120 s sleep
    grandchild = int(pid_file.read_text())
    for _ in range(50):
        if not _alive(grandchild):
            break
        time.sleep(0.1)
    assert not _alive(grandchild), f"grandchild {grandchild} survived the timeout"


def test_the_child_sees_only_the_allowlist_the_spec_and_the_contract_never_a_planted_secret(tmp_path, monkeypatch):
    canary = "AKIAcanary-do-not-leak-7f3a9"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", canary)
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", canary)
    monkeypatch.setenv("REPRO_TRAIN_DATA", canary)
    data = tmp_path / "data"
    data.mkdir()
    config = tmp_path / "config.json"
    config.write_text("{}")
    spec = _spec(
        tmp_path,
        """
        import json, os, sys
        print(json.dumps({"env": dict(os.environ), "python": sys.executable}))
        """,
        env={"REPRO_SEED": "7", "PYTHONHASHSEED": "0"},
        data={"train-set": data},
        config_file=config,
    )
    outcome = ProcessRunner().run(spec)
    assert outcome.ok, outcome.log
    assert canary not in outcome.log
    seen = json.loads(outcome.log)
    env = seen["env"]
    assert not {"AWS_SECRET_ACCESS_KEY", "MLFLOW_TRACKING_TOKEN", "REPRO_TRAIN_DATA"} & env.keys()
    assert env["REPRO_SEED"] == "7" and env["PYTHONHASHSEED"] == "0"
    assert env["REPRO_REBUILD"] == "1"
    assert env["REPRO_OUTPUT_DIR"] == str((tmp_path / "out").resolve())
    assert env["REPRO_DATA_TRAIN_SET"] == str(data.resolve())
    assert env["REPRO_CONFIG"] == str(config.resolve())
    assert set(env) <= {
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TZ",
        "TMPDIR",
        "REPRO_SEED",
        "PYTHONHASHSEED",
        "REPRO_REBUILD",
        "REPRO_OUTPUT_DIR",
        "REPRO_DATA_TRAIN_SET",
        "REPRO_CONFIG",
        "PYTHONUNBUFFERED",
    }
    # "python" in a recorded entry point means the auditor's own interpreter, not the first on PATH
    assert os.path.samefile(seen["python"], sys.executable)


def test_an_entry_point_that_cannot_start_fails_naming_it(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    spec = RunSpec(argv=["no-such-trainer", "--fit"], cwd=project, output_dir=tmp_path / "out")
    with pytest.raises(InputUnrecoverable, match="no-such-trainer"):
        ProcessRunner().run(spec)


def test_a_missing_project_directory_fails_naming_it(tmp_path):
    spec = RunSpec(argv=["python", "train.py"], cwd=tmp_path / "gone", output_dir=tmp_path / "out")
    with pytest.raises(InputUnrecoverable, match="gone"):
        ProcessRunner().run(spec)


REACH = """
import socket, sys
print(socket.socket().connect_ex(("127.0.0.1", int(sys.argv[1]))))
"""


def test_a_spec_without_network_cannot_reach_a_loopback_port_the_same_spec_with_network_reaches(tmp_path):
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = str(listener.getsockname()[1])
    try:
        answers = {}
        for network in (True, False):
            (tmp_path / str(network)).mkdir()
            spec = _spec(tmp_path / str(network), REACH)
            spec = RunSpec(argv=[*spec.argv, port], cwd=spec.cwd, output_dir=spec.output_dir, network=network)
            outcome = ProcessRunner().run(spec)
            assert outcome.exit_code == 0, outcome.log
            answers[network] = int(outcome.log.strip().splitlines()[-1])
    finally:
        listener.close()
    assert answers[True] == 0 and answers[False] != 0, answers
    assert "no network" in (tmp_path / "False" / "out" / "rebuild.log").read_text()


def test_no_network_is_refused_where_the_host_cannot_make_a_network_namespace(tmp_path, monkeypatch):
    """A host without util-linux's unshare, made real by a PATH that lacks it (not a mock of the probe)."""
    from auditor.errors import InfrastructureError
    from auditor.rebuild import runners

    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    runners.no_network_prefix.cache_clear()
    try:
        with pytest.raises(InfrastructureError, match="no network.*unshare"):
            ProcessRunner().run(_spec(tmp_path, "print('never')", network=False))
        assert not (tmp_path / "out" / "rebuild.log").exists() or "never" not in (tmp_path / "out" / "rebuild.log").read_text()
    finally:
        runners.no_network_prefix.cache_clear()
