"""The ledger: ten published audits verify; each kind of tampering is named at the first bad entry."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from auditor.canonical import canonical_json
from auditor.cli import main
from auditor.errors import Findings
from auditor.judge.result import Verdict
from auditor.report import ledger
from auditor.report.publish import publish
from auditor.report.verify import verify
from auditor.settings import Settings
from auditor.storage import open_store
from tests.fixtures.audits import make_audit

VERDICTS = list(Verdict)


@pytest.fixture(scope="module")
def ten_published(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ledger") / "reports"
    for i in range(10):
        audit = make_audit(VERDICTS[i % 5], name=f"model-{i % 3}", version=str(i // 3 + 1), audit_id=f"audit-{i:02d}",
                           finished_at=f"2026-03-{i + 1:02d}T02:00:00Z")
        publish(audit, str(root), settings=Settings())
    return root


@pytest.fixture()
def reports(ten_published, tmp_path) -> Path:
    """A private copy of the ten published audits, writable so a test can tamper with it."""
    copy = tmp_path / "reports"
    shutil.copytree(ten_published, copy)
    for folder, _, files in os.walk(copy):
        for name in files:
            os.chmod(Path(folder) / name, 0o644)
    return copy


def verify_cli(location: Path, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["evidence", "verify", str(location), "--no-anchors"])
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out + captured.err


def lines_of(reports: Path) -> list[bytes]:
    return (reports / "ledger.jsonl").read_bytes().splitlines(keepends=True)


def entry(reports: Path, seq: int) -> dict:
    return json.loads(lines_of(reports)[seq])


def assert_names_first(code: int, output: str, seq: int) -> None:
    """Exit 1, and the first problem names entry ``seq`` with its audit (audits were published in order)."""
    assert code == 1, output
    first = output.split("first:", 1)[1]
    assert first.strip().startswith(f"entry {seq} ("), output
    assert f"audit audit-{seq:02d})" in first, output


def test_ten_untouched_audits_verify_and_exit_zero(reports, capsys):
    code, output = verify_cli(reports, capsys)
    assert code == 0, output
    assert "ok: 10 ledger entries" in output
    assert "20 report files re-hashed" in output


def test_each_ledger_entry_chains_onto_the_hash_of_the_one_before(reports):
    entries = [json.loads(line) for line in lines_of(reports)]
    assert [e["seq"] for e in entries] == list(range(10))
    assert entries[0]["prev"] == ledger.GENESIS
    for before, after in zip(entries, entries[1:], strict=False):
        assert after["prev"] == before["hash"] == ledger.entry_hash(before)


@pytest.mark.parametrize("suffix", [".html", ".json"])
def test_a_report_edited_by_one_byte_is_named_by_its_entry(reports, capsys, suffix):
    target = reports / entry(reports, 4)[{"html": "report", "json": "evidence"}[suffix[1:]]]["key"]
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    code, output = verify_cli(reports, capsys)
    assert_names_first(code, output, 4)
    assert "changed since it was published" in output


def test_a_deleted_ledger_line_is_named_as_the_first_bad_entry(reports, capsys):
    lines = lines_of(reports)
    del lines[6]
    (reports / "ledger.jsonl").write_bytes(b"".join(lines))
    code, output = verify_cli(reports, capsys)
    assert_names_first(code, output, 6)
    assert "deleted" in output


def test_a_deleted_entry_object_is_named(reports, capsys):
    (reports / ledger.entry_key(3)).unlink()
    code, output = verify_cli(reports, capsys)
    assert_names_first(code, output, 3)
    assert "ledger/entries/000003.json is missing" in output


def test_two_swapped_ledger_lines_name_the_first_of_them(reports, capsys):
    lines = lines_of(reports)
    lines[2], lines[7] = lines[7], lines[2]
    (reports / "ledger.jsonl").write_bytes(b"".join(lines))
    code, output = verify_cli(reports, capsys)
    assert_names_first(code, output, 2)
    assert "out of order" in output


def test_a_ledger_truncated_at_a_line_end_names_the_first_missing_entry(reports, capsys):
    (reports / "ledger.jsonl").write_bytes(b"".join(lines_of(reports)[:8]))
    code, output = verify_cli(reports, capsys)
    assert_names_first(code, output, 8)
    assert "truncated" in output


def test_a_ledger_cut_inside_a_line_names_that_entry(reports, capsys):
    data = (reports / "ledger.jsonl").read_bytes()
    (reports / "ledger.jsonl").write_bytes(data[:-40])
    code, output = verify_cli(reports, capsys)
    assert_names_first(code, output, 9)
    assert "cut short" in output


def test_an_edited_line_with_a_recomputed_hash_is_still_caught(reports, capsys):
    lines = lines_of(reports)
    forged = json.loads(lines[5])
    forged["verdict"] = "REPRODUCED_BITWISE" if forged["verdict"] != "REPRODUCED_BITWISE" else "ERROR"
    forged["hash"] = ledger.entry_hash(forged)
    lines[5] = canonical_json(forged) + b"\n"
    (reports / "ledger.jsonl").write_bytes(b"".join(lines))
    code, output = verify_cli(reports, capsys)
    assert_names_first(code, output, 5)


def test_publishing_onto_a_ledger_with_a_missing_entry_object_is_refused(reports):
    (reports / ledger.entry_key(2)).unlink()
    with pytest.raises(Findings, match="000002.json is missing"):
        publish(make_audit(audit_id="audit-new"), str(reports), settings=Settings())


def test_verify_of_an_empty_location_is_bad_input(tmp_path, capsys):
    code, output = verify_cli(tmp_path / "nothing", capsys)
    assert code == 2
    assert "nothing is published" in output


def test_the_ledger_cache_is_rebuilt_from_entry_objects_when_it_lags(reports):
    # A publisher that died after claiming its slot leaves ledger.jsonl one entry short.
    (reports / "ledger.jsonl").write_bytes(b"".join(lines_of(reports)[:9]))
    store = open_store(str(reports))
    assert len(ledger.entries(store)) == 10
    publish(make_audit(audit_id="audit-10"), str(reports), settings=Settings())
    assert verify(store).ok
    assert len(lines_of(reports)) == 11
