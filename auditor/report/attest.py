"""A signed attestation per audit: an in-toto Statement (v1) in a DSSE envelope.

The statement's subjects are the files the audit is about and the files it
published: the registered weights (sha256), the report and the evidence. Its
predicate is the audit's result: verdict, tiers, the record digest, the bands
and calibration evidence that judged, the environment and the auditor's
version. The envelope is signed with the key ``REPRO_SIGNING_KEY`` names:

* a PEM file holding an Ed25519 private key (``repro-audit evidence keygen`` makes one), or
* a securesystemslib signer URI (``file2:…``, ``awskms:…``, ``gcpkms:…``, ``azurekms:…``,
  ``hv:…``, ``hsm:…``), with the matching public key in ``REPRO_SIGNING_PUBLIC_KEY``.

Envelope, signatures and key ids are securesystemslib's (the library in-toto and
TUF use), and the statement is checked against the in-toto attestation
bindings, so ``in-toto``'s own tools read what we write. Nothing here is a
format of our own beyond the predicate's fields.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.canonical import canonical_json
from auditor.digests import SHA256, bare
from auditor.errors import BadInput, Findings
from auditor.settings import SIGNING_KEY, SIGNING_PUBLIC_KEY

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://repro-audit.dev/audit/v1"
#: the predicate of a calibration's statement (``auditor.report.calibrations``)
CALIBRATION_PREDICATE_TYPE = "https://repro-audit.dev/calibration/v1"
#: the predicate of a key rotation, signed by the old key and the new one (``auditor.report.rotation``)
ROTATION_PREDICATE_TYPE = "https://repro-audit.dev/key-rotation/v1"
#: a mapped calibration's working file (one rerun's result, the same-seed floor), sealed by the worker that wrote it
RERUN_PREDICATE_TYPE = "https://repro-audit.dev/calibration-rerun/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
SUFFIX = ".intoto.json"
_HINT = f"set {SIGNING_KEY.name} to an Ed25519 PEM private key (repro-audit evidence keygen makes one) or a signer URI"


def attestation_key(stem: str) -> str:
    """The store key of an audit's attestation, beside its report and evidence."""
    return f"{stem}{SUFFIX}"


@dataclass(frozen=True)
class SigningKey:
    """A loaded signer, its public key and the key id reports show."""

    signer: Any
    keyid: str
    signer_name: str


def _load_public(path: str, what: str) -> Any:
    from cryptography.hazmat.primitives.serialization import load_pem_public_key
    from securesystemslib.signer import SSlibKey

    try:
        data = Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise BadInput(f"{what} {path!r} cannot be read ({exc.strerror})", hint="give the path of a PEM public key") from None
    try:
        return SSlibKey.from_crypto(load_pem_public_key(data))
    except (ValueError, TypeError) as exc:
        raise BadInput(f"{what} {path!r} is not a PEM public key ({exc})",
                       hint="give the .pub file repro-audit evidence keygen wrote") from None


def load_public_key(path: str) -> Any:
    """A verification key (securesystemslib ``SSlibKey``) from a PEM public key file."""
    return _load_public(path, "public key")


def load_signing_key(spec: str, *, public_key: str | None = None, signer_name: str = "") -> SigningKey:
    """The signer ``REPRO_SIGNING_KEY`` names: a PEM private key file, or a signer URI with its public key."""
    from securesystemslib.signer import SIGNER_FOR_URI_SCHEME, CryptoSigner, Signer

    scheme = spec.split(":", 1)[0] if ":" in spec else ""
    if scheme in SIGNER_FOR_URI_SCHEME:
        if not public_key:
            raise BadInput(f"{SIGNING_KEY.name} is the signer URI {spec.split(':', 1)[0]}:…, which needs its public key",
                           hint=f"set {SIGNING_PUBLIC_KEY.name} to the PEM public key of that signer")
        public = _load_public(public_key, SIGNING_PUBLIC_KEY.name)
        try:
            signer = Signer.from_priv_key_uri(spec, public)
        except Exception as exc:  # each backend raises its own kinds
            raise BadInput(f"{SIGNING_KEY.name}: the {scheme} signer could not be loaded ({type(exc).__name__})", hint=_HINT) from None
    else:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        try:
            data = Path(spec).expanduser().read_bytes()
        except OSError as exc:
            raise BadInput(f"{SIGNING_KEY.name} {spec!r} cannot be read ({exc.strerror})", hint=_HINT) from None
        try:
            private = load_pem_private_key(data, password=None)
        except (ValueError, TypeError):
            raise BadInput(f"{SIGNING_KEY.name} {spec!r} is not an unencrypted PEM private key", hint=_HINT) from None
        if not isinstance(private, Ed25519PrivateKey):
            raise BadInput(f"{SIGNING_KEY.name} {spec!r} is a {type(private).__name__}, not an Ed25519 key", hint=_HINT)
        signer = CryptoSigner(private)
    return SigningKey(signer=signer, keyid=signer.public_key.keyid, signer_name=signer_name)


def generate_key(private_path: Path) -> tuple[Path, str]:
    """Write a new Ed25519 private key (mode 0600) and its ``.pub``; returns (public path, key id)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from securesystemslib.signer import SSlibKey

    if private_path.exists():
        raise BadInput(f"{private_path} exists; refusing to overwrite a signing key", hint="choose another path")
    private = Ed25519PrivateKey.generate()
    private_path.parent.mkdir(parents=True, exist_ok=True)
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    private_path.touch(mode=0o600)
    private_path.write_bytes(pem)
    public = private.public_key()
    public_path = public_key_path(private_path)
    public_path.write_bytes(public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return public_path, SSlibKey.from_crypto(public).keyid


def configured_public_key(settings: Any) -> Any:
    """The public key of the configured signer (``REPRO_SIGNING_PUBLIC_KEY``, else the one beside or derived from
    ``REPRO_SIGNING_KEY``), or None when no signer is configured: ``evidence verify`` checks with it by default."""
    if getattr(settings, "signing_public_key", None):
        return load_public_key(settings.signing_public_key)
    spec = getattr(settings, "signing_key", None)
    if spec and Path(spec).expanduser().is_file():  # a signer URI (KMS) needs REPRO_SIGNING_PUBLIC_KEY: no call out
        return load_signing_key(str(Path(spec).expanduser())).signer.public_key
    return None


def public_key_path(private_path: Path) -> Path:
    """Where ``generate_key`` writes the public key of ``private_path``: beside it, ``.pub`` appended."""
    return private_path.with_name(private_path.name + ".pub")


def _hex(digest: str) -> str:
    return bare(digest)


def statement(subjects: dict[str, str], predicate: dict[str, Any], *, predicate_type: str = PREDICATE_TYPE) -> dict[str, Any]:
    """An in-toto v1 Statement over ``{name: "sha256:<hex>"}``, checked by the in-toto bindings."""
    from google.protobuf import json_format
    from in_toto_attestation.v1 import statement_pb2
    from in_toto_attestation.v1.statement import Statement

    doc = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": _hex(value)}} for name, value in sorted(subjects.items())],
        "predicateType": predicate_type,
        "predicate": predicate,
    }
    pb = json_format.ParseDict(json.loads(canonical_json(doc)), statement_pb2.Statement())
    Statement.copy_from_pb(pb).validate()
    return doc


#: the predicate field where ``sign`` records the signer's public key (``key_record``)
SIGNING_KEY_FIELD = "signing_key"


def sign(doc: dict[str, Any], key: SigningKey) -> bytes:
    """The DSSE envelope (JSON bytes) of ``doc`` signed with ``key``; the statement records the signer's public key
    (``predicate.signing_key``), so that a ledger verified with no key configured pins the key itself, not a key id
    (``recorded_key``; trust on first use in ``auditor.report.verify``)."""
    from securesystemslib.dsse import Envelope

    doc = {**doc, "predicate": {**(doc.get("predicate") or {}), SIGNING_KEY_FIELD: key_record(key.signer.public_key)}}
    envelope = Envelope(canonical_json(doc), PAYLOAD_TYPE, {})
    envelope.sign(key.signer)
    return canonical_json(envelope.to_dict()) + b"\n"


def sign_all(doc: dict[str, Any], keys: list[SigningKey]) -> bytes:
    """The DSSE envelope of ``doc`` signed by every key in ``keys`` (a key rotation carries two signatures)."""
    from securesystemslib.dsse import Envelope

    envelope = Envelope(canonical_json(doc), PAYLOAD_TYPE, {})
    for key in keys:
        envelope.sign(key.signer)
    return canonical_json(envelope.to_dict()) + b"\n"


def key_record(key: Any) -> dict[str, Any]:
    """A public key as securesystemslib serialises it, with its key id (what a key rotation records of each key)."""
    return {"keyid": key.keyid, **key.to_dict()}


def key_from_record(record: dict[str, Any]) -> Any:
    """The public key ``key_record`` wrote; its key id is recomputed from the key itself, never taken on trust."""
    from securesystemslib.signer import SSlibKey

    fields = {k: v for k, v in record.items() if k != "keyid"}
    probe = SSlibKey.from_dict("probe", dict(fields))
    return SSlibKey.from_crypto(probe._crypto_key()) if hasattr(probe, "_crypto_key") else probe


def recorded_key(data: bytes) -> Any:
    """The public key an envelope's statement records as its signer's (``sign``), its key id recomputed from the key
    material (a copied key id never survives); None when the statement records none (signed before keys were
    recorded) or the record is not a key. Unverified: the caller checks the envelope's signature with it."""
    try:
        envelope = json.loads(data)
        doc = json.loads(base64.b64decode(envelope["payload"], validate=True))
        record = doc["predicate"][SIGNING_KEY_FIELD]
        return key_from_record(record) if isinstance(record, dict) else None
    except Exception:  # noqa: BLE001 - absent, malformed or not a key (securesystemslib raises its own kinds): no key
        return None


def envelope_keyids(data: bytes) -> list[str]:
    """The key ids that signed an envelope (not checked)."""
    try:
        return [s.get("keyid", "") for s in json.loads(data).get("signatures", [])]
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return []


def payload(data: bytes, *, where: str, predicate_type: str = PREDICATE_TYPE) -> dict[str, Any]:
    """The statement inside an envelope, unverified (for reading subjects before or without a key)."""
    try:
        envelope = json.loads(data)
        if envelope.get("payloadType") != PAYLOAD_TYPE:
            raise Findings(f"{where}: payloadType is {envelope.get('payloadType')!r}, not {PAYLOAD_TYPE}")
        doc = json.loads(base64.b64decode(envelope["payload"], validate=True))
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError, AttributeError):
        raise Findings(f"{where} is not a DSSE envelope") from None
    if not isinstance(doc, dict) or doc.get("_type") != STATEMENT_TYPE:
        raise Findings(f"{where}: its payload is not a repro-audit in-toto statement")
    if doc.get("predicateType") != predicate_type:  # an audit's signature never stands for a calibration, nor the reverse
        raise Findings(f"{where}: its statement's predicate type is {doc.get('predicateType')!r}, not {predicate_type}")
    return doc


def verify(data: bytes, public_key: Any, *, where: str, predicate_type: str = PREDICATE_TYPE) -> dict[str, Any]:
    """The statement of an envelope whose signature ``public_key`` made; ``Findings`` naming why not."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError

    try:
        envelope = Envelope.from_dict(json.loads(data))
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError, AttributeError):
        raise Findings(f"{where} is not a DSSE envelope") from None
    try:
        envelope.verify([public_key], 1)
    except VerificationError:
        signed_by = ", ".join(s.keyid for s in envelope.signatures.values()) or "nobody"
        raise Findings(
            f"{where}: no valid signature by key {public_key.keyid} (its signatures claim key id {signed_by}): "
            "forged, altered after signing, or signed with another key"
        ) from None
    return payload(data, where=where, predicate_type=predicate_type)


def subject_digests(doc: dict[str, Any]) -> dict[str, str]:
    """``{name: "sha256:<hex>"}`` of a statement's subjects."""
    return {s.get("name", ""): SHA256 + (s.get("digest") or {}).get("sha256", "") for s in doc.get("subject") or []}
