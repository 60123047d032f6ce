"""A DVC snapshot records the repository's DVC remote, so another host materialises it from there (issue 29,
build 8, acceptance 6 second half).

Real parts: git, DVC 3 (``dvc add``, a local-path default remote, ``dvc push``), the snapshot store. "Another host"
is a second folder with no DVC cache at all: the first repository's cache is deleted after the snapshot is made.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.errors import SnapshotCorrupt
from auditor.snapshots import load_manifest, materialize
from auditor.snapshots.dvc import create_dvc_snapshot

pytest.importorskip("dvc", reason="dvc is not installed (dev extra)")

FILES = {"train.csv": "".join(f"{i},{i % 3}\n" for i in range(500)), "nested/labels.txt": "cat\ndog\n"}


def _run(cwd: Path, *argv: str) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{argv}: {done.stderr}"


@pytest.fixture()
def pushed(tmp_path):
    """A git+DVC project whose data/ is tracked, pushed to a local-path default remote, and snapshotted; then its
    cache is deleted, as on a host that never had it: (snapshot id, store, remote folder)."""
    project, remote, store = tmp_path / "trainer-host", tmp_path / "dvc-remote", str(tmp_path / "snapshots")
    for rel, text in FILES.items():
        (project / "data" / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / "data" / rel).write_text(text)
    _run(project, "git", "init", "-q")
    _run(project, "git", "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "start")
    dvc = [sys.executable, "-m", "dvc"]
    _run(project, *dvc, "init", "-q")
    _run(project, *dvc, "add", "-q", "data")
    _run(project, *dvc, "remote", "add", "-d", "shared", str(remote))
    _run(project, *dvc, "push", "-q")
    _run(project, "git", "add", "-A")
    _run(project, "git", "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "data")
    info = create_dvc_snapshot(project, "data", store)
    shutil.rmtree(project / ".dvc" / "cache")  # the snapshot's recorded cache objects are gone from this host
    return info.id, store, remote


def test_a_dvc_snapshot_records_its_remote_and_materialises_from_it_in_a_clean_folder(pushed, tmp_path):
    sid, store, remote = pushed
    manifest = load_manifest(sid, store)
    assert manifest.origin["remote_name"] == "shared" and manifest.origin["remote"] == f"file://{remote}/files/md5"
    assert all(e.source["remote"].startswith(manifest.origin["remote"] + "/") for e in manifest.files)
    out = materialize(sid, store, tmp_path / "gpu-worker" / "data")
    assert {p.relative_to(out).as_posix(): p.read_text() for p in out.rglob("*") if p.is_file()} == FILES


def test_a_remote_object_changed_since_the_snapshot_is_refused_not_materialised(pushed, tmp_path):
    sid, store, remote = pushed
    target = next(e.source["remote"] for e in load_manifest(sid, store).files if e.path == "train.csv")
    Path(target.removeprefix("file://")).write_text("0,0\n")  # the remote's object rewritten in place
    with pytest.raises(SnapshotCorrupt, match="train.csv"):
        materialize(sid, store, tmp_path / "gpu-worker" / "data")
    assert not (tmp_path / "gpu-worker" / "data").exists()
