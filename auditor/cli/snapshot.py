"""``repro-audit snapshot create|verify|materialize``: thin wrappers over ``auditor.snapshots``.

Exit codes come from the errors (``auditor.cli.main``): 1 when verification
finds problems, 2 for bad input (unknown id, unsafe manifest, DEST not empty),
3 when the store cannot be reached.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from auditor.cli import app
from auditor.cli.output import emit_json
from auditor.errors import BadInput, SnapshotCorrupt
from auditor.settings import SNAPSHOT_STORE, get_settings
from auditor.snapshots.hashing import ProgressFn

if TYPE_CHECKING:
    from auditor.snapshots.layout import SnapshotInfo

snapshot_app = typer.Typer(
    name="snapshot",
    help="Content-addressed, verified data snapshots (create, verify, materialize).",
    no_args_is_help=True,
)
app.add_typer(snapshot_app, name="snapshot")

_STORE_HELP = f"snapshot store: a path, file://, s3://bucket/prefix or memory://NAME (default: {SNAPSHOT_STORE.name})"


def _store(uri: str | None) -> str:
    return uri or get_settings().snapshot_store


def _say(message: str) -> None:
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True, highlight=False).print(Text(message), soft_wrap=True)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


@contextmanager
def _progress(enabled: bool) -> Iterator[ProgressFn | None]:
    """A rich progress bar on stderr, one row per stage; nothing when stderr is not a terminal."""
    from rich.console import Console

    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description:>10}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        tasks: dict[str, int] = {}

        def report(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield report


def _create_delta(source: str, uri: str, table_version: int | None, progress: ProgressFn | None) -> SnapshotInfo:
    """Pin a Delta table's version; warn on stderr when the table's retention may vacuum its files."""
    from auditor.snapshots.delta import create_delta_snapshot

    info = create_delta_snapshot(source, uri, version=table_version, progress=progress)
    from auditor.snapshots.delta import delta_retention
    from auditor.snapshots.store import load_manifest

    warning = delta_retention(source, load_manifest(info.id, uri).origin["version"]).warning()
    if warning:
        _say(f"warning: {warning}")
    return info


def _iceberg_catalog_properties(catalog_uri: str | None, warehouse: str | None) -> dict[str, str]:
    """The catalog properties given on the command line; a database URI means a SQL catalog."""
    props = {k: v for k, v in (("uri", catalog_uri), ("warehouse", warehouse)) if v}
    if catalog_uri and catalog_uri.startswith(("sqlite:", "postgresql", "mysql")):
        props.setdefault("type", "sql")
    return props


def _create_iceberg(
    source: str, uri: str, catalog: str, props: dict[str, str], snapshot_id: int | None, *, guard: bool,
    progress: ProgressFn | None,
) -> SnapshotInfo:
    """Pin an Iceberg table's snapshot (tagged against expiry unless ``guard`` is off)."""
    from auditor.snapshots.iceberg import create_iceberg_snapshot

    return create_iceberg_snapshot(
        source, uri, catalog=catalog, catalog_properties=props, snapshot_id=snapshot_id, guard=guard, progress=progress
    )


@snapshot_app.command("create")
def create(
    source: str = typer.Argument(
        ...,
        help="a directory or a single file; s3://bucket/prefix to pin object versions; a table with --delta or "
        "--iceberg; a DVC-tracked path with --dvc",
    ),
    store: str | None = typer.Option(None, "--store", help=_STORE_HELP),
    delta: bool = typer.Option(False, "--delta", help="SOURCE is a Delta Lake table: pin a version and its files"),
    table_version: int | None = typer.Option(None, "--table-version", help="Delta version to pin (default: latest)"),
    iceberg: bool = typer.Option(False, "--iceberg", help="SOURCE is an Iceberg table identifier (ns.table): pin a snapshot"),
    catalog: str = typer.Option("default", "--catalog", help="Iceberg catalog name (its settings: PYICEBERG_CATALOG__NAME__*)"),
    catalog_uri: str | None = typer.Option(None, "--catalog-uri", help="Iceberg catalog uri, e.g. sqlite:////abs/catalog.db"),
    warehouse: str | None = typer.Option(None, "--warehouse", help="Iceberg catalog warehouse, e.g. file:///abs/warehouse"),
    snapshot_id: int | None = typer.Option(None, "--snapshot-id", help="Iceberg snapshot to pin (default: current)"),
    no_guard: bool = typer.Option(False, "--no-guard", help="do not tag the Iceberg snapshot against expire_snapshots"),
    dvc: bool = typer.Option(False, "--dvc", help="SOURCE is a DVC-tracked path (relative to --repo): pin it at --rev"),
    repo: Path = typer.Option(Path("."), "--repo", help="the git+DVC repository for --dvc"),
    rev: str = typer.Option("HEAD", "--rev", help="git revision for --dvc (recorded as its commit)"),
    json_out: bool = typer.Option(False, "--json", help="print a JSON object instead of the bare id"),
) -> None:
    """Snapshot SOURCE into the store and print the snapshot id.

    A single FILE makes a snapshot of that one file; like every snapshot it
    materialises as a folder, holding the file under its own name (so in
    training, run.data_path(NAME) / "FILE-NAME").
    """
    uri = _store(store)
    if sum((delta, iceberg, dvc)) > 1:
        raise BadInput("--delta, --iceberg and --dvc each name a different kind of SOURCE", hint="pass one of them")
    with _progress(not json_out) as progress:
        if delta:
            info = _create_delta(source, uri, table_version, progress)
        elif iceberg:
            props = _iceberg_catalog_properties(catalog_uri, warehouse)
            info = _create_iceberg(source, uri, catalog, props, snapshot_id, guard=not no_guard, progress=progress)
        elif dvc:
            from auditor.snapshots.dvc import create_dvc_snapshot

            info = create_dvc_snapshot(repo, source, uri, rev=rev, progress=progress)
        elif source.startswith("s3://"):
            from auditor.snapshots.reference import create_reference_snapshot

            info = create_reference_snapshot(source, uri, progress=progress)
        else:
            from auditor.snapshots.store import create_snapshot

            info = create_snapshot(source, uri, progress=progress)
    if json_out:
        emit_json(info.to_json())
        return
    sys.stdout.write(info.id + "\n")
    _say(f"{info.files:,} files, {_size(info.bytes)}, {info.new_objects:,} new object(s) in {info.store}")


@snapshot_app.command("verify")
def verify(
    snapshot_id: str = typer.Argument(..., help="blake3:<64 hex>"),
    store: str | None = typer.Option(None, "--store", help=_STORE_HELP),
    path: Path | None = typer.Option(None, "--path", help="compare this directory (or, for a one-file snapshot, this file) with the manifest instead"),
    json_out: bool = typer.Option(False, "--json", help="print the problems as JSON"),
) -> None:
    """Re-hash every byte of a snapshot; exit 1 naming each missing, extra, changed or truncated path.

    Iceberg snapshots are also looked up in their table: an expired one is lost,
    one whose retention tag is gone is unguarded.
    """
    from auditor.snapshots.store import verify_snapshot

    with _progress(not json_out) as progress:
        problems = verify_snapshot(snapshot_id, _store(store), path=path, progress=progress)
    if json_out:
        emit_json({"id": snapshot_id, "ok": not problems, "problems": [p.to_json() for p in problems]})
    if problems:
        raise SnapshotCorrupt(snapshot_id, problems)
    if not json_out:
        _say(f"ok: {snapshot_id} verified" + (f" against {path}" if path else ""))


@snapshot_app.command("materialize")
def materialize(
    snapshot_id: str = typer.Argument(..., help="blake3:<64 hex>"),
    dest: Path = typer.Argument(..., help="a new (or empty) directory"),
    store: str | None = typer.Option(None, "--store", help=_STORE_HELP),
    copy: bool = typer.Option(False, "--copy", help="copy files instead of hard-linking them from a local store"),
    json_out: bool = typer.Option(False, "--json", help="print a JSON object"),
) -> None:
    """Write a verified copy of the snapshot to DEST, or leave nothing there.

    DEST is always a folder: a one-file snapshot gives DEST/<file name>.
    """
    from auditor.snapshots.store import materialize as build

    with _progress(not json_out) as progress:
        result = build(snapshot_id, _store(store), dest, link=not copy, progress=progress)
    if json_out:
        emit_json({"id": snapshot_id, "dest": str(result)})
    else:
        sys.stdout.write(f"{result}\n")
