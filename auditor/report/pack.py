"""The evidence pack: one published audit as a zip a supervisor checks without repro-audit.

``build_pack`` reads one audit from the reports store, checks it the way ``evidence verify`` would (its
ledger entry, the files' sha256, the evidence's seal, the attestation's signature by the key given) and
packs, under one folder named after the report's stem:

* the report (``<stem>.html``), its evidence (``<stem>.json``) and attestation (``<stem>.intoto.json``),
  under the names the attestation and the ledger give them;
* ``key.pem`` (the Ed25519 public key), ``pae.bin`` (the DSSE pre-authentication encoding) and ``sig.bin``
  (the raw signature), so that ``openssl pkeyutl -verify`` checks the signature;
* ``run_record.json`` (the run record inside the evidence), the calibration evidence each band names (read
  from its MLflow run through the registry, when one is given), ``ledger.jsonl`` (genesis to this audit);
* ``REGULATORY_MAP.md`` (``auditor.report.regmap``), ``README.md``, ``VERIFY.md`` (standard tools only),
  ``verify_pack.py`` (standard library and ``cryptography`` only), ``pack.json`` (what is where, what was
  left out and why) and ``SHA256SUMS`` (``sha256sum -c`` format) over all of it.

Those names are the whole format (``NAMES``, plus ``calibration/<run id>/<artifact>``): both verifiers refuse
any other file. The report, evidence, attestation, ledger, run record and calibration files are EVIDENCE (bound
by the signature, the ledger chain or the signed evidence); README, regulatory map, pack.json, SHA256SUMS and
the two verifiers are EXPLANATION, not evidence. ``VERIFY.md`` and ``verify_pack.py`` are the same bytes in
every pack (the templates), so that a supervisor runs their own copy, taken from a tagged version of the
project, and compares the pack's with it (``verifier_digests``; ``repro-audit evidence fingerprint --verifier``).
The key is pinned by its ``fingerprint`` (sha256 of the DER SubjectPublicKeyInfo), handed to the supervisor
out of band (``repro-audit evidence fingerprint``): both verifiers fail without one.

The PDF is left out unless asked for (``pdf=True``, ``evidence pack --pdf``): printing one needs headless Chromium
(``auditor.report.pdf``). Asked for, ``<stem>.pdf`` is printed from the published HTML and its CreationDate and
ModDate (and a trailer /ID, if any) are set to values derived from the audit, same length, so that packing twice
with the same Chromium gives the same bytes; the PDF is EXPLANATION (a print of the signed HTML, not signed itself).
The zip is reproducible: sorted names, fixed timestamps and permissions, so packing the same audit twice
gives the same bytes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import re
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor.canonical import pretty_json
from auditor.digests import sha256_digest, sha256_hex
from auditor.errors import BadInput, Findings, NotFound, ReproError
from auditor.report import attest, ledger, regmap
from auditor.report.evidence import load_evidence
from auditor.settings import SIGNING_KEY, SIGNING_PUBLIC_KEY, Settings
from auditor.storage.base import BlobStore

KIND = "repro-audit/evidence-pack"
VERSION = 1
TEMPLATES = Path(__file__).resolve().parent / "templates"
VERIFIER = "verify_pack.py"
KEY_FILE = "key.pem"
LEDGER_PART = "ledger.jsonl"
RECORD_FILE = "run_record.json"
SUMS = "SHA256SUMS"
VERIFY_MD = "VERIFY.md"
#: bound by the signature, the ledger chain or the signed evidence (with the report, evidence and attestation)
EVIDENCE_NAMES = (KEY_FILE, "pae.bin", "sig.bin", LEDGER_PART, RECORD_FILE)
#: not evidence: what they say is not vouched for by the signature
EXPLANATION_NAMES = ("README.md", "REGULATORY_MAP.md", "pack.json", SUMS, VERIFY_MD, VERIFIER)
#: every member's timestamp: the zip format's earliest, so that packing twice gives the same bytes
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_KEY_HINT = f"pass --public-key, or set {SIGNING_PUBLIC_KEY.name} (or {SIGNING_KEY.name}) to the key that signed the audit"


@dataclass(frozen=True)
class Pack:
    """A built pack: the zip's bytes, its folder (the stem), its member names and what was left out."""

    data: bytes
    stem: str
    names: list[str]
    keyid: str
    left_out: list[dict[str, str]] = field(default_factory=list)


def stem_of(report: str) -> str:
    """The stem a ``report pdf``-style argument names: ``<stem>``, ``<stem>.html`` or a path to that file."""
    name = Path(report).name if report.endswith(".html") else report
    stem = name.removesuffix(".html")
    if not stem or "/" in stem or stem.startswith("."):
        raise NotFound(f"report {report} is neither an .html file nor a report stem",
                       hint="pass a report's stem as the index lists it, or a path to its .html file")
    return stem


# -- the public key ----------------------------------------------------------------------------------------
def public_pem(data: bytes, where: str) -> tuple[bytes, str]:
    """(PEM bytes, securesystemslib key id) of an Ed25519 public key file's bytes; ``BadInput`` naming ``where``."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_public_key
    from securesystemslib.signer import SSlibKey

    try:
        key = load_pem_public_key(data)
    except (ValueError, TypeError):
        raise BadInput(f"{where} is not a PEM public key", hint=_KEY_HINT) from None
    if not isinstance(key, Ed25519PublicKey):
        raise BadInput(f"{where} is a {type(key).__name__}, not an Ed25519 key", hint=_KEY_HINT)
    pem = key.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    return pem, SSlibKey.from_crypto(key).keyid


def settings_public_key(settings: Settings) -> bytes | None:
    """The PEM public key of the settings' signer: ``REPRO_SIGNING_PUBLIC_KEY``, else derived from the key itself."""
    if settings.signing_public_key:
        try:
            return Path(settings.signing_public_key).expanduser().read_bytes()
        except OSError as exc:
            raise BadInput(f"{SIGNING_PUBLIC_KEY.name} {settings.signing_public_key!r} cannot be read ({exc.strerror})",
                           hint=_KEY_HINT) from None
    if not settings.signing_key:
        return None
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    from auditor.report.publish import signing_key

    signer = signing_key(settings)
    public_hex = signer.signer.public_key.keyval["public"] if signer else ""
    raw = Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_hex))
    return raw.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)


def fingerprint(pem: bytes, where: str = "the key") -> str:
    """``sha256:<hex>`` of the key's DER SubjectPublicKeyInfo, from a public or a private PEM key.

    The one fingerprint form of the pack: what ``openssl pkey -pubin -in key.pem -outform DER | sha256sum``
    prints (VERIFY.md's step 0), what verify_pack.py's ``--trusted-fingerprint`` takes and what
    ``repro-audit evidence fingerprint`` and ``evidence keygen`` print for a supervisor to be given out of band.
    """
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        PublicFormat,
        load_pem_private_key,
        load_pem_public_key,
    )

    try:
        key = load_pem_public_key(pem)
    except (ValueError, TypeError):
        try:
            key = load_pem_private_key(pem, password=None).public_key()
        except (ValueError, TypeError):
            raise BadInput(f"{where} is not a PEM key (public, or an unencrypted private one)",
                           hint="give the path of the PEM public key, or of the signing key itself") from None
    return sha256_digest(key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo))


def verifier_digests() -> dict[str, str]:
    """``{VERIFY.md: sha256:…, verify_pack.py: sha256:…}``: every pack's copies of the two verifiers have these."""
    return {VERIFY_MD: sha256_digest((TEMPLATES / "pack_verify.md").read_bytes()),
            VERIFIER: sha256_digest((TEMPLATES / f"{VERIFIER}.txt").read_bytes())}


# -- reading and checking the audit --------------------------------------------------------------------------
def _read_part(store: BlobStore, part: dict[str, Any], what: str) -> bytes:
    """A published file as its ledger entry recorded it (by version id where recorded), checked against its sha256."""
    key, version = part.get("key"), part.get("version_id")
    if not key:
        raise Findings(f"the ledger entry names no {what}", hint="run repro-audit evidence verify")
    data = store.read_version(key, version) if version and hasattr(store, "read_version") else None
    if data is None:
        try:
            data = store.read(key)
        except NotFound:
            raise Findings(f"{store.uri}/{key} (the {what}) is missing", hint="run repro-audit evidence verify") from None
    if sha256_digest(data) != part.get("sha256"):
        raise Findings(f"{store.uri}/{key} (the {what}) changed since it was published: its sha256 is not the ledger's",
                       hint="run repro-audit evidence verify")
    return data


def _entry_of(store: BlobStore, stem: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """This audit's ledger entry and every entry from genesis up to it (the chain checked on the way)."""
    chain = ledger.entries(store)
    for entry in chain:
        if entry.get("id") == stem:
            return entry, chain[: entry["seq"] + 1]
    raise NotFound(f"no ledger entry in {store.uri} publishes {stem}",
                   hint="pass a report's stem as the index lists it; run repro-audit evidence verify")


def _signature(attestation: bytes, pem: bytes, keyid: str, where: str) -> tuple[dict[str, Any], bytes, bytes]:
    """(statement, PAE, raw signature) of an envelope signed by ``pem``; ``Findings`` when it is not."""
    from securesystemslib.dsse import Envelope

    signed_by = attest.envelope_keyids(attestation)
    if keyid not in signed_by:
        raise BadInput(f"the key given has key id {keyid}, but {where} was signed by {', '.join(signed_by) or 'nobody'}",
                       hint=_KEY_HINT)
    statement = _verify_with(attestation, pem, where)
    envelope = Envelope.from_dict(json.loads(attestation))
    return statement, envelope.pae(), bytes.fromhex(envelope.signatures[keyid].signature)


def _verify_with(attestation: bytes, pem: bytes, where: str) -> dict[str, Any]:
    from cryptography.hazmat.primitives.serialization import load_pem_public_key
    from securesystemslib.signer import SSlibKey

    return attest.verify(attestation, SSlibKey.from_crypto(load_pem_public_key(pem)), where=where)


def _check_subjects(statement: dict[str, Any], entry: dict[str, Any], where: str) -> None:
    subjects = attest.subject_digests(statement)
    for label in ("report", "evidence"):
        part = entry.get(label) or {}
        if subjects.get(part.get("key")) != part.get("sha256"):
            raise Findings(f"{where} does not name the {label} {part.get('key')} with the sha256 the ledger records",
                           hint="run repro-audit evidence verify")


def _calibrations(doc: dict[str, Any], registry: Any) -> tuple[dict[str, bytes], list[dict[str, str]], list[dict[str, str]]]:
    """The calibration evidence the bands name: (files, their manifest rows, what was left out and why)."""
    named = {}
    for metric in (doc.get("audit") or {}).get("metrics") or []:
        ref = (metric.get("band") or {}).get("evidence") or {}
        if ref.get("run_id") and ref.get("sha256"):
            named[(ref["run_id"], ref.get("artifact") or "")] = ref["sha256"]
    files: dict[str, bytes] = {}
    rows: list[dict[str, str]] = []
    left: list[dict[str, str]] = []
    opened = None
    for (run_id, artifact), sha in sorted(named.items()):
        what = f"calibration evidence {artifact} of MLflow run {run_id}"
        try:
            opened = opened or (registry() if callable(registry) else registry)
            data = opened.read_run_file(run_id, artifact) if opened is not None else None
        except ReproError as exc:
            left.append({"what": what, "why": f"the registry could not be read: {exc}"})
            continue
        if opened is None:
            left.append({"what": what, "why": "no registry was given to read it from (pass --tracking-uri)"})
        elif data is None:
            left.append({"what": what, "why": "the run has no such artifact any more"})
        elif sha256_digest(data) != sha:
            raise Findings(f"{what} no longer has the sha256 {sha} its band names: it was altered",
                           hint="re-run repro-audit calibrate")
        else:
            name = f"calibration/{run_id}/{artifact}"
            files[name] = data
            rows.append({"file": name, "run_id": run_id, "sha256": sha})
    return files, rows, left


# -- the pack's own files -------------------------------------------------------------------------------------
def _readme(stem: str, doc: dict[str, Any], entry: dict[str, Any], names: list[str], left: list[dict[str, str]],
            keyid: str) -> bytes:
    audit = doc.get("audit") or {}
    model = audit.get("model") or {}
    lines = [
        f"# Evidence pack: {model.get('name')} v{model.get('version')}, audit {audit.get('audit_id')}", "",
        f"Verdict: {audit.get('verdict')}. Finished: {audit.get('finished_at') or audit.get('started_at') or 'undated'}. "
        f"Responsible person: {doc.get('responsible_person') or 'not named'}. Ledger entry {entry['seq']} ({entry['hash']}). "
        f"Report stem: {stem}. Signed by key id {keyid}.", "",
        "This README is EXPLANATION, not evidence: whoever made the pack could have written anything here. Check the "
        "pack with YOUR OWN copy of VERIFY.md's steps or of verify_pack.py, taken from the project's repository at a "
        "tagged version (their sha256: `repro-audit evidence fingerprint --verifier`), never with the copies inside "
        "the pack, and with the signing key's fingerprint the institution gave you through another channel "
        "(`repro-audit evidence fingerprint` prints it), never one read from this pack: both checks fail without it. "
        "VERIFY.md says which files are evidence (bound by the signature) and which only explain. REGULATORY_MAP.md "
        "says which clauses this evidence bears on and what it does not cover; it claims no compliance.", "",
        "## Files", "",
    ]
    lines += [f"- `{name}`: {_role(name, stem)}" for name in names]
    lines += ["", "## Left out", ""]
    lines += [f"- {item['what']}: {item['why']}" for item in left] or ["- nothing"]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _role(name: str, stem: str) -> str:
    roles = {
        f"{stem}.html": "the report, as published (open it in a browser; it loads nothing from the network)",
        f"{stem}.json": "the JSON evidence the report was rendered from, sealed by its evidence_digest",
        attest.attestation_key(stem): "the in-toto attestation: a DSSE envelope signed with Ed25519",
        f"{stem}.pdf": "explanation: the report printed by headless Chromium (not signed itself: the HTML is)",
        KEY_FILE: "the public key that signed the attestation (its fingerprint must be the one you were given)",
        "pae.bin": "the DSSE pre-authentication encoding of the envelope: the bytes that were signed",
        "sig.bin": "the raw Ed25519 signature from the envelope",
        RECORD_FILE: "the run record (a copy of the one inside the evidence, checked against it)",
        LEDGER_PART: "the ledger entries from genesis to this audit, one canonical JSON entry a line",
        "REGULATORY_MAP.md": "explanation: the clauses this evidence bears on, with sources and what is not covered",
        VERIFY_MD: "explanation: how to check a pack with standard tools (run your own copy)",
        VERIFIER: "explanation: a standalone verifier, standard library and cryptography (run your own copy)",
        "pack.json": "explanation: what is where in this pack, and what was left out",
        SUMS: "explanation: the sha256 of every other file (sha256sum -c SHA256SUMS)",
    }
    return roles.get(name, "calibration evidence named by a band" if name.startswith("calibration/") else "")


_PDF_DATE = re.compile(rb"/(CreationDate|ModDate) ?\((D:[^)]*)\)")
_PDF_ID = re.compile(rb"/ID ?\[ ?<([0-9A-Fa-f]+)> ?<([0-9A-Fa-f]+)> ?\]")


def _pdf_date(doc: dict[str, Any]) -> bytes:
    """``D:YYYYMMDDHHMMSS+00'00'`` of the audit's finish (else start; else the zip epoch), in UTC."""
    audit = doc.get("audit") or {}
    when = dt.datetime(*ZIP_TIME, tzinfo=dt.UTC)
    for value in (audit.get("finished_at"), audit.get("started_at")):
        try:
            parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            continue
        when = parsed.astimezone(dt.UTC) if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
        break
    return when.strftime("D:%Y%m%d%H%M%S+00'00'").encode("ascii")


def normalise_pdf(data: bytes, date: bytes, seed: bytes) -> bytes | None:
    """The PDF with its dates set to ``date`` and a trailer /ID derived from ``seed``, each the same length as what
    it replaces (the cross-reference offsets stay right); None when a date has another length (not normalised)."""
    lengths_ok = True

    def _date(match: re.Match[bytes]) -> bytes:
        nonlocal lengths_ok
        if len(match.group(2)) != len(date):
            lengths_ok = False
            return match.group(0)
        return match.group(0).replace(match.group(2), date)

    def _id(match: re.Match[bytes]) -> bytes:
        out = match.group(0)
        for part in (match.group(1), match.group(2)):
            out = out.replace(part, hashlib.sha256(seed).hexdigest().upper().encode()[: len(part)].ljust(len(part), b"0"), 1)
        return out

    data = _PDF_ID.sub(_id, _PDF_DATE.sub(_date, data))
    return data if lengths_ok else None


def _print_pdf(stem: str, report: bytes, doc: dict[str, Any]) -> tuple[bytes | None, str]:
    """(the normalised PDF, "") or (None, why it was left out)."""
    from auditor.report.pdf import print_pdf

    with tempfile.TemporaryDirectory(prefix="repro-pack-pdf-") as scratch:
        html = Path(scratch) / f"{stem}.html"
        html.write_bytes(report)
        try:
            printed = print_pdf(html, Path(scratch) / f"{stem}.pdf").read_bytes()
        except ReproError as exc:
            return None, f"it could not be printed: {exc}"
    data = normalise_pdf(printed, _pdf_date(doc), report)
    if data is None:
        return None, "this Chromium writes dates of another form: the PDF would differ from one packing to the next"
    return data, ""


def _zip(stem: str, files: dict[str, bytes]) -> bytes:
    """A reproducible zip: sorted names under one folder, fixed time, mode 0644, the same compression."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(f"{stem}/{name}", date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # unix, wherever it is packed
            info.external_attr = (0o100644 << 16)
            archive.writestr(info, files[name], compresslevel=9)
    return buffer.getvalue()


def sums(files: dict[str, bytes]) -> bytes:
    """``SHA256SUMS`` in ``sha256sum -c`` format, sorted by name."""
    return "".join(f"{sha256_hex(files[name])}  {name}\n" for name in sorted(files)).encode("utf-8")


def _audit_files(store: BlobStore, stem: str, pem: bytes) -> tuple[dict[str, bytes], dict[str, Any], dict[str, Any]]:
    """The published files of ``stem``, checked: (files by pack name, evidence doc, manifest, key id)."""
    entry, chain = _entry_of(store, stem)
    if not (entry.get("attestation") or {}).get("key"):
        raise BadInput(f"{stem} was published unsigned: a pack needs its attestation to be checkable without us",
                       hint=f"set {SIGNING_KEY.name} before publishing; re-audit the version to get a signed report")
    report = _read_part(store, entry["report"], "report")
    evidence = _read_part(store, entry["evidence"], "evidence")
    attestation = _read_part(store, entry["attestation"], "attestation")
    doc = load_evidence(evidence, source=f"{store.uri}/{entry['evidence']['key']}")
    pem, keyid = public_pem(pem, "the public key")
    where = f"{store.uri}/{entry['attestation']['key']}"
    statement, pae, sig = _signature(attestation, pem, keyid, where)
    _check_subjects(statement, entry, where)
    files = {entry["report"]["key"]: report, entry["evidence"]["key"]: evidence, entry["attestation"]["key"]: attestation,
             KEY_FILE: pem, "pae.bin": pae, "sig.bin": sig,
             LEDGER_PART: b"".join(ledger.entry_bytes(e) for e in chain)}
    manifest = {"kind": KIND, "version": VERSION, "stem": stem, "report": entry["report"]["key"],
                "evidence": entry["evidence"]["key"], "attestation": entry["attestation"]["key"],
                "key": {"file": KEY_FILE, "keyid": keyid, "fingerprint": fingerprint(pem)},
                "ledger": {"file": LEDGER_PART, "seq": entry["seq"], "entry_hash": entry["hash"]}}
    return files, doc, manifest


def build_pack(store: BlobStore, report: str, *, public_key: bytes | None, registry: Any = None,
               pdf: bool = False) -> Pack:
    """The evidence pack of the published audit ``report`` names (a stem, ``<stem>.html`` or a path to it).

    ``public_key`` is the PEM of the key that signed it; ``registry`` (a registry, or a callable opening
    one) reads the calibration evidence the bands name; without it that evidence is left out, and said so.
    ``pdf`` prints the report with headless Chromium into ``<stem>.pdf`` (left out, and said why, when it cannot).
    """
    stem = stem_of(report)
    if public_key is None:
        raise BadInput(f"no public key to check {stem}'s attestation with", hint=_KEY_HINT)
    files, doc, manifest = _audit_files(store, stem, public_key)
    _same_as_given(report, files[manifest["report"]], store)
    left = []
    printed, why = _print_pdf(stem, files[manifest["report"]], doc) if pdf else (None, "")
    if printed is not None:
        files[f"{stem}.pdf"] = printed
        manifest["pdf"] = f"{stem}.pdf"
    else:
        left.append({"what": "the report as PDF",
                     "why": why or "printing it needs a browser (evidence pack --pdf, or repro-audit report pdf); the HTML "
                                   "is the published, signed form"})
    record = (doc.get("audit") or {}).get("record")
    if record is not None:
        files[RECORD_FILE] = (pretty_json(record) + "\n").encode("utf-8")
        manifest["run_record"] = RECORD_FILE
    else:
        left.append({"what": "the run record", "why": _no_record(doc)})
    calibration, rows, missing = _calibrations(doc, registry)
    files.update(calibration)
    manifest["calibration"], manifest["left_out"] = rows, left + missing
    files["pack.json"] = (pretty_json(manifest) + "\n").encode("utf-8")
    files["REGULATORY_MAP.md"] = regmap.markdown(doc).encode("utf-8")
    files[VERIFIER] = (TEMPLATES / f"{VERIFIER}.txt").read_bytes()  # the same bytes in every pack: see verifier_digests
    files[VERIFY_MD] = (TEMPLATES / "pack_verify.md").read_bytes()
    entry = {"seq": manifest["ledger"]["seq"], "hash": manifest["ledger"]["entry_hash"]}
    names = sorted([*files, "README.md", SUMS])
    files["README.md"] = _readme(stem, doc, entry, names, manifest["left_out"], manifest["key"]["keyid"])
    files[SUMS] = sums(files)
    return Pack(data=_zip(stem, files), stem=stem, names=names, keyid=manifest["key"]["keyid"], left_out=manifest["left_out"])


def _no_record(doc: dict[str, Any]) -> str:
    """Why the evidence holds no run record: an adoption never had one (its lineage is MLflow's metadata); an audit
    stopped before it read one."""
    from auditor.adopt.assess import is_assessment

    audit = doc.get("audit") or {}
    if is_assessment(audit.get("audit_id"), audit.get("verdict")):
        return ("none exists: an adoption of a version trained with plain MLflow, whose lineage was recovered from MLflow "
                "metadata (the evidence's lineage tier lists each input and every assumption), not captured at training time")
    return "the evidence holds none (the audit stopped before reading it)"


def _same_as_given(report: str, published: bytes, store: BlobStore) -> None:
    """A path to a local .html must hold the published report: the pack is built from the store's copy."""
    path = Path(report)
    if report.endswith(".html") and path.is_file() and path.read_bytes() != published:
        raise Findings(f"{report} differs from the report published in {store.uri}: the pack holds the published one",
                       hint="pass the report's stem to pack what was published")


def write_pack(pack: Pack, out: Path) -> Path:
    """Write the zip to ``out`` (its folder made when missing); returns ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(pack.data)
    return out


__all__ = ["EVIDENCE_NAMES", "EXPLANATION_NAMES", "KIND", "Pack", "build_pack", "fingerprint", "public_pem",
           "settings_public_key", "stem_of", "sums", "verifier_digests", "write_pack"]
