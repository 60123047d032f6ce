"""Snapshots end to end on a local store, driven through the CLI as users and the audit drive them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from auditor.canonical import canonical_json
from auditor.cli import main
from auditor.errors import BadInput, SnapshotCorrupt, UnsafePath
from auditor.snapshots import create_snapshot, load_manifest, materialize, verify_snapshot
from auditor.snapshots.hashing import hash_bytes
from auditor.snapshots.manifest import FORMAT
from auditor.snapshots.store import manifest_key, object_key
from auditor.storage import open_store


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``repro-audit ARGV`` in-process; (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out = capsys.readouterr()
    return exited.value.code, out.out, out.err


@pytest.fixture()
def dataset(tmp_path) -> Path:
    root = tmp_path / "data"
    (root / "train").mkdir(parents=True)
    (root / "train" / "part-0.csv").write_bytes(b"a,b\n" + b"1,2\n" * 5000)
    (root / "train" / "part-1.csv").write_bytes(b"a,b\n" + b"3,4\n" * 5000)
    (root / "README").write_text("customers table, 2026-11-29\n")
    (root / "copy-of-readme").write_text("customers table, 2026-11-29\n")
    (root / "empty").mkdir()
    (root / "latest.csv").symlink_to("train/part-1.csv")
    return root


@pytest.fixture()
def store_dir(tmp_path) -> Path:
    return tmp_path / "store"


@pytest.fixture()
def snapshot_id(capsys, dataset, store_dir) -> str:
    code, out, err = cli(capsys, "snapshot", "create", str(dataset), "--store", str(store_dir))
    assert code == 0, err
    return out.strip()


def _object_of(snapshot: str, store_dir: Path, path: str) -> Path:
    entry = {e.path: e for e in load_manifest(snapshot, store_dir).entries}[path]
    found = open_store(store_dir).local_path(object_key(entry.hash))
    found.chmod(0o644)  # objects are stored read-only; the test plays the vandal
    return found


def _flip_byte(path: Path, offset: int = 100) -> None:
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same mtime: only a re-hash sees it


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-10])


def _nothing_beside(dest: Path) -> bool:
    return not dest.exists() and not [p for p in dest.parent.iterdir() if p.name.startswith(f".{dest.name}.")]


def test_create_prints_the_id_and_verify_and_materialize_succeed(capsys, snapshot_id, store_dir, tmp_path, dataset):
    assert snapshot_id.startswith("blake3:") and len(snapshot_id) == 71
    assert cli(capsys, "snapshot", "verify", snapshot_id, "--store", str(store_dir))[0] == 0
    dest = tmp_path / "out" / "data"
    code, out, _ = cli(capsys, "snapshot", "materialize", snapshot_id, str(dest), "--store", str(store_dir))
    assert code == 0 and out.strip() == str(dest)
    assert (dest / "train" / "part-0.csv").read_bytes() == (dataset / "train" / "part-0.csv").read_bytes()
    assert os.readlink(dest / "latest.csv") == "train/part-1.csv"
    assert (dest / "empty").is_dir() and not any((dest / "empty").iterdir())
    assert cli(capsys, "snapshot", "verify", snapshot_id, "--store", str(store_dir), "--path", str(dest))[0] == 0


def test_json_output_is_machine_readable(capsys, dataset, store_dir, tmp_path):
    code, out, _ = cli(capsys, "snapshot", "create", str(dataset), "--store", str(store_dir), "--json")
    info = json.loads(out)
    assert code == 0 and info["files"] == 4 and info["new_objects"] == 3  # README and its copy share one object
    code, out, _ = cli(capsys, "snapshot", "verify", info["id"], "--store", str(store_dir), "--json")
    assert code == 0 and json.loads(out) == {"id": info["id"], "ok": True, "problems": []}
    dest = tmp_path / "dest"
    code, out, _ = cli(capsys, "snapshot", "materialize", info["id"], str(dest), "--store", str(store_dir), "--json")
    assert code == 0 and json.loads(out)["dest"] == str(dest)


def test_snapshotting_the_same_data_again_stores_nothing_new(dataset, store_dir):
    first = create_snapshot(dataset, store_dir)
    again = create_snapshot(dataset, store_dir)
    assert again.id == first.id and again.new_objects == 0


def test_two_concurrent_creates_of_one_directory_agree(dataset, store_dir):
    results = []
    threads = [threading.Thread(target=lambda: results.append(create_snapshot(dataset, store_dir))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({r.id for r in results}) == 1
    assert verify_snapshot(results[0].id, store_dir) == []


STORE_DAMAGE = {
    "flip one byte": (_flip_byte, "changed"),
    "truncate": (_truncate, "truncated"),
    "delete": (Path.unlink, "missing"),
}


@pytest.mark.parametrize("damage", list(STORE_DAMAGE))
def test_damage_in_the_store_fails_verify_and_materialize_naming_the_path(capsys, damage, snapshot_id, store_dir, tmp_path):
    harm, kind = STORE_DAMAGE[damage]
    harm(_object_of(snapshot_id, store_dir, "train/part-0.csv"))
    code, _, err = cli(capsys, "snapshot", "verify", snapshot_id, "--store", str(store_dir))
    assert code == 1
    assert f"train/part-0.csv: {kind}" in err
    code, out, _ = cli(capsys, "snapshot", "verify", snapshot_id, "--store", str(store_dir), "--json")
    problems = json.loads(out)["problems"]
    assert code == 1 and [(p["path"], p["kind"]) for p in problems] == [("train/part-0.csv", kind)]
    dest = tmp_path / "dest"
    code, _, err = cli(capsys, "snapshot", "materialize", snapshot_id, str(dest), "--store", str(store_dir))
    assert code == 1 and "train/part-0.csv" in err
    assert _nothing_beside(dest)


def test_an_edited_manifest_fails_verify_and_materialize_naming_it(capsys, snapshot_id, store_dir, tmp_path):
    key = manifest_key(snapshot_id)
    manifest_file = store_dir / key
    manifest_file.chmod(0o644)
    doc = json.loads(manifest_file.read_bytes())
    doc["entries"][0]["size"] += 1
    manifest_file.write_bytes(canonical_json(doc))
    code, _, err = cli(capsys, "snapshot", "verify", snapshot_id, "--store", str(store_dir))
    assert code == 1 and key in err
    dest = tmp_path / "dest"
    code, _, err = cli(capsys, "snapshot", "materialize", snapshot_id, str(dest), "--store", str(store_dir))
    assert code == 1 and key in err
    assert _nothing_beside(dest)


TREE_DAMAGE = {
    "flip one byte": (lambda d: _flip_byte(d / "train" / "part-1.csv"), "train/part-1.csv", "changed"),
    "truncate": (lambda d: _truncate(d / "train" / "part-1.csv"), "train/part-1.csv", "truncated"),
    "delete": (lambda d: (d / "README").unlink(), "README", "missing"),
    "add": (lambda d: (d / "train" / "part-2.csv").write_text("5,6\n"), "train/part-2.csv", "extra"),
    "relink": (lambda d: ((d / "latest.csv").unlink(), (d / "latest.csv").symlink_to("README")), "latest.csv", "changed"),
}


@pytest.mark.parametrize("damage", list(TREE_DAMAGE))
def test_a_damaged_materialised_copy_fails_verify_naming_the_path(capsys, damage, snapshot_id, store_dir, tmp_path):
    dest = materialize(snapshot_id, store_dir, tmp_path / "copy", link=False)
    harm, path, kind = TREE_DAMAGE[damage]
    harm(dest)
    code, _, err = cli(capsys, "snapshot", "verify", snapshot_id, "--store", str(store_dir), "--path", str(dest))
    assert code == 1
    assert f"{path}: {kind}" in err


def test_files_added_to_an_empty_directory_are_reported_as_extra_not_the_directory_as_missing(snapshot_id, store_dir, tmp_path):
    dest = materialize(snapshot_id, store_dir, tmp_path / "copy", link=False)
    (dest / "empty" / "new").write_text("x")
    assert [(p.path, p.kind) for p in verify_snapshot(snapshot_id, store_dir, path=dest)] == [("empty/new", "extra")]


def test_an_unknown_snapshot_is_bad_input_and_a_bad_id_too(capsys, store_dir, snapshot_id):
    code, _, err = cli(capsys, "snapshot", "verify", "blake3:" + "0" * 64, "--store", str(store_dir))
    assert code == 2 and "not in" in err
    code, _, err = cli(capsys, "snapshot", "verify", "blake3:nothex", "--store", str(store_dir))
    assert code == 2 and "not a snapshot id" in err


def test_materialize_refuses_a_destination_that_holds_something(snapshot_id, store_dir, tmp_path):
    dest = tmp_path / "busy"
    dest.mkdir()
    (dest / "mine").write_text("keep me")
    with pytest.raises(BadInput, match="not an empty directory"):
        materialize(snapshot_id, store_dir, dest)
    assert [p.name for p in dest.iterdir()] == ["mine"]


def test_materialize_fills_an_existing_empty_directory(snapshot_id, store_dir, tmp_path):
    dest = tmp_path / "empty-dest"
    dest.mkdir()
    materialize(snapshot_id, store_dir, dest)
    assert verify_snapshot(snapshot_id, store_dir, path=dest) == []


def test_materialize_links_from_a_local_store_or_copies_when_asked(snapshot_id, store_dir, tmp_path):
    linked = materialize(snapshot_id, store_dir, tmp_path / "linked")
    copied = materialize(snapshot_id, store_dir, tmp_path / "copied", link=False)
    stored = _object_of(snapshot_id, store_dir, "README")
    assert (linked / "README").stat().st_ino == stored.stat().st_ino
    assert (copied / "README").stat().st_ino != stored.stat().st_ino


def test_verify_raises_snapshot_corrupt_on_demand(snapshot_id, store_dir):
    _truncate(_object_of(snapshot_id, store_dir, "README"))
    with pytest.raises(SnapshotCorrupt) as caught:
        verify_snapshot(snapshot_id, store_dir, raise_on_problem=True)
    # README and copy-of-readme share one object, so both paths are named.
    assert sorted(p.path for p in caught.value.problems) == ["README", "copy-of-readme"]


def _tree_listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _plant(store_dir: Path, entries: list[dict], objects: dict[str, bytes]) -> str:
    """Write a hand-made manifest (and objects) into the store, as an attacker with store access could."""
    store = open_store(store_dir)
    for data in objects.values():
        store.write(object_key(hash_bytes(data)), data)
    doc = {"format": FORMAT, "algorithm": "blake3", "kind": "directory", "origin": {}, "entries": entries}
    raw = canonical_json(doc)
    snapshot = f"blake3:{hash_bytes(raw)}"
    store.write(manifest_key(snapshot), raw)
    return snapshot


def _file_entry(path: str, data: bytes) -> dict:
    return {"path": path, "type": "file", "size": len(data), "hash": hash_bytes(data)}


@pytest.mark.parametrize("case", ["dot-dot", "absolute", "symlink out", "file through a symlink"])
def test_a_manifest_that_would_write_outside_dest_is_refused_and_writes_nothing(capsys, case, tmp_path):
    store_dir = tmp_path / "store"
    work = tmp_path / "work"
    work.mkdir()
    payload = b"pwned"
    entries = {
        "dot-dot": [_file_entry("../pwned", payload)],
        "absolute": [_file_entry(str(work / "pwned"), payload)],
        "symlink out": [{"path": "link", "type": "symlink", "target": "../../.."}, _file_entry("ok", payload)],
        "file through a symlink": [{"path": "up", "type": "symlink", "target": ".."}, _file_entry("up/pwned", payload)],
    }[case]
    snapshot = _plant(store_dir, entries, {"p": payload})
    before = _tree_listing(tmp_path)
    dest = work / "dest"
    with pytest.raises(UnsafePath):
        materialize(snapshot, store_dir, dest)
    code, _, err = cli(capsys, "snapshot", "materialize", snapshot, str(dest), "--store", str(store_dir))
    expected = {"dot-dot": "'..'", "absolute": "absolute", "symlink out": "outside", "file through a symlink": "under the symlink"}
    assert code == 2 and expected[case] in err
    assert _tree_listing(tmp_path) == before
    assert not dest.exists()


def test_two_snapshots_of_a_thousand_files_that_differ_in_one_store_1001_objects(tmp_path):
    source = tmp_path / "thousand"
    source.mkdir()
    for n in range(1000):
        (source / f"row-{n:04d}.txt").write_text(f"row {n}\n")
    store = open_store(tmp_path / "store")
    first = create_snapshot(source, store)
    (source / "row-0500.txt").write_text("row 500, corrected\n")
    second = create_snapshot(source, store)
    assert first.id != second.id
    assert (first.new_objects, second.new_objects) == (1000, 1)
    assert len(list(store.list("objects/"))) == 1001
    assert len(list(store.list("manifests/"))) == 2


def test_the_console_script_exits_with_the_documented_codes(tmp_path, dataset):
    env = {**os.environ, "REPRO_SNAPSHOT_STORE": str(tmp_path / "default-store")}
    run = [sys.executable, "-c", "from auditor.cli import main; main()", "snapshot"]
    created = subprocess.run([*run, "create", str(dataset)], capture_output=True, text=True, env=env, check=False)
    assert created.returncode == 0, created.stderr
    snapshot = created.stdout.strip()
    assert (tmp_path / "default-store" / manifest_key(snapshot)).is_file()  # the default store came from settings
    ok = subprocess.run([*run, "verify", snapshot], capture_output=True, text=True, env=env, check=False)
    assert ok.returncode == 0, ok.stderr
    _truncate(_object_of(snapshot, tmp_path / "default-store", "train/part-1.csv"))
    bad = subprocess.run([*run, "verify", snapshot], capture_output=True, text=True, env=env, check=False)
    assert bad.returncode == 1 and "train/part-1.csv" in bad.stderr


def test_a_manifest_that_is_not_canonical_is_refused_even_with_a_matching_id(tmp_path):
    from auditor.errors import MalformedRecord

    store = open_store(tmp_path / "store")
    data = b"safe"
    store.write(object_key(hash_bytes(data)), data)
    entry = json.dumps(_file_entry("ok", data))
    # Duplicate keys: json.loads keeps the last one, so text and meaning could differ.
    raw = (
        f'{{"algorithm":"blake3","entries":[{entry}],"format":"{FORMAT}","kind":"directory","origin":{{}},'
        f'"kind":"directory"}}'
    ).encode()
    snapshot = f"blake3:{hash_bytes(raw)}"
    store.write(manifest_key(snapshot), raw)
    with pytest.raises(MalformedRecord, match="canonical"):
        materialize(snapshot, store, tmp_path / "dest")
    assert not (tmp_path / "dest").exists()
