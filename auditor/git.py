"""The one place that runs the ``git`` executable.

Capture (``auditor.lineage.gather``: commit, diff, local packages), the read tracer's
ignored-file check (``auditor.lineage.tracing``) and the rebuild's workspace
(``auditor.rebuild.workspace``: mirror, checkout, apply) all run git through here, so every call
is the same invocation:

- ``git -c core.autocrlf=false -c core.quotepath=off …``: bytes as committed (a diff taken at
  training time applies to the checkout at audit time whatever either machine's global config
  says), paths printed as they are;
- the caller's environment with ``LC_ALL=C`` (messages the same everywhere) and
  ``GIT_TERMINAL_PROMPT=0`` (a credential prompt would hang an unattended audit) on top, then
  any variables the call passes (``GIT_INDEX_FILE`` for a temporary index).

A git that cannot be started (not installed, a folder that does not exist) or that exits with a
status the call did not accept raises :class:`GitFailed`, an ``InfrastructureError``; callers that
record a failure as data (capture's ``git_error``) or give it a meaning of their own (a commit gone
is ``InputUnrecoverable``) catch it. Its message names the subcommand, never the arguments (a remote
URL may carry a token), and any ``user:password@`` that git echoes in a URL is cut out. Low in
the layers: the standard library and ``auditor.errors`` only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from auditor.errors import InfrastructureError

#: the options every call runs with, before its own arguments
OPTIONS = ("-c", "core.autocrlf=false", "-c", "core.quotepath=off")
#: the variables every call runs with, over the process environment (a call's own ``env`` wins)
ENVIRONMENT = {"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}

_USERINFO = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")


class GitFailed(InfrastructureError):
    """git could not be started, or exited with a status the call did not accept."""

    def __init__(self, args: Sequence[str], returncode: int | None, stderr: str) -> None:
        self.git_args = tuple(args)
        self.returncode = returncode  # None: git did not start
        self.stderr = stderr
        if returncode is None:
            message = f"git could not be started: {stderr}"
        else:
            message = stderr.strip() or f"git {_subcommand(args)} exited {returncode}"
        super().__init__(message)


@dataclass(frozen=True)
class Result:
    """What one git call gave: its exit status, its output (text or bytes, as asked) and its messages."""

    returncode: int
    stdout: str | bytes
    stderr: str


def available() -> bool:
    """Whether a ``git`` executable is on the PATH."""
    return shutil.which("git") is not None


def run(
    args: Sequence[str],
    cwd: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    input: str | bytes | None = None,  # noqa: A002 - subprocess's own name for it
    text: bool = True,
    ok: Collection[int] | None = (0,),
) -> Result:
    """Run ``git OPTIONS *args`` in ``cwd``; raise :class:`GitFailed` unless it exits with a status in ``ok``.

    ``ok=None`` accepts every exit status (the caller reads ``returncode``); a git that cannot be
    started raises all the same. ``text=False`` gives ``stdout`` as bytes (``input`` must be bytes
    then); ``stderr`` is always text.
    """
    try:
        proc = subprocess.run(  # noqa: S603 - the executable is git, the arguments are the caller's
            ["git", *OPTIONS, *args],
            cwd=cwd,
            input=input,
            capture_output=True,
            text=text,
            env={**os.environ, **ENVIRONMENT, **(env or {})},
            check=False,
        )
    except OSError as exc:
        raise GitFailed(args, None, _without_userinfo(str(exc))) from None
    stderr = proc.stderr if text else proc.stderr.decode("utf-8", "replace")
    stderr = _without_userinfo(stderr)
    if ok is not None and proc.returncode not in ok:
        raise GitFailed(args, proc.returncode, stderr)
    return Result(returncode=proc.returncode, stdout=proc.stdout, stderr=stderr)


def output(
    args: Sequence[str],
    cwd: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    input: str | None = None,  # noqa: A002
) -> str:
    """The text git prints for ``args`` (exit 0 expected, else :class:`GitFailed`)."""
    result = run(args, cwd, env=env, input=input)
    return str(result.stdout)


def output_bytes(args: Sequence[str], cwd: Path | str | None = None, *, env: Mapping[str, str] | None = None) -> bytes:
    """The bytes git prints for ``args`` (a binary diff), exit 0 expected, else :class:`GitFailed`."""
    result = run(args, cwd, env=env, text=False)
    return bytes(result.stdout)


def _subcommand(args: Sequence[str]) -> str:
    """The git command ``args`` run (``fetch`` in ``--git-dir X fetch``), for messages."""
    words = iter(args)
    for word in words:
        if word in ("-c", "-C", "--git-dir", "--work-tree"):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return ""


def _without_userinfo(text: str) -> str:
    """``scheme://user:password@host`` as ``scheme://host``: git echoes remote URLs in its errors."""
    return _USERINFO.sub(r"\1", text)
