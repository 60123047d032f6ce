"""The CLI behaves like the tools it sits beside (issue 16, build point 1; acceptance 1).

The usage-error table is generated from the click command tree, so every verb (and any verb added
later) is covered for every kind of mistake its parameters allow: unknown option, unknown command,
missing value, value of the wrong type, out-of-range value, bad choice, missing argument, no
arguments, extra argument. Those run in-process through ``auditor.cli.main`` (cheap: ~150 cases);
``test_cli_usage.py`` runs the same kinds through the real console script. The rest runs the real
console script in a subprocess, piped as a script or an Airflow task would run it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [str(Path(sys.executable).with_name("repro-audit"))]
PHRASES = {
    "unknown option": "No such option",
    "unknown command": "No such command",
    "missing option value": "requires an argument",
    "wrong type": "should be a valid integer",  # typer 0.29 validates through pydantic
    "out of range": "should be greater than or equal to",
    "bad choice": "is not one of",
    "missing argument": "Missing argument",
    "no arguments": "Usage:",
    "extra argument": "unexpected extra argument",
}


def _tree():
    import typer

    from auditor.cli import _load_commands, app

    _load_commands()
    return typer.main.get_command(app)


def _leaves(group, path=()):
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):
            yield (*path, name), command, True
            yield from _leaves(command, (*path, name))
        else:
            yield (*path, name), command, False


def _annotation(param):
    """The parameter's Python type (typer 0.29 keeps it on ``type_descriptor``), ``X | None`` unwrapped."""
    import types
    import typing

    hint = param.type_descriptor.annotation
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    return hint


def _kind(param) -> str:
    import enum

    hint = _annotation(param)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "choice"
    if hint is int:
        return "int"
    return "other"


def _filler(param) -> str:
    """A value the parameter accepts, to fill required ones."""
    if _kind(param) == "choice":
        return next(iter(_annotation(param))).value
    if _kind(param) == "int":
        return str(max(param.min or 0, 3))
    if param.name in ("model_ref", "ref") or getattr(param.callback, "__name__", "") == "model_ref":  # parsed at the door
        return "models:/m/1"
    return "x"


def _required(command) -> list[str]:
    args: list[str] = []
    for p in command.params:
        if p.required and p.param_type_name == "option":
            args += [p.opts[0], _filler(p)]
    # an optional model reference (``adopt [REF]``) is filled too: the extra arguments must be extra, not the ref
    args += [_filler(p) for p in command.params if p.param_type_name == "argument"
             and (p.required or p.name in ("model_ref", "ref"))]
    return args


def _cases():
    cases = [("no arguments", "repro-audit", []), ("unknown command", "repro-audit", ["nosuchcmd"]),
             ("unknown option", "repro-audit", ["--nope"])]
    for path, command, is_group in _leaves(_tree()):
        verb, argv = " ".join(path), list(path)
        if is_group:
            cases += [("no arguments", verb, argv), ("unknown command", verb, [*argv, "nosuchcmd"])]
            continue
        required = _required(command)
        cases.append(("unknown option", verb, [*argv, *required, "--nope"]))
        if any(p.param_type_name == "argument" and p.required for p in command.params):
            cases.append(("missing argument", verb, argv))
        cases.append(("extra argument", verb, [*argv, *required, "extra-1", "extra-2"]))
        for p in command.params:
            if p.param_type_name != "option" or p.is_flag or p.hidden:
                continue
            kind = _kind(p)
            cases.append(("missing option value", f"{verb} {p.opts[0]}", [*argv, *required, p.opts[0]]))
            if kind == "int":
                cases.append(("wrong type", f"{verb} {p.opts[0]}", [*argv, *required, p.opts[0], "abc"]))
            if kind == "int" and p.min is not None:
                cases.append(("out of range", f"{verb} {p.opts[0]}", [*argv, *required, p.opts[0], str(p.min - 1)]))
            if kind == "choice":
                cases.append(("bad choice", f"{verb} {p.opts[0]}", [*argv, *required, p.opts[0], "no-such-choice"]))
    return cases


CASES = _cases()


@pytest.fixture()
def restore_logging():
    loggers = [logging.getLogger(n) for n in ("auditor", "urllib3.connectionpool")]
    saved = [(lg.handlers[:], lg.level) for lg in loggers]
    yield
    for lg, (handlers, level) in zip(loggers, saved, strict=True):
        lg.handlers, lg.level = handlers, level


def test_the_table_covers_every_kind_and_every_verb():
    kinds = {kind for kind, _, _ in CASES}
    assert kinds == set(PHRASES), set(PHRASES) - kinds
    verbs = {" ".join(path) for path, _, is_group in _leaves(_tree()) if not is_group}
    covered = {verb for kind, verb, _ in CASES if kind == "unknown option"}
    assert verbs <= covered and {"audit", "nightly", "lineage show", "evidence verify", "snapshot create"} <= verbs


@pytest.mark.parametrize(("kind", "verb", "argv"), CASES, ids=[f"{v}: {k}" for k, v, _ in CASES])
def test_every_usage_error_exits_2_naming_the_mistake(kind, verb, argv, capsys, restore_logging, tmp_path, monkeypatch):
    from auditor.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(argv)
    out = capsys.readouterr()
    text = out.out + out.err
    assert exited.value.code == 2, f"{verb} ({kind}): exit {exited.value.code}\n{text}"
    assert PHRASES[kind] in text, f"{verb} ({kind}): {text}"
    assert "Traceback" not in text
    assert not (tmp_path / ".repro").exists(), "a usage error created state"


def test_every_parameter_of_every_command_has_help_text():
    missing = []

    def walk(command, path):
        for p in command.params:
            if not (getattr(p, "help", None) or "").strip():
                missing.append(f"{' '.join(path)} {p.name}")
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(_tree(), ["repro-audit"])
    assert missing == []


def test_every_verb_that_reads_the_registry_takes_tracking_uri():
    tree = _tree()
    for path in (("rebuild",), ("calibrate",), ("audit",), ("nightly",), ("lineage", "show")):
        command = tree
        for name in path:
            command = command.commands[name]
        assert any("--tracking-uri" in p.opts for p in command.params), path


def _run(argv, tmp_path, **env):
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "80"}
    if "PYTHONPATH" in os.environ:  # a checkout other than the installed one (a worktree)
        base["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run(CLI + argv, capture_output=True, text=True, cwd=tmp_path, env={**base, **env}, timeout=120)


def test_shell_completion_is_offered_and_completes_verbs(tmp_path):
    shown = _run(["completion", "bash"], tmp_path)
    assert shown.returncode == 0 and "_REPRO_AUDIT_COMPLETE=complete_bash" in shown.stdout
    assert "complete -o default -F _repro_audit_completion repro-audit" in shown.stdout
    completed = _run([], tmp_path, _REPRO_AUDIT_COMPLETE="complete_bash", COMP_WORDS="repro-audit evidence ve", COMP_CWORD="2")
    assert completed.returncode == 0 and completed.stdout.split() == ["verify"]


def test_under_json_an_error_is_json_on_stdout_with_the_same_exit_code(tmp_path):
    missing = tmp_path / "typo.db"
    proc = _run(["audit", "models:/m/1", "--json", "--tracking-uri", f"sqlite:///{missing}"], tmp_path)
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    assert doc["exit_code"] == 2 and str(missing) in doc["error"] and "--tracking-uri" in doc["hint"]
    assert "error:" in proc.stderr  # and still on stderr for a person
    usage = _run(["audit", "--json"], tmp_path)
    assert usage.returncode == 2 and json.loads(usage.stdout) == {
        "error": "Missing argument 'MODEL_REF'.", "exit_code": 2, "hint": "see 'repro-audit audit --help'"}


def test_piped_output_never_wraps_or_cuts_a_digest(sqlite_tracking_uri, tmp_path):
    """Piped at COLUMNS=80, the table of ``lineage show`` keeps each 64-hex digest whole on one line."""
    from tests.fixtures.mlflow import seed_version
    from tests.fixtures.records import IMAGE_DIGEST, complete_record

    record = complete_record()
    seed_version(sqlite_tracking_uri, "piped", record, weights=b"w")
    proc = _run(["lineage", "show", "models:/piped/1", "--tracking-uri", sqlite_tracking_uri], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for digest in (record.digest(), IMAGE_DIGEST):
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest)
        assert any(digest in line for line in proc.stdout.splitlines()), f"{digest} wrapped or cut:\n{proc.stdout}"


def test_piped_progress_is_timestamped_stage_lines_on_stderr(sqlite_tracking_uri, tmp_path):
    """Not a terminal: the library's stages, logged through ``logging``, come out as timestamped lines."""
    from tests.fixtures.mlflow import seed_version

    seed_version(sqlite_tracking_uri, "plain", None)  # no record: judged without a rebuild
    proc = _run(["audit", "models:/plain/1", "--no-publish", "--tracking-uri", sqlite_tracking_uri], tmp_path,
                REPRO_HOME=str(tmp_path / "home"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    stages = re.findall(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO auditor\.steps\.\w+: (.*)$", proc.stderr, re.M)
    assert any(s.startswith("audit models:/plain/1: started") for s in stages), proc.stderr
    assert any(s.startswith("audit models:/plain/1: NOT_REPRODUCIBLE in") for s in stages), proc.stderr
    assert "NOT_REPRODUCIBLE" in proc.stdout and "INFO" not in proc.stdout
