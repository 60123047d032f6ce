"""The manifest: canonical order, a content-only id, explicit dirs and links, refused special files."""

from __future__ import annotations

import json
import os
import time

import blake3
import pytest

from auditor.canonical import canonical_json
from auditor.errors import BadInput, MalformedRecord, UnsafePath
from auditor.snapshots.manifest import FORMAT, Entry, Manifest, build_manifest, check_snapshot_id


def _tree(root, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def test_the_manifest_lists_every_file_with_size_and_blake3_in_path_order(tmp_path):
    _tree(tmp_path, {"b.txt": b"bee", "a/z.bin": b"\x00" * 10, "a/b.bin": b"x"})
    manifest = build_manifest(tmp_path)
    assert [e.path for e in manifest.entries] == ["a/b.bin", "a/z.bin", "b.txt"]
    first = manifest.entries[0]
    assert (first.size, first.hash) == (1, blake3.blake3(b"x").hexdigest())
    doc = json.loads(manifest.to_bytes())
    assert doc["algorithm"] == "blake3" and doc["format"] == FORMAT


def test_the_id_is_the_blake3_of_the_canonical_manifest(tmp_path):
    _tree(tmp_path, {"f": b"data"})
    manifest = build_manifest(tmp_path)
    assert manifest.to_bytes() == canonical_json(manifest.to_json())
    assert manifest.id == "blake3:" + blake3.blake3(manifest.to_bytes()).hexdigest()
    assert check_snapshot_id(manifest.id) == manifest.id


def test_the_same_content_gives_the_same_id_whatever_the_location_order_or_mtime(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    _tree(one, {"a": b"1", "b/c": b"2"})
    _tree(two, {"b/c": b"2", "a": b"1"})
    os.utime(two / "a", (time.time() - 86400, time.time() - 86400))
    assert build_manifest(one).id == build_manifest(two).id


def test_one_changed_byte_changes_the_id(tmp_path):
    _tree(tmp_path, {"a": b"hello"})
    before = build_manifest(tmp_path).id
    (tmp_path / "a").write_bytes(b"hellp")
    assert build_manifest(tmp_path).id != before


def test_empty_directories_are_recorded_explicitly(tmp_path):
    (tmp_path / "empty" / "deeper").mkdir(parents=True)
    _tree(tmp_path, {"full/f": b"x"})
    entries = {e.path: e.type for e in build_manifest(tmp_path).entries}
    assert entries == {"empty/deeper": "dir", "full/f": "file"}


def test_a_symlink_inside_the_tree_is_recorded_with_its_target(tmp_path):
    _tree(tmp_path, {"data/real.csv": b"a,b"})
    (tmp_path / "latest.csv").symlink_to("data/real.csv")
    link = {e.path: e for e in build_manifest(tmp_path).entries}["latest.csv"]
    assert (link.type, link.target) == ("symlink", "data/real.csv")


def test_a_symlink_out_of_the_tree_is_refused(tmp_path):
    root = tmp_path / "root"
    _tree(root, {"f": b"x"})
    (tmp_path / "secret").write_text("s")
    (root / "escape").symlink_to("../secret")
    with pytest.raises(UnsafePath, match="escape"):
        build_manifest(root)


def test_an_absolute_symlink_is_refused_even_into_the_tree(tmp_path):
    _tree(tmp_path, {"f": b"x"})
    (tmp_path / "abs").symlink_to(tmp_path / "f")
    with pytest.raises(UnsafePath, match="abs"):
        build_manifest(tmp_path)


def test_a_special_file_is_refused_not_dropped(tmp_path):
    _tree(tmp_path, {"f": b"x"})
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(BadInput, match="pipe"):
        build_manifest(tmp_path)


def test_a_missing_source_is_bad_input_and_a_file_is_a_one_file_manifest(tmp_path):
    with pytest.raises(BadInput, match="does not exist"):
        build_manifest(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    m = build_manifest(tmp_path / "file")
    assert m.kind == "file" and [e.path for e in m.entries] == ["file"]


def _manifest_bytes(entries: list[dict], **extra) -> bytes:
    doc = {"format": FORMAT, "algorithm": "blake3", "kind": "directory", "origin": {}, "entries": entries, **extra}
    return canonical_json(doc)


def _file(path: str) -> dict:
    return {"path": path, "type": "file", "size": 1, "hash": "0" * 64}


def test_a_manifest_round_trips_through_its_bytes(tmp_path):
    _tree(tmp_path, {"a": b"1", "b/c": b"2"})
    (tmp_path / "e").mkdir()
    (tmp_path / "l").symlink_to("b/c")
    manifest = build_manifest(tmp_path)
    again = Manifest.from_bytes(manifest.to_bytes())
    assert again == manifest and again.id == manifest.id


@pytest.mark.parametrize(
    "path",
    ["../outside", "a/../../outside", "/etc/passwd", "C:/windows", "a//b", "./a", "a\\..\\b", "nul\x00byte", ""],
)
def test_an_entry_that_could_escape_is_refused(path):
    with pytest.raises(UnsafePath):
        Manifest.from_bytes(_manifest_bytes([_file(path)]))


@pytest.mark.parametrize(
    ("link", "target"),
    [("l", "../x"), ("a/l", "../../x"), ("l", "/etc"), ("l", "")],
)
def test_a_symlink_entry_pointing_outside_is_refused(link, target):
    with pytest.raises(UnsafePath, match="outside"):
        Manifest.from_bytes(_manifest_bytes([{"path": link, "type": "symlink", "target": target}]))


def test_a_chain_of_links_that_escapes_through_another_link_is_refused():
    # By text "d/.." is the root itself, but d points at the root, so d/.. is the root's parent.
    entries = [
        {"path": "d", "type": "symlink", "target": "."},
        {"path": "e", "type": "symlink", "target": "d/.."},
    ]
    assert len(Manifest.from_bytes(_manifest_bytes(entries[:1])).entries) == 1
    with pytest.raises(UnsafePath, match="outside"):
        Manifest.from_bytes(_manifest_bytes(entries))


def test_links_that_stay_inside_through_other_links_are_accepted():
    entries = [
        {"path": "deep/er/f", **{k: v for k, v in _file("x").items() if k != "path"}},
        {"path": "d", "type": "symlink", "target": "deep/er"},
        {"path": "up", "type": "symlink", "target": "d/.."},
    ]
    assert len(Manifest.from_bytes(_manifest_bytes(entries)).entries) == 3


def test_an_entry_under_a_file_or_link_is_refused():
    entries = [_file("a"), _file("a/b")]
    with pytest.raises(UnsafePath, match="under the file"):
        Manifest.from_bytes(_manifest_bytes(entries))
    entries = [{"path": "l", "type": "symlink", "target": "."}, _file("l/b")]
    with pytest.raises(UnsafePath, match="under the symlink"):
        Manifest.from_bytes(_manifest_bytes(entries))


def test_a_duplicate_entry_is_refused():
    with pytest.raises(MalformedRecord, match="twice"):
        Manifest.from_bytes(_manifest_bytes([_file("a"), _file("a")]))


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (b"not json", "not valid JSON"),
        (b"[]", "not a JSON object"),
        (_manifest_bytes([], format="other/1"), "format"),
        (_manifest_bytes([], algorithm="md5"), "algorithm"),
        (_manifest_bytes([{"path": "a", "type": "file", "size": -1, "hash": "0" * 64}]), "size"),
        (_manifest_bytes([{"path": "a", "type": "file", "size": 1, "hash": "xyz"}]), "hash"),
        (_manifest_bytes([{"path": "a", "type": "fifo"}]), "type"),
        (_manifest_bytes([{"path": "a", "type": "dir", "size": 3}]), "no size"),
        (_manifest_bytes([{**_file("a"), "mode": 7}]), "unknown field"),
    ],
)
def test_a_malformed_manifest_is_refused_naming_what_is_wrong(doc, message):
    with pytest.raises(MalformedRecord, match=message):
        Manifest.from_bytes(doc)


def test_a_directory_snapshot_cannot_carry_sources():
    entry = {**_file("a"), "source": {"uri": "file:///etc/passwd"}}
    with pytest.raises(MalformedRecord, match="holds its bytes"):
        Manifest.from_bytes(_manifest_bytes([entry]))


def test_a_reference_source_outside_its_origin_is_refused():
    entry = {**_file("a"), "source": {"uri": "s3://other-bucket/a", "version_id": "v1"}}
    doc = _manifest_bytes([entry], kind="s3-reference", origin={"uri": "s3://bucket/prefix"})
    with pytest.raises(UnsafePath, match="not under"):
        Manifest.from_bytes(doc)
    sneaky = {**_file("a"), "source": {"uri": "s3://bucket/prefix/../secret", "version_id": "v1"}}
    with pytest.raises(UnsafePath, match="not under"):
        Manifest.from_bytes(_manifest_bytes([sneaky], kind="s3-reference", origin={"uri": "s3://bucket/prefix"}))


def test_a_by_reference_source_must_pin_a_version():
    entry = {**_file("a"), "source": {"uri": "s3://bucket/prefix/a"}}
    doc = _manifest_bytes([entry], kind="s3-reference", origin={"uri": "s3://bucket/prefix"})
    with pytest.raises(MalformedRecord, match="version_id"):
        Manifest.from_bytes(doc)


@pytest.mark.parametrize("text", ["blake3:abc", "sha256:" + "0" * 64, "blake3:" + "A" * 64, "", "blake3:" + "0" * 65])
def test_a_malformed_snapshot_id_is_bad_input(text):
    with pytest.raises(BadInput, match="not a snapshot id"):
        check_snapshot_id(text)


def test_entries_serialise_only_the_fields_of_their_type():
    assert Entry(path="d", type="dir").to_json() == {"path": "d", "type": "dir"}
    assert Entry(path="l", type="symlink", target="d").to_json() == {"path": "l", "type": "symlink", "target": "d"}
