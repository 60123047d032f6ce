"""``repro-audit webhook register URL``: have MLflow tell Airflow of new versions and alias moves (no polling)."""

from __future__ import annotations

from typing import Annotated

import typer

from auditor.cli import app
from auditor.cli.output import console, emit_json
from auditor.settings import WEBHOOK_SECRET  # named in the output

webhook_app = typer.Typer(help="MLflow's registry webhook, received by repro-audit's Airflow plugin.", no_args_is_help=True)
app.add_typer(webhook_app, name="webhook")


@webhook_app.command("register")
def register_cmd(
    url: Annotated[str, typer.Argument(metavar="URL", help="the receiver: https://<airflow api server>/repro-audit/mlflow")],
    tracking_uri: Annotated[str | None, typer.Option("--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the webhook as JSON")] = False,
) -> None:
    """Create (or update) MLflow's repro-audit webhook for new versions and alias moves, signed with REPRO_WEBHOOK_SECRET."""
    from auditor.registry.mlflow_webhook import register_webhook
    from auditor.settings import get_settings

    settings = get_settings()
    done = register_webhook(tracking_uri or settings.tracking_uri, url, settings.webhook_secret)
    if as_json:
        emit_json({"webhook_id": done.webhook_id, "url": done.url, "events": list(done.events), "created": done.created})
        return
    console().print(f"{'registered' if done.created else 'updated'} MLflow webhook {done.webhook_id}: "
                    f"{', '.join(done.events)} -> {done.url} (signed with {WEBHOOK_SECRET.name})")
