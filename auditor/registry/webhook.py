"""What a registry webhook may start: MLflow's signed delivery, verified, as one registry event. Pure.

MLflow 3's registry (SQL backend) posts a JSON body ``{"entity", "action", "timestamp", "data"}`` for the events a
webhook subscribes to, with three headers: a delivery id, a Unix timestamp and, when the webhook has a secret,
``v1,<base64 HMAC-SHA256 of "<delivery id>.<timestamp>.<body>">`` (``mlflow/webhooks/delivery.py``). A delivery is
accepted only when its signature verifies with the secret (``hmac.compare_digest``), its timestamp is within
``WINDOW_S`` of now, and its delivery id was not seen within that window: an unsigned, forged, stale or replayed
request is refused before anything is read from it, and starts nothing.

Accepted: a new model version (``model_version.created``) and an alias set on a version
(``model_version_alias.created``); any other signed event is acknowledged and ignored.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from auditor.errors import BadInput, ReproError

#: MLflow's header names and signature version (mlflow.webhooks.constants)
SIGNATURE_HEADER = "X-MLflow-Signature"
TIMESTAMP_HEADER = "X-MLflow-Timestamp"
DELIVERY_HEADER = "X-MLflow-Delivery-Id"
SIGNATURE_VERSION = "v1"
#: how far a delivery's timestamp may lie from the receiver's clock, either way (MLflow's docs suggest five minutes)
WINDOW_S = 300
#: the events ``repro-audit webhook register`` subscribes to, as MLflow names them
EVENTS = ("model_version.created", "model_version_alias.created")


class WebhookRefused(BadInput):
    """A delivery that is not provably MLflow's, fresh and new: refused, nothing started. ``status`` is the HTTP
    status the receiver answers with (401 unsigned or forged, 409 replayed, 400 malformed)."""

    def __init__(self, message: str, *, status: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


@dataclass(frozen=True)
class RegistryEvent:
    """One verified registry event: a version registered, or an alias set on a version."""

    event: str  # one of EVENTS
    name: str
    version: str
    alias: str | None
    delivery_id: str

    @property
    def model_uri(self) -> str:
        from auditor.uris import model_uri

        return model_uri(self.name, self.version)

    def extra(self) -> dict[str, str]:
        """The asset event's extra: what the DAG it starts reads (``model_uri`` as a training DAG's event has it)."""
        out = {"model_uri": self.model_uri, "model": self.name, "version": self.version, "event": self.event,
               "delivery_id": self.delivery_id}
        if self.alias is not None:
            out["alias"] = self.alias
        return out


@dataclass
class ReplayGuard:
    """Delivery ids seen within the window (one receiver process; a replay to another replica is still held to the
    timestamp window). Purged as it goes, so it never holds more than a window's deliveries."""

    window_s: int = WINDOW_S
    seen: dict[str, float] = field(default_factory=dict)

    def check_and_remember(self, delivery_id: str, now: float) -> None:
        self.seen = {k: t for k, t in self.seen.items() if now - t <= 2 * self.window_s}
        if delivery_id in self.seen:
            raise WebhookRefused(f"delivery {delivery_id} was already received and acted on: a replay", status=409,
                                 hint="a delivery starts its DAG once; MLflow retries only one that failed")
        self.seen[delivery_id] = now

    def forget(self, delivery_id: str) -> None:
        """A delivery whose event could not be recorded: MLflow retries it (same id, timestamp and signature) on a
        5xx answer, and the retry must be accepted, not refused as a replay."""
        self.seen.pop(delivery_id, None)


def sign(secret: str, delivery_id: str, timestamp: str, body: str) -> str:
    """MLflow's v1 signature of a delivery (what ``verify`` recomputes)."""
    digest = hmac.new(secret.encode(), f"{delivery_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode()}"


def verify(headers: Mapping[str, str], body: bytes, *, secret: str | None, now: float, guard: ReplayGuard) -> RegistryEvent | None:
    """The registry event a delivery carries (None: a signed event this receiver does not act on), or
    ``WebhookRefused``. ``headers`` are matched without regard to case, as HTTP's are."""
    if not secret:
        raise WebhookRefused("no webhook secret is configured, so no delivery can be verified", status=401,
                             hint=f"set {_secret_name()} in the receiver and register the webhook with it")
    lowered = {k.lower(): v for k, v in headers.items()}
    delivery_id, stamp = lowered.get(DELIVERY_HEADER.lower(), ""), lowered.get(TIMESTAMP_HEADER.lower(), "")
    signature = lowered.get(SIGNATURE_HEADER.lower(), "")
    if not signature:
        raise WebhookRefused("the request is not signed", status=401, hint="register the webhook with its secret (repro-audit webhook register)")
    if not delivery_id or not stamp.isdigit():
        raise WebhookRefused(f"the request lacks {DELIVERY_HEADER} or an integer {TIMESTAMP_HEADER}", status=401)
    text = body.decode("utf-8", "replace")
    if not hmac.compare_digest(signature.encode(), sign(secret, delivery_id, stamp, text).encode()):
        raise WebhookRefused("the signature does not verify with the configured secret", status=401,
                             hint=f"the webhook's secret and {_secret_name()} must be the same")
    if abs(now - int(stamp)) > guard.window_s:
        raise WebhookRefused(f"the delivery's timestamp is {int(now - int(stamp))} s from now, outside ±{guard.window_s} s: "
                             "a replay or a clock out of step", status=409, hint="keep the registry's and the receiver's clocks in step (NTP)")
    guard.check_and_remember(delivery_id, now)
    return _event(text, delivery_id)


def _secret_name() -> str:
    from auditor.settings import WEBHOOK_SECRET

    return WEBHOOK_SECRET.name


def _event(text: str, delivery_id: str) -> RegistryEvent | None:
    try:
        doc = json.loads(text)
        event = f"{doc['entity']}.{doc['action']}"
        data = doc["data"]
    except (ValueError, KeyError, TypeError):
        raise WebhookRefused("the signed body is not an MLflow webhook payload", status=400) from None
    if event not in EVENTS:
        return None
    name, version = data.get("name"), data.get("version")
    alias = data.get("alias") if event == "model_version_alias.created" else None
    if not isinstance(name, str) or not isinstance(version, (str, int)) or (event != EVENTS[0] and not isinstance(alias, str)):
        raise WebhookRefused(f"the {event} payload lacks its model name, version or alias", status=400)
    from auditor.uris import registrable_name

    try:
        registrable_name(name)
    except ReproError as exc:  # a name the audit could not read back: refused here, not in a DAG run
        raise WebhookRefused(f"model name {name!r}: {exc}", status=400) from None
    return RegistryEvent(event=event, name=name, version=str(version), alias=alias, delivery_id=delivery_id)


__all__ = ["EVENTS", "RegistryEvent", "ReplayGuard", "WebhookRefused", "sign", "verify"]
