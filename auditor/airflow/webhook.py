"""The registry webhook receiver: MLflow's signed deliveries become Airflow asset events, with no polling.

An Airflow 3 plugin (``ReproAuditPlugin``, loaded from the repository's ``plugins/`` folder deployed as Airflow's
plugins folder) serves the FastAPI app ``make_app`` inside the API server at ``/repro-audit``: MLflow posts to ``<api server>/repro-audit/mlflow``
(``repro-audit webhook register URL`` subscribes it). Each delivery is verified first
(``auditor.registry.webhook.verify``: signature, timestamp window, delivery id never seen); a refused one is answered
401/409/400 and starts nothing. A verified one becomes one asset event:

- a new version (``model_version.created``) on ``REPRO_TRAINING_ASSET``, extra ``{"model_uri": "models:/NAME/V"}``,
  which ``repro_audit_registered_version`` is scheduled on (the same event a training DAG's outlet emits);
- an alias set (``model_version_alias.created``) on ``REPRO_ALIAS_ASSET``, which ``repro_promotion_gate`` is scheduled
  on under ``REPRO_REGISTRY_EVENTS=webhook``.

The emitter is Airflow's own asset manager in the API server's database session (what Airflow's public
``POST /api/v2/assets/events`` calls), so the scheduler queues the DAG runs as for any asset event.
"""

# no ``from __future__ import annotations``: FastAPI reads the endpoint's ``Request`` annotation at runtime, and the
# class is imported where the app is made
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from auditor.registry.webhook import RegistryEvent, ReplayGuard, WebhookRefused, verify

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger(__name__)
#: where the plugin mounts the app in the API server, and the route MLflow posts to under it
URL_PREFIX = "/repro-audit"
ROUTE = "/mlflow"

Emit = Callable[[RegistryEvent], str]


def asset_uri(event: RegistryEvent) -> str:
    """The asset a verified event updates, as Airflow stores it: the training asset for a new version, the alias
    asset for an alias (each read as the DAG scheduled on it reads it: a malformed value falls back alike)."""
    from auditor.airflow import asset_of
    from auditor.settings import ALIAS_ASSET, TRAINING_ASSET

    return asset_of(TRAINING_ASSET if event.alias is None else ALIAS_ASSET).uri


def make_app(*, emit: Emit, secret: Callable[[], str | None], clock: Callable[[], float] = time.time) -> "FastAPI":
    """The receiver: ``emit`` records a verified event (returns what it updated); ``secret`` reads the HMAC secret
    per request (a rotated secret applies at once)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse
    from starlette.concurrency import run_in_threadpool

    app = FastAPI(title="repro-audit registry webhook", docs_url=None, redoc_url=None, openapi_url=None)
    guard = ReplayGuard()

    @app.post(ROUTE)
    async def mlflow_webhook(request: Request) -> JSONResponse:
        body = await request.body()
        try:
            event = verify(request.headers, body, secret=secret(), now=clock(), guard=guard)
        except WebhookRefused as exc:
            log.warning("registry webhook refused (%s): %s", exc.status, exc)
            return JSONResponse({"refused": str(exc)}, status_code=exc.status)
        if event is None:
            return JSONResponse({"ignored": "an event this receiver does not act on"}, status_code=202)
        try:
            updated = await run_in_threadpool(emit, event)
        except LookupError as exc:  # no DAG is scheduled on the asset: nothing would start, say so to MLflow's log
            guard.forget(event.delivery_id)
            log.error("registry webhook: %s", exc)
            return JSONResponse({"error": str(exc)}, status_code=404)
        except Exception as exc:  # noqa: BLE001 - the database, say: MLflow retries a 5xx, so the id is not kept
            guard.forget(event.delivery_id)
            log.exception("registry webhook: %s for %s not recorded; MLflow retries it", event.event, event.model_uri)
            return JSONResponse({"error": f"not recorded ({type(exc).__name__}); retry"}, status_code=503)
        log.info("registry webhook: %s %s -> asset event on %s", event.event, event.model_uri, updated)
        return JSONResponse({"asset": updated, "model_uri": event.model_uri}, status_code=202)

    return app


def airflow_emit(event: RegistryEvent) -> str:
    """One asset event in Airflow's metadata database (the API server's own), as Airflow's REST API makes it;
    ``LookupError`` when no DAG is scheduled on that asset (Airflow knows an asset once a DAG names it)."""
    from airflow.assets.manager import asset_manager
    from airflow.models.asset import AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    uri = asset_uri(event)  # normalised as Airflow stores it: mlflow://models is mlflow://models/
    with create_session() as session:
        asset = session.scalar(select(AssetModel).where(AssetModel.uri == uri).limit(1))
        if asset is None:
            from auditor.settings import ALIAS_ASSET, TRAINING_ASSET

            raise LookupError(f"no DAG is scheduled on asset {uri!r}: the event would start nothing (deploy the "
                              f"repro-audit DAGs, or set {TRAINING_ASSET.name} / {ALIAS_ASSET.name} alike in both places)")
        asset_manager.register_asset_change(asset=asset, extra=event.extra(), source_is_api=True, session=session)
    return uri


def _secret() -> str | None:
    from auditor.settings import WEBHOOK_SECRET

    return WEBHOOK_SECRET.get_or_default()


def plugin_apps() -> list[dict[str, Any]]:
    """The plugin's ``fastapi_apps`` entry (Airflow 3.1+)."""
    return [{"app": make_app(emit=airflow_emit, secret=_secret), "url_prefix": URL_PREFIX,
             "name": "repro-audit registry webhook"}]


try:  # the plugin class exists only where Airflow does (the library imports this module without it in tests)
    from airflow.plugins_manager import AirflowPlugin
except ImportError:  # pragma: no cover - an install without Airflow
    AirflowPlugin = None  # type: ignore[assignment,misc]

if AirflowPlugin is not None:
    class ReproAuditPlugin(AirflowPlugin):
        """Serves the registry webhook receiver inside Airflow's API server."""

        name = "repro_audit"
        fastapi_apps = plugin_apps()


__all__ = ["URL_PREFIX", "ROUTE", "airflow_emit", "asset_uri", "make_app", "plugin_apps"]
