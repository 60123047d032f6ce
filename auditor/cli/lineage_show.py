"""``repro-audit lineage show models:/NAME/VERSION``: a registered version's record and its gate findings.

Exit 0 when nothing blocks; 1 when something blocks, or the version has no run
record (a version registered by plain MLflow) or an unreadable or altered one;
2 for a bad or unknown reference; 3 when the registry cannot be reached.
"""

from __future__ import annotations

from typing import Any

import typer

from auditor.cli.lineage import lineage_app
from auditor.cli.output import cell_text, console, emit_json, table
from auditor.cli.params import model_ref
from auditor.cli.suggest import did_you_mean
from auditor.digests import spelled
from auditor.errors import LineageIncomplete
from auditor.uris import REF_HELP


@lineage_app.command("show")
def show_cmd(
    ref: str = typer.Argument(..., callback=model_ref, metavar="MODEL_REF", help=REF_HELP),
    json_out: bool = typer.Option(False, "--json", help="print the version, record and findings as JSON"),
    tracking_uri: str = typer.Option(None, "--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI)"),
) -> None:
    """Print a registered version's run record and gate findings."""
    from auditor.errors import MalformedRecord
    from auditor.lineage.findings import Finding
    from auditor.lineage.gate import blocking, check
    from auditor.registry import RecordChanged, RecordMissing, open_registry

    registry = open_registry(tracking_uri)
    with did_you_mean(lambda: registry, ref):
        info = registry.resolve(ref)
    record, diff = None, None
    try:
        record, diff = registry.load_record(info)
        findings = check(record, diff=diff)
    except (RecordMissing, RecordChanged) as exc:  # lost, or edited after registration: its own finding
        record, diff = None, None
        findings = [exc.finding]
    except MalformedRecord as exc:
        # The reference was fine; the version's lineage is what is broken: a finding, not a usage error.
        record, diff = None, None
        hint = "re-register the version from a run logged by auditor.track"
        findings = [Finding(code="record.unreadable", path="record", severity="blocking", message=str(exc), hint=hint)]
    if json_out:
        emit_json(
            {
                "model": {
                    "ref": info.ref,
                    "name": info.name,
                    "version": info.version,
                    "aliases": list(info.aliases),
                    "tags": dict(info.tags),
                    "run_id": info.run_id,
                    "source": info.source,
                },
                "record_digest": record.digest() if record is not None else None,
                "record": record.to_dict() if record is not None else None,
                "diff_bytes": len(diff.encode("utf-8")) if diff is not None else None,
                "findings": [f.model_dump() for f in findings],
            }
        )
    else:
        _print_human(info, record, findings)
    if blocking(findings):
        raise LineageIncomplete(blocking(findings), subject=info.ref)


def _print_human(info: Any, record: Any, findings: list) -> None:
    from rich.text import Text

    out = console()
    title = f"{info.ref}" + (f"  (aliases: {', '.join(info.aliases)})" if info.aliases else "")
    shown = table(("input", {"style": "bold", "no_wrap": True}), ("field", {"no_wrap": True}), "value", title=title)
    blocked = {f.path.split(".")[0] for f in findings if f.blocking}
    for section, field, value in _rows(info, record):
        shown.add_row(Text(section, style="red" if section in blocked else ""), field, value)
    out.print(shown)
    if not findings:
        out.print(Text("no findings: every input is named by an immutable identifier", style="green"))
        return
    found = table("severity", "field", "finding", "fix", title="gate findings")
    for f in findings:
        found.add_row(Text(f.severity, style="red" if f.blocking else "yellow"), f.path, f.message, f.hint)
    out.print(found)


def _rows(info: Any, record: Any) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    if info is not None:
        rows += [
            ("model", "run", info.run_id or "none"),
            ("model", "source", info.source or "unknown"),
        ]
    if record is None:
        rows.append(("record", "run record", "none readable (see the findings)"))
        return rows
    rows.append(("record", "digest", record.digest()))
    rows += _code_rows(record.code)
    if not record.data:
        rows.append(("data", "-", "missing"))
    for name, ref in sorted(record.data.items()):
        rows.append(("data", name, f"{ref.kind} {ref.uri} @ {ref.version or ref.content_hash or 'no version'}"))
    config = record.config
    rows.append(("config", "digest", (config.digest or "missing") if config else "missing"))
    if config is not None:
        rows.append(("config", "keys", f"{len(config.sources) or len(config.resolved)} ({config.file or 'no file'})"))
    env = record.environment
    if env is None:
        rows.append(("environment", "-", "missing"))
    else:
        rows += [
            ("environment", "python", f"{env.python or 'missing'} {env.platform or ''}".strip()),
            ("environment", "packages", f"{len(env.packages)} pinned" + (f", lock {env.lock_file}" if env.lock_file else "")),
            ("environment", "image", f"{env.image_ref or 'none'} @ {env.image_digest or 'no digest'}"),
            ("environment", "torch", f"{env.torch or 'none'} (CUDA {env.cuda or 'none'}, {env.accelerator or 'CPU'})"),
        ]
    seeds = record.seeds
    if seeds is None:
        rows.append(("seeds", "-", "missing"))
    else:
        rows += [
            ("seeds", "seed", "none" if seeds.seed is None else str(seeds.seed)),
            ("seeds", "deterministic", cell_text(seeds.deterministic, missing="unknown")),
            ("seeds", "generators", ", ".join(f"{k}={v}" for k, v in sorted(seeds.generators.items())) or "none"),
        ]
    infra = record.infrastructure
    if infra is not None:
        rows.append(("infrastructure", "host", f"{infra.hostname or 'unknown'} (world size {infra.world_size})"))
    for key, value in sorted(record.outputs.metrics.items()):
        rows.append(("outputs", key, cell_text(value)))
    for artifact in record.outputs.artifacts:
        rows.append(("outputs", artifact.name, f"{spelled(artifact.sha256)} {artifact.uri}"))
    return rows


def _code_rows(code: Any) -> list[tuple[str, str, str]]:
    """The record's code section: repository, commit, dirty flag (and diff), entry point, folder."""
    if code is None:
        return [("code", "-", "missing")]
    rows = [
        ("code", "repo_url", code.repo_url or "missing"),
        ("code", "commit", code.commit or f"missing ({code.git_error or 'unknown'})"),
        ("code", "dirty", cell_text(code.dirty, missing="unknown")),
    ]
    if code.dirty:
        rows.append(("code", "diff_digest", code.diff_digest or "missing"))
    rows.append(("code", "entrypoint", " ".join(code.entrypoint or []) or "missing"))
    if code.subdir:
        rows.append(("code", "subdir", code.subdir))
    return rows
