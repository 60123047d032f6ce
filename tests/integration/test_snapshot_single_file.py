"""A single file snapshots, verifies and materialises (as a folder holding that file), through the CLI and the library."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.errors import MalformedRecord, NotFound, SnapshotCorrupt, UnsafePath
from auditor.snapshots import create_snapshot, load_manifest, materialize, verify_snapshot
from auditor.snapshots.manifest import Entry, Manifest
from auditor.snapshots.store import object_key


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out = capsys.readouterr()
    return exited.value.code, out.out, out.err


@pytest.fixture()
def data_file(tmp_path) -> Path:
    path = tmp_path / "inputs" / "train.csv"
    path.parent.mkdir()
    path.write_bytes(b"x,y\n" + b"".join(f"{i},{i * i % 7}\n".encode() for i in range(5000)))
    (path.parent / "beside.txt").write_text("not part of the snapshot")
    return path


def test_the_cli_round_trips_a_single_file_through_create_verify_and_materialize(capsys, data_file, tmp_path):
    store = tmp_path / "store"
    code, out, err = cli(capsys, "snapshot", "create", str(data_file), "--store", str(store))
    assert code == 0, err
    snapshot = out.strip()
    assert "1 files" in err
    manifest = load_manifest(snapshot, store)
    assert manifest.kind == "file" and [e.path for e in manifest.entries] == ["train.csv"]  # not beside.txt

    assert cli(capsys, "snapshot", "verify", snapshot, "--store", str(store))[0] == 0
    code, out, _ = cli(capsys, "snapshot", "materialize", snapshot, str(tmp_path / "dest"), "--store", str(store))
    assert code == 0
    dest = Path(out.strip())
    assert sorted(os.listdir(dest)) == ["train.csv"]  # a folder holding the one file, under its own name
    assert (dest / "train.csv").read_bytes() == data_file.read_bytes()

    # verify --path takes the file itself, or the folder it was materialised into
    assert cli(capsys, "snapshot", "verify", snapshot, "--store", str(store), "--path", str(data_file))[0] == 0
    assert cli(capsys, "snapshot", "verify", snapshot, "--store", str(store), "--path", str(dest))[0] == 0


def test_a_changed_file_fails_verify_against_it_and_a_damaged_object_fails_materialize(capsys, data_file, tmp_path):
    store = tmp_path / "store"
    info = create_snapshot(data_file, store)
    assert (info.files, info.kind, info.new_objects) == (1, "file", 1)
    original = data_file.read_bytes()
    data_file.write_bytes(original[:-2] + b"9\n")  # same size, one byte differs
    code, _, err = cli(capsys, "snapshot", "verify", info.id, "--store", str(store), "--path", str(data_file))
    assert code == 1 and "train.csv" in err and "changed" in err

    obj = store / object_key(load_manifest(info.id, store).files[0].hash)
    obj.chmod(0o644)
    obj.write_bytes(original[:100])
    problems = verify_snapshot(info.id, store)
    assert [(p.kind, p.path) for p in problems] == [("truncated", "train.csv")]
    with pytest.raises(SnapshotCorrupt, match="train.csv"):
        materialize(info.id, store, tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


def test_the_same_bytes_under_the_same_name_give_the_same_id_and_a_folder_of_it_another(data_file, tmp_path):
    copy = tmp_path / "elsewhere" / "train.csv"
    copy.parent.mkdir()
    copy.write_bytes(data_file.read_bytes())
    one = create_snapshot(data_file, tmp_path / "store").id
    assert create_snapshot(copy, tmp_path / "store").id == one
    renamed = copy.rename(copy.parent / "other.csv")
    assert create_snapshot(renamed, tmp_path / "store").id != one  # the name is part of what training reads
    only = tmp_path / "only"
    only.mkdir()
    (only / "train.csv").write_bytes(data_file.read_bytes())
    folder = create_snapshot(only, tmp_path / "store")
    assert folder.kind == "directory" and folder.id != one


def test_a_symlink_to_a_file_is_refused_naming_its_target(data_file, tmp_path):
    link = tmp_path / "link.csv"
    link.symlink_to(data_file)
    with pytest.raises(UnsafePath, match="symlink"):
        create_snapshot(link, tmp_path / "store")


def test_a_file_manifest_with_more_than_one_entry_or_a_nested_path_is_malformed():
    entry = Entry("a.csv", "file", 1, "0" * 64)
    with pytest.raises(MalformedRecord, match="exactly one file"):
        Manifest.build([entry, Entry("b.csv", "file", 1, "1" * 64)], kind="file")
    with pytest.raises(MalformedRecord, match="exactly one file"):
        Manifest.build([Entry("sub/a.csv", "file", 1, "0" * 64)], kind="file")


def test_a_missing_path_is_still_refused(tmp_path):
    with pytest.raises(NotFound, match="does not exist"):
        create_snapshot(tmp_path / "nope.csv", tmp_path / "store")
