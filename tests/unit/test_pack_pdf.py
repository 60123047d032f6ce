"""The pack's PDF is made reproducible (issue 32): Chromium's CreationDate, ModDate and any trailer /ID are replaced
by values derived from the audit, each the same length, so the cross-reference offsets stay right."""

from __future__ import annotations

from auditor.report.pack import _pdf_date, normalise_pdf

PRINTED = (b"%PDF-1.4\n1 0 obj\n<</Creator (Mozilla)\n/CreationDate (D:20261203105531+00'00')\n"
           b"/ModDate (D:20261203105531+00'00')>>\nendobj\ntrailer\n<</Size 2 /ID [<0123456789ABCDEF><FEDCBA9876543210>]>>\n%%EOF\n")


def test_the_dates_and_id_are_replaced_by_the_audits_same_length():
    date = _pdf_date({"audit": {"finished_at": "2026-07-01T12:30:05Z"}})
    assert date == b"D:20260701123005+00'00'"
    out = normalise_pdf(PRINTED, date, b"report bytes")
    assert out is not None and len(out) == len(PRINTED)
    assert out.count(b"(D:20260701123005+00'00')") == 2 and b"105531" not in out
    assert b"0123456789ABCDEF" not in out and b"FEDCBA9876543210" not in out
    later = PRINTED.replace(b"105531", b"105532")
    assert normalise_pdf(later, date, b"report bytes") == out  # printed a second later: the same bytes


def test_a_date_of_another_length_is_not_normalised_and_an_undated_audit_gets_the_zip_epoch():
    assert normalise_pdf(PRINTED.replace(b"+00'00'", b"Z", 1), b"D:20260701123005+00'00'", b"x") is None
    assert _pdf_date({"audit": {}}) == b"D:19800101000000+00'00'"
    assert _pdf_date({"audit": {"started_at": "2026-01-02T03:04:05+02:00"}}) == b"D:20260102010405+00'00'"
