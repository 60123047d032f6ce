"""DVC-tracked data in a real temporary git+DVC repository: recorded through DVC's API, verified, and changes caught."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.errors import BadInput, NotFound, SnapshotCorrupt
from auditor.snapshots import load_manifest, materialize, verify_snapshot
from auditor.snapshots.dvc import create_dvc_snapshot

pytest.importorskip("dvc", reason="dvc is not installed (dev extra)")


def _run(cwd: Path, *argv: str) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{argv}: {done.stderr}"
    return done.stdout


def _dvc(cwd: Path, *argv: str) -> str:
    return _run(cwd, sys.executable, "-m", "dvc", *argv)


@pytest.fixture()
def repo(tmp_path) -> Path:
    """A git repo whose data/ folder (three files, one nested) is tracked by DVC and committed."""
    root = tmp_path / "project"
    (root / "data" / "images").mkdir(parents=True)
    _run(root, "git", "init", "-q")
    _run(root, "git", "config", "user.email", "t@example.com")
    _run(root, "git", "config", "user.name", "t")
    _dvc(root, "init", "-q")
    (root / "data" / "train.csv").write_text("".join(f"{i},{i % 3}\n" for i in range(2000)))
    (root / "data" / "labels.txt").write_text("cat\ndog\nbird\n")
    (root / "data" / "images" / "0.bin").write_bytes(bytes(range(256)) * 64)
    _dvc(root, "add", "-q", "data")
    _run(root, "git", "add", "-A")
    _run(root, "git", "commit", "-qm", "track data with dvc")
    return root


def _head(repo: Path) -> str:
    return _run(repo, "git", "rev-parse", "HEAD").strip()


def test_a_dvc_tracked_folder_is_recorded_with_dvcs_md5_and_verifies(repo, tmp_path):
    store = tmp_path / "store"
    info = create_dvc_snapshot(repo, "data", store)
    manifest = load_manifest(info.id, store)
    assert manifest.kind == "dvc" and info.files == 3 and info.new_objects == 0
    assert manifest.origin["rev"] == _head(repo) and manifest.origin["path"] == "data"  # HEAD recorded as its commit
    assert sorted(e.path for e in manifest.files) == ["images/0.bin", "labels.txt", "train.csv"]
    import hashlib

    by_path = {e.path: e for e in manifest.files}
    assert by_path["labels.txt"].source["md5"] == hashlib.md5(b"cat\ndog\nbird\n").hexdigest()  # DVC's own hash
    assert "/.dvc/cache/files/md5/" in by_path["labels.txt"].source["uri"]  # the immutable cache object, not the workspace
    assert verify_snapshot(info.id, store) == []
    dest = materialize(info.id, store, tmp_path / "dest")
    assert (dest / "train.csv").read_bytes() == (repo / "data" / "train.csv").read_bytes()
    assert (dest / "images" / "0.bin").read_bytes() == bytes(range(256)) * 64


def test_an_older_revision_is_pinned_as_it_was_after_the_data_changed(repo, tmp_path):
    store = tmp_path / "store"
    old_commit = _head(repo)
    (repo / "data" / "labels.txt").write_text("cat\ndog\nbird\nfish\n")
    _dvc(repo, "add", "-q", "data")
    _run(repo, "git", "commit", "-qam", "more labels")
    old = create_dvc_snapshot(repo, "data", store, rev=old_commit)
    new = create_dvc_snapshot(repo, "data", store, rev="HEAD")
    assert old.id != new.id
    dest = materialize(old.id, store, tmp_path / "old")
    assert (dest / "labels.txt").read_text() == "cat\ndog\nbird\n"  # from the cache, whatever the workspace holds
    assert verify_snapshot(old.id, store) == [] and verify_snapshot(new.id, store) == []


def test_a_changed_byte_in_the_cache_is_caught_by_verify_and_materialize(capsys, repo, tmp_path):
    store = tmp_path / "store"
    info = create_dvc_snapshot(repo, "data", store)
    entry = {e.path: e for e in load_manifest(info.id, store).files}["train.csv"]
    obj = Path(entry.source["uri"][len("file://") :])
    raw = bytearray(obj.read_bytes())
    raw[10] ^= 0x01
    obj.chmod(0o644)
    obj.write_bytes(bytes(raw))
    assert [(p.kind, p.path) for p in verify_snapshot(info.id, store)] == [("changed", "train.csv")]
    with pytest.raises(SnapshotCorrupt, match="train.csv"):
        materialize(info.id, store, tmp_path / "dest")
    with pytest.raises(SystemExit) as exited:
        main(["snapshot", "verify", info.id, "--store", str(store)])
    assert exited.value.code == 1 and "train.csv: changed" in capsys.readouterr().err
    # and pinning again refuses the corrupted cache: the object no longer has the md5 DVC recorded
    with pytest.raises(BadInput, match="md5"):
        create_dvc_snapshot(repo, "data", tmp_path / "store2")


def test_a_workspace_file_edited_through_a_hardlinked_cache_is_caught(repo, tmp_path):
    """With cache.type=hardlink the workspace file *is* the cache object: an in-place edit changes the pinned bytes."""
    _dvc(repo, "config", "cache.type", "hardlink")
    _dvc(repo, "checkout", "-q", "--relink")
    store = tmp_path / "store"
    info = create_dvc_snapshot(repo, "data", store)
    work = repo / "data" / "labels.txt"
    work.chmod(0o644)
    with open(work, "r+b") as handle:  # in place, as an editor that does not replace the file would
        handle.write(b"bat")
    problems = verify_snapshot(info.id, store)
    assert [(p.kind, p.path) for p in problems] == [("changed", "labels.txt")]


def test_an_object_removed_by_dvc_gc_is_lost(repo, tmp_path):
    store = tmp_path / "store"
    old_commit = _head(repo)
    info = create_dvc_snapshot(repo, "data", store, rev=old_commit)
    (repo / "data" / "labels.txt").write_text("changed\n")
    _dvc(repo, "add", "-q", "data")
    _run(repo, "git", "commit", "-qam", "new labels")
    _dvc(repo, "gc", "-w", "-f", "-q")  # keep only what the workspace uses: the old labels.txt object goes
    problems = verify_snapshot(info.id, store)
    assert [(p.kind, p.path) for p in problems] == [("lost", "labels.txt")]


def test_a_single_tracked_file_the_cli_and_refusals(capsys, repo, tmp_path):
    (repo / "extra.parquet").write_bytes(b"PAR1" + os.urandom(1000))
    _dvc(repo, "add", "-q", "extra.parquet")
    _run(repo, "git", "add", "-A")
    _run(repo, "git", "commit", "-qm", "one file")
    with pytest.raises(SystemExit) as exited:
        main(["snapshot", "create", "extra.parquet", "--dvc", "--repo", str(repo), "--store", str(tmp_path / "store")])
    out = capsys.readouterr()
    assert exited.value.code == 0, out.err
    snapshot = out.out.strip()
    assert [e.path for e in load_manifest(snapshot, tmp_path / "store").files] == ["extra.parquet"]
    dest = materialize(snapshot, tmp_path / "store", tmp_path / "dest")
    assert (dest / "extra.parquet").read_bytes() == (repo / "extra.parquet").read_bytes()
    (repo / "plain.txt").write_text("in git, not in dvc")
    _run(repo, "git", "add", "plain.txt")
    _run(repo, "git", "commit", "-qm", "plain")
    with pytest.raises((BadInput, NotFound), match="plain.txt"):
        create_dvc_snapshot(repo, "plain.txt", tmp_path / "store")
    with pytest.raises(NotFound, match="nope"):
        create_dvc_snapshot(repo, "data", tmp_path / "store", rev="nope")
