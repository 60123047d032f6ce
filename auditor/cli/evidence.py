"""``repro-audit evidence verify [LOCATION]``: re-hash every published report and walk the ledger."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from auditor.cli import app
from auditor.cli.output import console, emit_json
from auditor.errors import Findings
from auditor.settings import LEDGER_ANCHOR, REPORTS, SIGNING_KEY

if TYPE_CHECKING:
    from auditor.report.verify import Anchor, Verification

evidence_app = typer.Typer(help="Check published audit evidence.", no_args_is_help=True)
app.add_typer(evidence_app, name="evidence")

_SHOWN = 10


@evidence_app.command("verify")
def verify_cmd(
    location: Annotated[
        str | None, typer.Argument(help=f"Reports location: a folder, file://… or s3://bucket/prefix (default: {REPORTS.name}).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    key: Annotated[
        Path | None,
        typer.Option("--public-key", "--key",
                     help=f"PEM public key: every entry's attestation must carry a valid signature by it (default: the configured key, {SIGNING_KEY.name}'s public key)."),
    ] = None,
    tracking_uri: Annotated[
        str | None,
        typer.Option("--tracking-uri", help="MLflow holding the ledger's anchors (default: MLFLOW_TRACKING_URI)."),
    ] = None,
    no_anchors: Annotated[
        bool, typer.Option("--no-anchors", help="Do not compare the ledger with its MLflow anchors (weaker: say why).")
    ] = False,
) -> None:
    """Exit 0 when every published file and ledger entry is untouched; 1 naming the first bad entry."""
    from auditor.cli.models import open_session
    from auditor.report.attest import configured_public_key, load_public_key
    from auditor.report.verify import verify
    from auditor.storage import open_store

    session = open_session(tracking_uri=tracking_uri)
    where = location or session.settings.reports
    public = load_public_key(str(key)) if key is not None else configured_public_key(session.settings)
    anchors = None if no_anchors else session.ledger_anchors(where)
    result = verify(open_store(where), public_key=public, anchors=anchors, since_signing=key is None)
    source = "--public-key" if key is not None else "configured"
    if as_json:
        emit_json(_result_json(result, public, source))
    if result.ok:
        if not as_json:
            _print_ok(result, public, anchors, source)
        return
    if not as_json:
        _print_more_problems(result, public, source)
    raise Findings(
        f"evidence at {result.location} failed verification ({len(result.problems)} problem(s)); first: {result.first}"
    )


def _checked_with(result: Verification, public: Any, source: str) -> tuple[str | None, str | None]:
    """(the key id the signatures were checked with, where that key came from), or (None, None): not checked."""
    if public is not None:
        return public.keyid, source
    if result.pinned_key is not None:
        return result.pinned_keyid, f"pinned from entry {result.pinned_at}"
    return None, None


def _result_json(result: Verification, public: Any, source: str) -> dict[str, Any]:
    """The ``--json`` form of a verification (``signed`` is None when no signature was checked with a key)."""
    keyid, key_source = _checked_with(result, public, source)
    return {
        "location": result.location,
        "ok": result.ok,
        "entries": result.entries,
        "reports": result.reports,
        "head": result.head,
        "signed": result.signed if keyid else None,
        "signatures_checked_with": keyid,
        "key_source": key_source,
        "signatures_not_checked": result.unchecked,
        "pinned_keyid": None if public is not None else result.pinned_keyid,
        "unsigned_before_signing": result.unsigned_before_signing,
        "key_rotations": result.rotations,
        "anchors": result.anchored,
        "anchor_sources": result.anchor_sources if result.anchored is not None else None,
        "first_bad_entry": result.first.seq if result.first else None,
        "problems": [{"entry": p.seq, "message": p.message} for p in result.problems],
        "auditors": result.auditors,
    }


def _signatures(result: Verification, public: Any, source: str) -> str:
    """Which key the signatures were checked with, where it came from, or plainly that they were not checked."""
    if public is not None:
        where = "given with --public-key" if source == "--public-key" else f"the configured key, {SIGNING_KEY.name}'s"
        signed = f"{result.signed} signatures verified with key {public.keyid} ({where})"
        if result.unsigned_before_signing:
            signed += f" ({result.unsigned_before_signing} earlier entries published before signing was configured)"
        return signed
    if result.pinned_key is not None:
        signed = (f"{result.signed} signatures verified with key {result.pinned_keyid}, the public key entry "
                  f"{result.pinned_at} records (trust on first use: no key given or configured; pass --public-key "
                  "to check against a key you hold)")
        if result.rotations:
            signed += f", the key held after {result.rotations} recorded key rotation(s) signed by the key before"
        if result.unchecked:
            signed += f"; {result.unchecked} earlier signed entries NOT checked (published before entries recorded their key)"
        return signed
    if result.pinned_keyid:
        return (f"signatures NOT checked (no public key given or configured, and no entry records its key): every signed "
                f"entry names key {result.pinned_keyid}, the first one's (pass --public-key to check them)")
    return "signatures NOT checked: no entry is signed and no public key was given or configured"


def _print_ok(result: Verification, public: Any, anchors: list[Anchor] | None, source: str) -> None:
    """The one-line summary of a clean verification: what was chained, re-hashed, signed and anchored."""
    anchored = "; " + _anchors_checked(result) if anchors is not None else "; anchors not compared"
    console().print(
        f"ok: {result.entries} ledger entries chain to head {result.head}; {result.reports} report files re-hashed; "
        + _signatures(result, public, source) + anchored,
        markup=False,
        soft_wrap=True,
    )
    _print_auditors(result)


def _print_auditors(result: Verification) -> None:
    """Which auditor (its version and environment, against the committed lock) published the evidence."""
    for label, count in sorted(result.auditors.items()):
        console().print(f"published by {label}: {count} evidence file(s)", markup=False, soft_wrap=True)


def _anchors_checked(result: Verification) -> str:
    """``3 MLflow anchors match, 3 anchors in the second anchor s3://… match``: each anchor source verify compared."""
    parts = [f"{count} MLflow anchors match" if source.startswith("MLflow") else f"{count} anchors in {source} match"
             for source, count in result.anchor_sources.items()]
    second = any(not source.startswith("MLflow") for source in result.anchor_sources)
    return ", ".join(parts or ["0 MLflow anchors match"]) + ("" if second else f" (no second anchor: {LEDGER_ANCHOR.name}=off)")


def _print_more_problems(result: Verification, public: Any, source: str) -> None:
    """The problems after the first (which the error names), up to ``_SHOWN`` in all, then a count."""
    out = console()
    out.print(f"  signatures: {_signatures(result, public, source)}", markup=False, soft_wrap=True)
    if result.anchored is not None:
        out.print(f"  anchors checked: {_anchors_checked(result)}", markup=False, soft_wrap=True)
    for problem in result.problems[1:_SHOWN]:
        out.print(f"  also: {problem}", markup=False, soft_wrap=True)
    if len(result.problems) > _SHOWN:
        out.print(f"  … and {len(result.problems) - _SHOWN} more", markup=False)


@evidence_app.command("rotate")
def rotate_cmd(
    old: Annotated[Path, typer.Argument(help="The signing key audits were signed with until now (PEM private key).")],
    new: Annotated[Path, typer.Argument(help=f"The signing key from now on (PEM private key; point {SIGNING_KEY.name} at it).")],
    tracking_uri: Annotated[
        str | None, typer.Option("--tracking-uri", help="MLflow holding the ledger's anchors (default: MLFLOW_TRACKING_URI).")
    ] = None,
) -> None:
    """Record a signing-key rotation in the ledger, signed by both keys: evidence verify then accepts both."""
    from auditor.cli.models import open_session
    from auditor.steps.publish import record_rotation

    session = open_session(tracking_uri=tracking_uri)
    entry = record_rotation(session, str(old), str(new))
    rotation = entry["rotation"]
    console().print(f"recorded ledger entry {entry['seq']}: signing key {rotation['old_keyid']} hands over to "
                    f"{rotation['new_keyid']}\npoint {SIGNING_KEY.name} at {new}", markup=False, soft_wrap=True)


@evidence_app.command("keygen")
def keygen_cmd(
    path: Annotated[Path, typer.Argument(help="Where to write the Ed25519 private key (its public key goes to PATH.pub).")],
) -> None:
    """Make an Ed25519 signing key for REPRO_SIGNING_KEY; prints the public key's path and key id."""
    from auditor.report.attest import generate_key
    from auditor.report.pack import fingerprint

    public, keyid = generate_key(path)
    # worded so that the one redactor, which masks values after "key:" and "…_KEY=", leaves these paths readable
    console().print(f"wrote an Ed25519 signing key (mode 0600): {path}\n"
                    f"point {SIGNING_KEY.name} at that file to sign every audit\n"
                    f"public half, for evidence verify --public-key: {public}\nkey id: {keyid}\n"
                    f"fingerprint (give it to supervisors out of band; evidence packs are checked against it): "
                    f"{fingerprint(public.read_bytes())}",
                    markup=False, soft_wrap=True)


@evidence_app.command("fingerprint")
def fingerprint_cmd(
    key: Annotated[
        Path | None,
        typer.Argument(help=f"A PEM key, public or private (default: the configured signing key, {SIGNING_KEY.name})."),
    ] = None,
    verifier: Annotated[
        bool, typer.Option("--verifier", help="Print the sha256 of this version's pack verifiers (VERIFY.md, verify_pack.py) instead.")
    ] = False,
) -> None:
    """Print a key's fingerprint (sha256:<hex> of its DER SubjectPublicKeyInfo), to hand a supervisor out of band.

    It is what `openssl pkey -pubin -in key.pem -outform DER | sha256sum` prints of an evidence pack's key.pem,
    and what VERIFY.md's TRUSTED_FPR and verify_pack.py's --trusted-fingerprint take.
    """
    from auditor.errors import BadInput
    from auditor.report.pack import fingerprint, settings_public_key, verifier_digests

    if verifier:
        from auditor import __version__

        for name, digest in verifier_digests().items():
            console().print(f"{digest}  {name}  (repro-audit {__version__})", markup=False, soft_wrap=True)
        return
    if key is not None:
        try:
            pem = key.expanduser().read_bytes()
        except OSError as exc:
            raise BadInput(f"key {key} cannot be read ({exc.strerror})", hint="give the path of a PEM key") from None
        where = str(key)
    else:
        from auditor.cli.models import settings_with

        pem = settings_public_key(settings_with())
        if pem is None:
            raise BadInput("no key given and no signing key configured",
                           hint=f"pass the PEM key's path, or set {SIGNING_KEY.name}")
        where = f"the configured key ({SIGNING_KEY.name})"
    # printed alone on its line, so that `repro-audit evidence fingerprint` can be captured as is
    console().print(fingerprint(pem, where), markup=False, soft_wrap=True)
