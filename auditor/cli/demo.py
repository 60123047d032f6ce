"""``repro-audit demo``: the whole product on the embedded default, in a few minutes."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from auditor.cli import app
from auditor.cli.output import console, declare_public


@app.command("demo")
def demo_cmd(
    root: Path = typer.Option(Path(".repro/demo"), "--root", help="where the demo's registry, data and code live"),
    reports: Path = typer.Option(Path("reports"), "--reports", help="where the reports and index are published"),
) -> None:
    """Train and register versions that show every verdict (PyTorch, XGBoost and a scikit-learn scorecard), calibrate,
    run the nightly DAG, print the index path."""
    from rich.markup import escape

    from auditor.demo import MODEL, check_can_run, run_demo, signing_key_path

    check_can_run()  # before anything is written: a clone, and the extras the demo trains with
    from auditor.report.attest import public_key_path
    from auditor.settings import HOME, TRACKING_URI, tracking_uri_under

    public_key = public_key_path(signing_key_path(root))
    declare_public(public_key, public_key.resolve())  # "its public key: PATH" is our sentence, not a credential
    out = console()
    started = time.monotonic()

    def progress(message: str) -> None:
        out.print(f"[dim]{time.monotonic() - started:6.1f}s[/]  {escape(message)}", markup=True, highlight=False)

    index = run_demo(root, reports, progress=progress)
    out.print(f"\nreports: {index.resolve()}  ({time.monotonic() - started:.0f}s)")
    key = public_key.resolve()
    tracking = tracking_uri_under(root.resolve())
    home = root.resolve() / "home"  # the demo's auditor home (auditor.demo.base_env): its second ledger anchor
    out.print(f"check them: {HOME.name}={home} repro-audit evidence verify {reports} --public-key {key} --tracking-uri {tracking}",
              markup=False, soft_wrap=True)
    out.print(f"every other command on the demo's registry: export {TRACKING_URI.name}={tracking} {HOME.name}={home} "
              f"(then e.g. repro-audit report coverage, repro-audit lineage show models:/{MODEL}/1)",
              markup=False, soft_wrap=True)
