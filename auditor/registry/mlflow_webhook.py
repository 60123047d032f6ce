"""Subscribe the registry webhook receiver to MLflow's model-registry events (``repro-audit webhook register``).

One webhook named ``repro-audit`` per registry: registering again updates its URL, events and secret instead of
adding a second one (two would deliver every event twice; the receiver's replay guard keys on the delivery id, which
differs per webhook). MLflow sends webhooks from the tracking server, for a SQL-backed registry.
"""

from __future__ import annotations

from dataclasses import dataclass

from auditor.errors import BadInput
from auditor.registry.webhook import EVENTS

#: the webhook's name in MLflow (one per registry)
WEBHOOK_NAME = "repro-audit"


@dataclass(frozen=True)
class Registered:
    webhook_id: str
    url: str
    events: tuple[str, ...]
    created: bool  # False: an existing repro-audit webhook was updated


def register_webhook(tracking_uri: str | None, url: str, secret: str | None) -> Registered:
    """Create or update the ``repro-audit`` webhook at ``url`` for ``EVENTS``, signed with ``secret``."""
    if not secret:
        from auditor.settings import WEBHOOK_SECRET

        raise BadInput(f"{WEBHOOK_SECRET.name} is not set: MLflow would send unsigned deliveries, which the receiver refuses",
                       hint=f"set {WEBHOOK_SECRET.name} (e.g. openssl rand -hex 32) here and in the Airflow API server")
    if not url.startswith(("https://", "http://")):
        raise BadInput(f"webhook URL {url!r} is not an http(s) URL",
                       hint="pass the receiver's address: https://<airflow api server>/repro-audit/mlflow")
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    existing = next((w for w in client.list_webhooks() if w.name == WEBHOOK_NAME), None)
    if existing is None:
        hook = client.create_webhook(name=WEBHOOK_NAME, url=url, events=list(EVENTS), secret=secret,
                                     description="repro-audit: audit new versions, gate alias moves")
        return Registered(hook.webhook_id, url, EVENTS, created=True)
    client.update_webhook(existing.webhook_id, url=url, events=list(EVENTS), secret=secret, status="ACTIVE")
    return Registered(existing.webhook_id, url, EVENTS, created=False)


__all__ = ["WEBHOOK_NAME", "Registered", "register_webhook"]
