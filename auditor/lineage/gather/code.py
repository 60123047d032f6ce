"""The code section: commit, dirty flag and the diff that turns the commit into the tree that ran.

git runs through ``auditor.git`` (one invocation everywhere). A missing git or repository is
recorded as data (``git_error``), never raised: the gate decides what that means.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from auditor import git
from auditor.contract import DIFF_FILE
from auditor.digests import sha256_digest, sha256_hex
from auditor.git import GitFailed
from auditor.lineage.record import CodeInfo, UntrackedBinary
from auditor.lineage.redact import redact_diff, redact_text

MAX_BINARY_IN_DIFF = 1 << 20  # untracked binaries above this are listed by hash only


def git_info(repo_dir: Path | str = ".", *, env: Mapping[str, str] | None = None) -> tuple[CodeInfo, str | None]:
    """Commit, dirty flag and a diff covering staged, unstaged and untracked files.

    The auditor's own folders (``.repro``, ``mlruns``, ``mlartifacts``, ``mlflow.db``, a configured
    REPRO_HOME, snapshot store or reports folder inside the repository: ``auditor.lineage.own``) and
    every ``__pycache__`` are left out, whatever the user's ``.gitignore`` says, unless the user
    committed files there: the auditor never dirties the tree it records.

    The diff is taken against HEAD through a *temporary* index (a copy of the real
    one, so git's stat cache keeps it fast) into which every untracked,
    non-ignored file is added: applying it to a clean checkout of the commit
    reproduces the working tree byte for byte. The user's own index is untouched.
    """
    repo_dir = Path(repo_dir).resolve()
    if not git.available():
        return CodeInfo(git_error="git is not installed"), None
    try:
        top = Path(git.output(["rev-parse", "--show-toplevel"], repo_dir).strip())
    except GitFailed as exc:
        return CodeInfo(git_error=f"not a git repository: {repo_dir} ({exc})"), None
    subdir = "" if top == repo_dir else repo_dir.relative_to(top).as_posix()
    try:
        commit = git.output(["rev-parse", "--verify", "HEAD^{commit}"], top).strip()
    except GitFailed:
        return CodeInfo(subdir=subdir, git_error=f"repository {top} has no commit yet"), None
    try:
        url = _absolute_remote(git.output(["remote", "get-url", "origin"], top).strip(), top)
    except GitFailed:
        url = top.as_uri()
    excludes = own_excludes(top, repo_dir, env)
    status = git.output(["status", "--porcelain", "--untracked-files=all", "--", ".", *excludes], top)
    dirty = bool(status.strip())
    code = CodeInfo(repo_url=_without_password(url), commit=commit, dirty=dirty, subdir=subdir)
    if not dirty:
        return code, None

    diff_bytes, binaries = _diff_against_head(top, excludes)
    diff, redactions = redact_diff(diff_bytes.decode("utf-8", "replace"))
    code = code.model_copy(
        update={
            "diff_redactions": redactions,
            "diff_digest": sha256_digest(diff),
            "diff_file": DIFF_FILE,
            "untracked_binary": binaries,
        }
    )
    return code, diff


def own_excludes(top: Path, repo_dir: Path, env: Mapping[str, str] | None = None) -> list[str]:
    """Pathspecs leaving the auditor's own folders out of the capture (those holding no tracked file)."""
    from auditor.lineage.own import DERIVED_PATHSPECS, candidate_excludes

    candidates = candidate_excludes(top, env, cwd=Path.cwd(), project=repo_dir)
    tracked: list[str] = []
    if candidates:
        listed = git.output(["ls-files", "-z", "--", *[f":(literal){c}" for c in candidates]], top)
        tracked = [p for p in listed.split("\0") if p]
    kept = [c for c in candidates if not any(t == c or t.startswith(c + "/") for t in tracked)]
    if kept:
        # git add refuses a pathspec naming an ignored path, even an exclude (README's .gitignore holds .repro/);
        # an ignored folder without tracked files needs no exclude: neither ls-files --others nor add -A sees it
        # exit 1 is "none ignored"
        ignored = str(git.run(["check-ignore", "-z", "--stdin"], top, input="\0".join(kept) + "\0", ok=None).stdout)
        kept = [c for c in kept if c not in set(ignored.split("\0"))]
    return [*(f":(exclude,literal){c}" for c in kept), *DERIVED_PATHSPECS]


def _absolute_remote(url: str, top: Path) -> str:
    """A remote given as a relative path (``../upstream.git``) made absolute: the audit clones from elsewhere."""
    if url and "://" not in url and not Path(url).is_absolute() and not re.match(r"^[^/]+@[^/:]+:", url) and ":" not in url.split("/")[0]:
        return (top / url).resolve().as_uri()
    return url


def _without_password(url: str) -> str:
    """The URL with any ``user:password@`` removed: the auditor clones with its own credentials."""
    return redact_text(re.sub(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+:[^/@\s]*@", r"\1", url))


def _diff_against_head(top: Path, excludes: Sequence[str] = ()) -> tuple[bytes, list[UntrackedBinary]]:
    real_index = Path(git.output(["rev-parse", "--git-path", "index"], top).strip())
    if not real_index.is_absolute():
        real_index = top / real_index
    with tempfile.TemporaryDirectory(prefix="repro-index-") as tmp:
        index = Path(tmp) / "index"
        if real_index.exists():
            shutil.copyfile(real_index, index)
        env = {"GIT_INDEX_FILE": str(index)}
        scope = ["--", ".", *excludes]
        untracked = [p for p in git.output(["ls-files", "--others", "--exclude-standard", "-z", *scope], top).split("\0") if p]
        git.output(["add", "-A", *scope], top, env=env)
        binaries: list[UntrackedBinary] = []
        excluded: list[str] = []
        numstat = git.output(["diff", "--cached", "--numstat", "-z", "HEAD", *scope], top, env=env)
        binary_paths = {entry.split("\t", 2)[2] for entry in numstat.split("\0") if entry.startswith("-\t-\t")}
        for path in untracked:
            if path in binary_paths:
                data = (top / path).read_bytes()
                binaries.append(UntrackedBinary(path=path, sha256=sha256_hex(data), size=len(data)))
                if len(data) > MAX_BINARY_IN_DIFF:
                    excluded.append(path)
        pathspec = [*scope, *[f":(exclude,literal){p}" for p in excluded]]
        # -U0: no context lines, so no line of a committed file (a committed .env) is copied into the diff
        diff = git.output_bytes(["diff", "--cached", "--binary", "--full-index", "-U0", "HEAD", *pathspec], top, env=env)
    return diff, binaries
