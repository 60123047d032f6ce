"""The rebuild workspace: the recorded code, config and data, laid out for one rebuild.

From a run record: the code at the recorded commit (fetched into a bare cache
of the recorded repository, then a clean checkout), the recorded diff applied
when the tree was dirty, the resolved config written out, and every data
snapshot materialised *and verified*. Built in a temporary folder and renamed
into place only when complete, so a failure never leaves a half-built
workspace behind. Each failure names its cause.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from auditor import git
from auditor.digests import same, sha256_digest, sha256_file, sha256_hex
from auditor.errors import BadInput, InfrastructureError, InputUnrecoverable
from auditor.lineage.record import RunRecord
from auditor.lineage.redact import redact_text, restore_committed_lines

CONFIG_FILE = "resolved_config.json"


@dataclass(frozen=True)
class Workspace:
    root: Path
    repo_dir: Path  # the checkout
    project_dir: Path  # where the entrypoint runs (repo_dir / code.subdir)
    config_path: Path
    data_dirs: dict[str, Path]


def _git(args: list[str], cwd: Path | None = None) -> git.Result:
    """One git call (``auditor.git``), whatever its exit status; a git that cannot be started raises ``GitFailed``."""
    result = git.run(args, cwd, ok=None)
    # git echoes URLs (credentials included) in its errors, which end up in reports
    return git.Result(returncode=result.returncode, stdout=result.stdout, stderr=redact_text(result.stderr))


def fetch_commit(repo_url: str, commit: str, cache_root: Path) -> Path:
    """A bare mirror of ``repo_url`` in ``cache_root`` that holds ``commit``.

    The mirror is fetched again when it lacks the commit; an unreachable
    repository is an infrastructure error (retryable) unless the cache already
    has the commit, and a reachable one without the commit means the input is gone.
    """
    cache_root = _absolute(cache_root)
    cache = cache_root / sha256_hex(repo_url.encode())[:16]
    if not (cache / "HEAD").exists():
        cache_root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".clone-", dir=cache_root))
        result = _git(["clone", "--quiet", "--mirror", repo_url, str(tmp / "repo.git")])
        if result.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise InfrastructureError(f"repository {repo_url} is unreachable: {result.stderr.strip()}", hint="check the URL and credentials; retry")
        try:
            os.rename(tmp / "repo.git", cache)
        except OSError:
            pass  # another rebuild filled the cache first: use theirs
        shutil.rmtree(tmp, ignore_errors=True)
    if _has_commit(cache, commit):
        return cache
    result = _git(["--git-dir", str(cache), "fetch", "--quiet", "--prune", "origin", "+refs/*:refs/*"])
    if result.returncode != 0:
        raise InfrastructureError(f"repository {repo_url} is unreachable: {result.stderr.strip()}", hint="retry later")
    if not _has_commit(cache, commit):
        raise InputUnrecoverable(
            f"commit {commit} no longer exists in {repo_url}",
            hint="it was rewritten or deleted; restore it from a backup or a fork, or re-train and re-register",
        )
    return cache


def _absolute(path: Path) -> Path:
    """``path`` made absolute against the current folder, once, before any git call or runner sees it."""
    return Path(os.path.abspath(path))


def _has_commit(git_dir: Path, commit: str) -> bool:
    return _git(["--git-dir", str(git_dir), "cat-file", "-e", f"{commit}^{{commit}}"]).returncode == 0


def _checkout(cache: Path, commit: str, dest: Path) -> None:
    for args, cwd in (
        (["clone", "--quiet", "--no-checkout", "--shared", str(cache), str(dest)], None),
        (["-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", commit], dest),
    ):
        result = _git(args, cwd)
        if result.returncode != 0:
            raise InfrastructureError(f"cannot check out {commit}: {result.stderr.strip()}")


def checkout_commit(repo_url: str, commit: str, dest: Path, *, git_cache: Path) -> Path:
    """A clean checkout of ``commit`` of ``repo_url`` at ``dest`` (absolute), fetched through the bare cache."""
    dest = _absolute(Path(dest))
    _checkout(fetch_commit(repo_url, commit, _absolute(Path(git_cache))), commit, dest)
    return dest


def _apply_diff(repo: Path, diff: str, record: RunRecord) -> None:
    code = record.code
    digest = sha256_digest(diff)
    if digest != code.diff_digest:
        raise InputUnrecoverable(f"the stored diff's digest {digest[:19]}… differs from the recorded {code.diff_digest[:19]}…", hint="the diff was altered after training")
    # The diff is stored without context lines (-U0) and with the removed lines' secrets redacted:
    # the committed text of those lines comes back from the checkout itself, then git applies it
    # with --unidiff-zero. A secret on an *added* line stays a marker (the gate names file and line).
    diff = restore_committed_lines(diff, lambda path: _committed_text(repo, path))
    # absolute: git runs in the checkout, so a relative path would name a file that is not there
    patch = _absolute(repo.parent / "recorded.patch")
    patch.write_text(diff, encoding="utf-8")
    result = _git(["apply", "--binary", "--unidiff-zero", "--whitespace=nowarn", str(patch)], _absolute(repo))
    patch.unlink()
    if result.returncode != 0:
        raise InputUnrecoverable(f"the recorded diff does not apply to commit {code.commit}: {result.stderr.strip()}")
    for binary in code.untracked_binary:
        path = repo / binary.path
        if not path.is_file() or not same(sha256_file(path), binary.sha256):
            raise InputUnrecoverable(f"untracked binary file {binary.path} ({binary.size} bytes) was not stored with the run", hint="commit it or snapshot it as data")


def _committed_text(repo: Path, path: str) -> str | None:
    """A checked-out file's text, for restoring a diff's removed lines; None outside the checkout or unreadable."""
    root = _absolute(repo).resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        return None
    try:
        return target.read_bytes().decode("utf-8", "replace")
    except OSError:
        return None


def _materialise_data(record: RunRecord, data_root: Path) -> dict[str, Path]:
    from auditor.snapshots import materialize
    from auditor.storage import open_store

    dirs: dict[str, Path] = {}
    for name, ref in record.data.items():
        dest = data_root / name
        if ref.kind == "snapshot" and ref.version:
            # Delta tables and versioned S3 prefixes are recorded as snapshots too
            # (create_delta_snapshot, create_reference_snapshot): one path verifies them all.
            # copies, not hard links: the training script must not be able to write into the store
            materialize(ref.version, open_store(ref.uri), dest, link=False)
        else:
            raise InputUnrecoverable(
                f"data ref {name!r} ({ref.kind} {ref.uri!r}) is not a snapshot the audit can materialise and verify",
                hint="record it as a snapshot id (repro-audit snapshot create, or create_delta_snapshot for a Delta table)",
            )
        dirs[name] = dest
    return dirs


def prepare_workspace(record: RunRecord, diff: str | None, *, dest: Path, git_cache: Path) -> Workspace:
    """Lay out code, config and data for ``record`` at ``dest`` (which must not exist yet).

    Every path in the returned workspace is absolute (``REPRO_HOME=.repro`` is relative by default):
    git and the runners run in other folders, where a relative path names something else.
    """
    dest, git_cache = _absolute(Path(dest)), _absolute(Path(git_cache))
    code = record.code
    if code is None or not code.commit or not code.repo_url:
        raise BadInput("the record names no repository and commit to rebuild from", hint="see the gate's findings")
    if code.dirty and diff is None:
        raise InputUnrecoverable("the tree was dirty at training time and no diff was stored")
    if dest.exists():
        raise BadInput(f"workspace {dest} already exists", hint="pass a new folder")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        cache = fetch_commit(code.repo_url, code.commit, git_cache)
        _checkout(cache, code.commit, tmp / "code")
        if code.dirty:
            _apply_diff(tmp / "code", diff, record)
        (tmp / CONFIG_FILE).write_text(json.dumps(record.config.resolved if record.config else {}, indent=2, sort_keys=True))
        data_dirs = _materialise_data(record, tmp / "data")
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    repo_dir = dest / "code"
    return Workspace(
        root=dest,
        repo_dir=repo_dir,
        project_dir=repo_dir / code.subdir if code.subdir else repo_dir,
        config_path=dest / CONFIG_FILE,
        data_dirs={name: dest / "data" / name for name in data_dirs},
    )
