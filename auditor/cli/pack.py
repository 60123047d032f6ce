"""``repro-audit evidence pack REPORT -o FILE.zip``: one published audit as a pack checkable without repro-audit."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from auditor.cli.evidence import evidence_app
from auditor.cli.output import console, emit_json
from auditor.settings import REPORTS, SIGNING_PUBLIC_KEY


@evidence_app.command("pack")
def pack_cmd(
    report: Annotated[str, typer.Argument(help="a report's stem in the reports store (as the index lists it), or its .html file")],
    out: Annotated[Path, typer.Option("-o", "--out", help="the zip file to write")],
    reports: Annotated[
        str | None, typer.Option("--reports", help=f"reports location: a folder or s3://bucket/prefix (default: {REPORTS.name})")
    ] = None,
    key: Annotated[
        Path | None,
        typer.Option("--public-key", "--key",
                     help=f"PEM public key that signed the audit (default: {SIGNING_PUBLIC_KEY.name}, or the signing key's own)"),
    ] = None,
    tracking_uri: Annotated[
        str | None,
        typer.Option("--tracking-uri", help="MLflow holding the calibration runs the bands name (default: MLFLOW_TRACKING_URI)"),
    ] = None,
    pdf: Annotated[
        bool, typer.Option("--pdf", help="also print the report to <stem>.pdf with headless Chromium (dates fixed by the audit)")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print {pack, bytes, files, keyid, fingerprint, left_out} as JSON")] = False,
) -> None:
    """Pack a published audit: report, evidence, attestation, key, ledger, SHA256SUMS, VERIFY.md, verify_pack.py."""
    from auditor.cli.models import open_session
    from auditor.errors import BadInput
    from auditor.report.pack import build_pack, fingerprint, settings_public_key, write_pack

    session = open_session(tracking_uri=tracking_uri, reports=reports)
    if key is not None:
        try:
            public = key.expanduser().read_bytes()
        except OSError as exc:
            raise BadInput(f"public key {key} cannot be read ({exc.strerror})", hint="give the path of a PEM public key") from None
    else:
        public = settings_public_key(session.settings)
    pack = build_pack(session.store, report, public_key=public, registry=lambda: session.registry, pdf=pdf)
    written = write_pack(pack, out)
    fpr = fingerprint(public, "the public key")
    if as_json:
        emit_json({"pack": str(written), "bytes": len(pack.data), "files": pack.names, "keyid": pack.keyid,
                   "fingerprint": fpr, "left_out": pack.left_out})
        return
    left = "".join(f"\n  left out: {x['what']}: {x['why']}" for x in pack.left_out)
    console().print(f"{written} ({len(pack.data):,} bytes, {len(pack.names)} files, signed by key {pack.keyid}, "
                    f"fingerprint {fpr}); a supervisor checks it with their own copy of VERIFY.md or verify_pack.py "
                    f"and that fingerprint, given to them apart from the pack{left}",
                    markup=False, highlight=False, soft_wrap=True)
