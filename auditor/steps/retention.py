"""Retention that lasts as long as the duty: what will stop being reproducible, and when.

An audit can be repeated only while every input it read still exists: the run (MLflow's ``gc`` purges a
soft-deleted one), the data (Delta ``vacuum`` deletes removed files after ``delta.deletedFileRetentionDuration``,
Iceberg ``expire_snapshots`` drops snapshots after ``history.expire.max-snapshot-age-ms`` unless a tag holds them,
S3 lifecycle rules expire object versions and nothing stops a delete without Object Lock), the image (a registry
deletes or garbage-collects digests), and the report itself (outside a write-once store anyone with write access
can replace it). The EU AI Act keeps technical documentation for ten years (Art. 18); ``REPRO_RETENTION_YEARS``.

``retention_check`` lists, for every version behind a production alias and every audited version, one item per
input with its status:

* ``lost``: gone now (a vacuumed Delta version, an expired Iceberg snapshot, a deleted object version, an image
  digest the registry no longer has, a missing record): the version can no longer be reproduced;
* ``at risk``: will or may be deleted before the horizon (now + N years): ``until`` is the first date it may go,
  or None when nothing guards it at all (deletable any time);
* ``kept``: guarded past the horizon (a tagged Iceberg snapshot, an Object Lock retention that outlasts it);
* ``unknown``: could not be read now (an outage, a registry that wants credentials); checked again next time.

A lost input of a production version is what makes the nightly's retention task red (``red``). Each reading
is one small function below; nothing here deletes or changes anything.

Two things are said but never counted against the check (``at_risk``, what ``retention check`` exits 1 on): a local
folder store (the snapshot or reports store) while the settings ask for no write-once store
(``REPRO_REQUIRE_OBJECT_LOCK`` false, the embedded default of ``make demo``): the item stays ``at risk`` and says
it is ``declared`` local; and a version registered without a run record: no record is lost (its row's ``note`` says
so). Its inputs are read as adoption reads them (``adopted_items``): a Delta table MLflow logged at a version, etc.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from typing import Any

from auditor.errors import InfrastructureError, ReproError
from auditor.report.index import parse_when

log = logging.getLogger(__name__)

LOST, AT_RISK, KEPT, UNKNOWN = "lost", "at risk", "kept", "unknown"
#: statuses in the order a reader needs them
ORDER = (LOST, AT_RISK, UNKNOWN, KEPT)
DAYS_PER_YEAR = 365


def _iso(when: dt.datetime | None) -> str | None:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if when else None


def _ms(ms: int | float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def _item(what: str, where: str, status: str, detail: str, *, until: dt.datetime | None = None, fix: str = "",
          local: bool = False) -> dict[str, Any]:
    """One input's reading; ``local``: a local folder store, which the settings may declare (``declare_local``)."""
    item = {"input": what, "where": where, "status": status, "until": _iso(until), "detail": detail, "fix": fix, "declared": None}
    if local:
        item["local"] = True
    return item


def _horizon_status(until: dt.datetime | None, horizon: dt.datetime) -> str:
    """At risk when it may go before the horizon (or when nothing bounds it), else kept."""
    return KEPT if until is not None and until >= horizon else AT_RISK


# -- the run --------------------------------------------------------------------------------------


def run_items(info: Any, record_error: str | None, now: dt.datetime) -> list[dict[str, Any]]:
    """The MLflow run: a soft-deleted run is purged by the next ``mlflow gc``; a missing record is lost already
    (``record_error`` is None for a version registered without one: it never had a record to lose)."""
    items = []
    if record_error:
        items.append(_item("run record", f"run {info.run_id}", LOST, record_error,
                           fix="restore the run's record from a backup of the MLflow artifact store (the digest registered "
                               "with the version tells the original from an edit); the evidence its audits published stands"))
    if info.run_deleted:
        items.append(_item("run", f"run {info.run_id}", AT_RISK,
                           f"run {info.run_id} is soft-deleted: the next `mlflow gc` purges its record and weights",
                           until=now, fix=f"mlflow runs restore --run-id {info.run_id}"))
    return items


# -- data snapshots -------------------------------------------------------------------------------


def _missing(sources: Iterable[dict[str, Any]]) -> list[str]:
    """The sources (a manifest entry's ``{"uri": file://… or s3://…, "version_id": …}``) that no longer exist (a stat/HEAD each)."""
    from pathlib import Path

    from auditor.snapshots.reference import split_s3
    from auditor.storage.s3 import S3Store, error_code

    missing, stores = [], {}
    for source in sources:
        uri = str(source.get("uri", ""))
        if uri.startswith("file://"):
            if not Path(uri.removeprefix("file://")).exists():
                missing.append(uri)
        elif uri.startswith("s3://"):
            bucket, key = split_s3(uri)
            store = stores.setdefault(bucket, S3Store(bucket))
            kwargs = {"VersionId": source["version_id"]} if source.get("version_id") else {}
            try:
                store.client.head_object(Bucket=bucket, Key=key, **kwargs)
            except Exception as exc:
                if error_code(exc) in {"404", "NoSuchKey", "NoSuchVersion", "NotFound", "400"}:
                    missing.append(uri)
                else:
                    raise
    return missing


def _delta(manifest: Any, where: str, horizon: dt.datetime) -> dict[str, Any]:
    table, version = str(manifest.origin.get("table")), int(manifest.origin.get("version", -1))
    return _delta_status(table, version, _missing(e.source for e in manifest.files if e.source), where, horizon)


def _delta_status(table: str, version: int, missing: list[str], where: str, horizon: dt.datetime) -> dict[str, Any]:
    """Lost when files of the pinned version are gone, else when the table's retention lets vacuum take them."""
    from auditor.snapshots.delta import delta_retention

    guard = delta_retention(table, version)
    days = guard.file_retention.days
    if missing:
        return _item("delta", where, LOST,
                     f"{len(missing)} data file(s) of {table} version {version} are gone (vacuumed after "
                     f"delta.deletedFileRetentionDuration = {days} days), e.g. {missing[0]}",
                     until=guard.safe_until, fix="restore the files from a backup, or treat the version as unreproducible")
    if guard.safe_until is None:
        return _item("delta", where, AT_RISK,
                     f"{table} version {version} is the latest: its files are safe until a later commit removes them, "
                     f"then for {days} days (vacuum with enforce_retention_duration=False ignores even that)",
                     fix="snapshot the data into the snapshot store (repro-audit snapshot create) for a copy that lasts")
    return _item("delta", where, _horizon_status(guard.safe_until, horizon),
                 f"{table} version {version}: files removed by later commits may be vacuumed from "
                 f"{_iso(guard.safe_until)} (delta.deletedFileRetentionDuration = {days} days)", until=guard.safe_until,
                 fix=f"raise delta.deletedFileRetentionDuration on {table}, or snapshot the data into the snapshot store")


def delta_table_item(what: str, table: str, version: int, horizon: dt.datetime) -> dict[str, Any]:
    """A Delta table read at ``version`` with no snapshot of ours (what an adopted version's run logged with
    ``mlflow.log_input``): the data files that version lists, each stat'ed or HEAD'ed, then the table's retention.
    Lost when one is gone (vacuumed) or the version no longer opens; unknown when the table itself cannot be read."""
    import os

    from auditor.errors import NotFound
    from auditor.snapshots.delta import _open, _storage_options, table_root

    root = table_root(table)
    options = _storage_options(root, None)
    where = f"{table} @ version {version}"
    _open(table, root, None, options)  # the table as it is now; NotFound here is an unknown item (_guarded)
    try:
        pinned = _open(table, root, version, options)
    except NotFound as exc:
        return _item(what, where, LOST, f"{table} no longer opens at version {version} (its log was cleaned after "
                     f"delta.logRetentionDuration): {exc}", fix="restore the table's log and files from a backup, or treat the "
                     "version as unreproducible")
    files = [u if "://" in u else "file://" + os.path.abspath(u) for u in pinned.file_uris()]
    return {**_delta_status(table, version, _missing({"uri": u} for u in files), where, horizon), "input": what}


def _iceberg(manifest: Any, where: str, horizon: dt.datetime) -> dict[str, Any]:
    from auditor.snapshots.iceberg import origin_problems, snapshot_expiry

    problems = origin_problems(manifest, check_guard=True)
    table, snapshot_id = manifest.origin.get("table"), manifest.origin.get("snapshot_id")
    if problems and problems[0].kind == "lost":
        return _item("iceberg", where, LOST, problems[0].detail or str(problems[0]),
                     fix="restore the table metadata from a backup, or treat the version as unreproducible")
    if not problems:
        return _item("iceberg", where, KEPT, f"{table} snapshot {snapshot_id} is held by the guard's tag "
                     "(max-ref-age forever): expire_snapshots keeps it")
    expires_ms, current = snapshot_expiry(manifest)
    until = _ms(expires_ms) if expires_ms is not None else None
    state = ("is the current snapshot: safe until the next commit, then" if current else "may be expired from")
    return _item("iceberg", where, AT_RISK,
                 f"{table} snapshot {snapshot_id} is unguarded ({problems[0].detail.split(':')[0]}) and {state} "
                 f"{_iso(until)} (history.expire.max-snapshot-age-ms)", until=until,
                 fix=f"re-tag it: repro-audit snapshot create --iceberg {table} --snapshot-id {snapshot_id}")


def _bucket_guard(store: Any, keys: list[tuple[str, str | None]], horizon: dt.datetime) -> tuple[str, dt.datetime | None, str]:
    """(status, until, why) for object versions in one S3 bucket: Object Lock retention, else lifecycle rules."""
    from auditor.storage.s3 import error_code

    client, bucket = store.client, store.bucket
    lock = store.object_lock()
    untils = []
    if lock is not None and lock.enabled:
        for key, version in keys:
            kwargs = {"VersionId": version} if version else {}
            # HEAD names the version's lock (ObjectLockMode, ObjectLockRetainUntilDate) to a reader allowed to see it
            head = client.head_object(Bucket=bucket, Key=key, **kwargs)
            when = head.get("ObjectLockRetainUntilDate")
            if head.get("ObjectLockMode") != "COMPLIANCE" or when is None:
                return AT_RISK, None, f"s3://{bucket}/{key} has no COMPLIANCE Object Lock retention (governance can be lifted)"
            untils.append(when if isinstance(when, dt.datetime) else dt.datetime.fromisoformat(str(when)))
        until = min(untils) if untils else None
        return _horizon_status(until, horizon), until, f"locked (COMPLIANCE) until {_iso(until)}"
    try:
        rules = client.get_bucket_lifecycle_configuration(Bucket=bucket).get("Rules") or []
    except Exception as exc:
        if error_code(exc) != "NoSuchLifecycleConfiguration":
            raise
        rules = []
    expiring = []
    for rule in rules:
        if rule.get("Status") != "Enabled":
            continue
        prefix = rule.get("Prefix") or (rule.get("Filter") or {}).get("Prefix") or ""
        if not any(key.startswith(prefix) for key, _ in keys):
            continue
        days = (rule.get("Expiration") or {}).get("Days") or (rule.get("NoncurrentVersionExpiration") or {}).get("NoncurrentDays")
        if days:
            expiring.append((int(days), rule.get("ID") or prefix or "(whole bucket)"))
    if expiring:
        days, rule_id = min(expiring)
        newest = []
        for key, version in keys:
            kwargs = {"VersionId": version} if version else {}
            head = client.head_object(Bucket=bucket, Key=key, **kwargs)
            newest.append(head["LastModified"])
        until = min(newest) + dt.timedelta(days=days)
        return AT_RISK, until, (  # without Object Lock it is at risk whatever the rule says; the rule gives a date
            f"s3://{bucket} lifecycle rule {rule_id!r} expires objects (or superseded versions) after {days} days, "
            f"from {_iso(until)} at the earliest, and the bucket has no Object Lock")
    return AT_RISK, None, f"s3://{bucket} has no Object Lock: anyone with delete rights can remove it, any time"


def _s3_objects(kind: str, manifest: Any, where: str, horizon: dt.datetime) -> dict[str, Any]:
    from auditor.snapshots.reference import split_s3
    from auditor.storage.s3 import S3Store

    referenced = [e for e in manifest.files if e.source and str(e.source.get("uri", "")).startswith("s3://")]
    missing = _missing(e.source for e in referenced)
    if missing:
        return _item(kind, where, LOST, f"{len(missing)} object version(s) are gone, e.g. {missing[0]}",
                     fix="restore the versions from a backup, or treat the version as unreproducible")
    by_bucket: dict[str, list[tuple[str, str | None]]] = {}
    for entry in referenced:
        bucket, key = split_s3(entry.source["uri"])
        by_bucket.setdefault(bucket, []).append((key, entry.source.get("version_id")))
    worst = (KEPT, None, "")
    for bucket, keys in sorted(by_bucket.items()):
        status, until, why = _bucket_guard(S3Store(bucket), keys, horizon)
        if ORDER.index(status) < ORDER.index(worst[0]) or (status == worst[0] and until and (worst[1] is None or until < worst[1])):
            worst = (status, until, why)
    return _item(kind, where, worst[0], worst[2] or "every object version is present", until=worst[1],
                 fix="" if worst[0] == KEPT else "enable Object Lock (COMPLIANCE) on the bucket, or snapshot the data into a locked store")


def store_item(what: str, store: Any, horizon: dt.datetime, *, written: dt.datetime | None = None) -> dict[str, Any]:
    """A whole store (the snapshot store, the reports store): write-once only as an S3 bucket with COMPLIANCE Object Lock."""
    from auditor.settings import REQUIRE_OBJECT_LOCK
    from auditor.storage.s3 import S3Store

    if not isinstance(store, S3Store):
        return _item(what, store.uri, AT_RISK, f"{store.uri} is outside a write-once store: its files can be replaced or deleted",
                     fix=f"publish to an S3 bucket with Object Lock in COMPLIANCE mode ({REQUIRE_OBJECT_LOCK.name}=true)", local=True)
    lock = store.object_lock()
    days = ((lock.days or 0) or (lock.years or 0) * DAYS_PER_YEAR) if lock else 0
    if lock is None or not lock.enabled or lock.mode != "COMPLIANCE" or not days:
        return _item(what, store.uri, AT_RISK, f"{store.uri} has no COMPLIANCE Object Lock default retention",
                     fix="set a COMPLIANCE default retention on the bucket (repro-audit prints the command when publishing)")
    until = (written or dt.datetime.now(dt.UTC)) + dt.timedelta(days=days)
    return _item(what, store.uri, _horizon_status(until, horizon),
                 f"{store.uri} locks each object (COMPLIANCE) for {days} days: until {_iso(until)}", until=until,
                 fix="" if until >= horizon else "raise the bucket's default retention to the duty's years")


def data_item(name: str, ref: Any, horizon: dt.datetime) -> dict[str, Any]:
    """One data input of a record, by the kind of its snapshot."""
    from auditor.snapshots import load_manifest
    from auditor.storage import open_store

    where = f"data.{name} {ref.version}"
    if ref.kind != "snapshot" or not ref.version:
        return _item(f"data.{name}", ref.uri, AT_RISK, f"data.{name} is not a snapshot: nothing pins its bytes",
                     fix="record it as a snapshot (repro-audit snapshot create)")
    store = open_store(ref.uri)
    try:
        manifest = load_manifest(ref.version, store)
    except InfrastructureError:
        raise
    except ReproError as exc:
        return _item(f"data.{name}", where, LOST, f"the snapshot manifest cannot be read from {store.uri}: {exc}",
                     fix="restore the snapshot store from a backup")
    if manifest.kind == "delta":
        return {**_delta(manifest, where, horizon), "input": f"data.{name} (delta)"}
    if manifest.kind == "iceberg":
        return {**_iceberg(manifest, where, horizon), "input": f"data.{name} (iceberg)"}
    if manifest.kind in ("reference", "s3-reference"):
        return _s3_objects(f"data.{name} (s3)", manifest, where, horizon)
    if manifest.kind == "dvc":
        return _item(f"data.{name} (dvc)", where, UNKNOWN, "a DVC remote's retention is not read",
                     fix="keep the DVC remote in a write-once store")
    return {**store_item(f"data.{name} ({manifest.kind})", store, horizon), "where": where}


# -- the image ------------------------------------------------------------------------------------


def _registry_url(image: str) -> tuple[str, str, str] | None:
    """(base URL, repository, digest) of ``host[:port]/repo@sha256:…``; None for a name with no registry host."""
    name, _, digest = image.partition("@")
    host, _, repository = name.partition("/")
    if not digest or not repository or not ("." in host or ":" in host or host == "localhost"):
        return None
    repository = repository.rsplit(":", 1)[0] if ":" in repository.rsplit("/", 1)[-1] else repository
    bare_host = host.rsplit(":", 1)[0]
    plain = bare_host == "localhost" or bare_host.startswith("127.")  # Docker's own rule: loopback registries speak http
    return f"{'http' if plain else 'https'}://{host}", repository, digest


def _untagged(ref: str) -> str:
    """``host:port/repo`` of ``host:port/repo:tag`` (a tag is a colon in the last path part only)."""
    head, _, last = ref.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def image_item(ref: str | None, digest: str | None) -> dict[str, Any] | None:
    """The recorded image: is its digest still in the registry (the registry HTTP API's manifest HEAD)?"""
    import urllib.error
    import urllib.request

    if not digest:
        return None
    image = ref if ref and "@" in ref else f"{_untagged(ref)}@{digest}" if ref else digest
    found = _registry_url(image)
    now = dt.datetime.now(dt.UTC)
    if found is None:
        return _item("image", image, UNKNOWN, f"{image} names no registry host this check can ask",
                     fix="record the image as host/repository@sha256:…")
    base, repository, digest = found
    accept = ", ".join(["application/vnd.oci.image.index.v1+json", "application/vnd.oci.image.manifest.v1+json",
                        "application/vnd.docker.distribution.manifest.list.v2+json",
                        "application/vnd.docker.distribution.manifest.v2+json"])
    request = urllib.request.Request(f"{base}/v2/{repository}/manifests/{digest}", method="HEAD", headers={"Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=10):  # noqa: S310 - the registry the record names
            pass
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return _item("image", image, LOST, f"the registry no longer has {digest} (checked {_iso(now)})", until=now,
                         fix="push the image again from a copy with that digest, or treat the version as unreproducible")
        return _item("image", image, UNKNOWN, f"the registry answered {exc.code} for {digest}", fix="check the registry's credentials")
    except (urllib.error.URLError, OSError) as exc:
        return _item("image", image, UNKNOWN, f"the registry at {base} cannot be reached: {exc}")
    return _item("image", image, AT_RISK,
                 f"present on {_iso(now)}; a registry keeps a digest only until someone deletes or garbage-collects it",
                 fix="make the repository immutable and exclude it from the registry's cleanup policies")


# -- the whole check ------------------------------------------------------------------------------


def _ledger_latest(session: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """The latest ledger entry of each audited (model, version); none when nothing was published yet."""
    from auditor.errors import Findings, NotFound
    from auditor.report import ledger

    try:
        entries = ledger.entries(session.store)
    except (NotFound, Findings):
        return {}
    from auditor.report.calibrations import is_calibration

    latest = {}
    for entry in entries:
        if is_calibration(entry) or entry.get("kind") == "key_rotation":  # not an audit of a version: no phantom row
            continue
        audit = entry.get("audit") or {}
        latest[(str(audit.get("model")), str(audit.get("version")))] = entry
    return latest


def _versions(session: Any, latest: dict[tuple[str, str], dict[str, Any]]) -> list[tuple[Any, bool, dict[str, Any] | None]]:
    """(version, is production, its latest ledger entry) for every production or audited version."""

    aliases = {a.lower() for a in session.settings.production_aliases}
    chosen = []
    for info in session.registry.list_versions():
        production = any(a.lower() in aliases for a in info.aliases)
        entry = latest.get((info.name, str(info.version)))
        if production or entry is not None or info.last_audit_at:
            chosen.append((info, production, entry))
    return chosen


def _guarded(what: str, where: str, call: Any) -> list[dict[str, Any]]:
    """Run one reading; an outage or an unreadable source is an ``unknown`` item, never a crash of the whole check."""
    try:
        found = call()
    except Exception as exc:  # noqa: BLE001 - each kind is worded by _unreadable
        return [_unreadable(what, where, exc)]
    return [i for i in (found if isinstance(found, list) else [found]) if i]


def _unreadable(what: str, where: str, exc: Exception) -> dict[str, Any]:
    if isinstance(exc, InfrastructureError):
        return _item(what, where, UNKNOWN, f"{exc} (checked again next time)")
    if isinstance(exc, (ReproError, OSError)):
        return _item(what, where, UNKNOWN, f"cannot be read: {exc}")
    # a backend library's own error (pyiceberg, deltalake, boto3, mlflow): named, not a crash
    log.warning("retention check: %s %s: %s", what, where, exc)
    return _item(what, where, UNKNOWN, f"cannot be read: {type(exc).__name__}: {exc}")


def _record(session: Any, info: Any) -> tuple[Any, Any, str | None, str | None]:
    """(the version resolved, its record or None, why a record it had cannot be read, a note when it never had one).

    A version registered without a run record (``RecordMissing`` with code ``record.missing``: no digest on the
    version or its run) lost nothing: its row says so instead of listing a lost record."""
    from auditor.registry import RecordMissing

    try:
        info = session.registry.resolve(info.ref)  # the listing does not say whether the run is deleted; this does
        record, _ = session.registry.load_record(info)
    except InfrastructureError:
        raise
    except RecordMissing as exc:
        if exc.finding.code == "record.missing":
            return info, None, None, (f"registered without a run record ({exc.why}): no training input was recorded, so "
                                      "none can be kept or lost; its audit says it cannot be reproduced "
                                      "(repro-audit adopt assesses it)")
        return info, None, _said(exc), None
    except ReproError as exc:
        return info, None, _said(exc), None
    return info, record, None, None


def _said(exc: ReproError) -> str:
    """What went wrong, without the error's own hint: the item's fix says what retention can do about it."""
    text = str(exc)
    return text.removesuffix(f" ({exc.hint})") if exc.hint else text


# -- a version registered without a run record: its inputs as adoption reads them ---------------------------------


def _dataset_item(ref: str, d: Any, row: Any, horizon: dt.datetime) -> dict[str, Any] | None:
    """One dataset an adopted version's run logged (``mlflow.log_input``), with adoption's reading of it (``row``: its
    class and what it names); None for a frame built in code (MLflow recorded no source: nothing to keep or lose)."""
    import re
    from types import SimpleNamespace

    from auditor.digests import SNAPSHOT_ID
    from auditor.lineage.gather import parse_data_ref

    what, kind, src = row.path, (d.source_type or "").lower(), dict(d.source)
    uri = str(src.get("uri") or src.get("url") or src.get("path") or "")
    s3_version = re.search(r"[?&]versionId=([^&]+)", uri) if uri.startswith("s3://") else None
    if row.klass == "pinned" and kind in ("delta", "delta_table"):
        table = str(src.get("path") or src.get("delta_table_name") or "")
        return delta_table_item(f"{what} (delta)", table, int(src["delta_table_version"]), horizon)
    if row.klass == "pinned" and SNAPSHOT_ID.search(uri):
        return data_item(what.removeprefix("data."), parse_data_ref(f"x={uri}")[1], horizon)
    if row.klass == "pinned" and s3_version:
        files = [SimpleNamespace(source={"uri": uri.partition("?")[0], "version_id": s3_version.group(1)})]
        return _s3_objects(f"{what} (s3)", SimpleNamespace(files=files), uri, horizon)
    if kind == "code" and not uri:
        return None
    return _item(what, uri or row.identifier, AT_RISK, f"{row.identifier}: {row.why}; nothing keeps its bytes",
                 fix=f"if it still holds what trained {ref}, snapshot it (repro-audit snapshot create) and attach the "
                     f"snapshot (repro-audit adopt {ref} --data {what.removeprefix('data.')}=STORE@ID)")


def adopted_items(session: Any, info: Any, horizon: dt.datetime) -> tuple[list[dict[str, Any]], str]:
    """(items, note) of a version registered without a run record, its inputs as adoption reads them (``repro-audit
    adopt``): the record its owner supplied after training where there is one, else what its MLflow run logged."""
    from auditor.adopt.rules import RULES, image_ref
    from auditor.digests import is_digest_ref
    from auditor.lineage.gather import parse_data_ref
    from auditor.steps.adopt import _reader, _supplied

    reader = _reader(session)
    reader.read_files = False  # the model's files are not an input: metadata is enough
    meta = _supplied(session, reader.read(info.name, str(info.version))[0])
    items: list[dict[str, Any]] = []
    supplied = meta.supplied
    if supplied is not None and supplied.data:
        for name, ref in sorted(supplied.data.items()):
            items += _guarded(f"data.{name}", ref, lambda name=name, ref=ref: data_item(name, parse_data_ref(f"{name}={ref}")[1], horizon))
    elif meta.datasets:
        for d, row in zip(meta.datasets, RULES["data"](meta), strict=True):
            items += _guarded(row.path, str(dict(d.source)), lambda d=d, row=row: _dataset_item(info.ref, d, row, horizon))
    image = (supplied.image if supplied is not None else None) or image_ref(meta)
    if image and is_digest_ref(image):
        items += _guarded("image", image, lambda: image_item(image, image.partition("@")[2]))
    by = f", and the record supplied after training by {supplied.by} on {supplied.at}" if supplied is not None else ""
    frames = sum(1 for d in meta.datasets if (d.source_type or "").lower() == "code" and not (supplied and supplied.data))
    return items, ("registered without a run record: its inputs are read as adoption reads them, from what its MLflow run "
                   f"logged{by}" + (f"; {frames} frame(s) built in code name no source, so nothing of them can be kept"
                                    if frames else ""))


def declare_local(items: list[dict[str, Any]], *, require_lock: bool) -> list[dict[str, Any]]:
    """Mark each local-folder store item ``declared`` while the settings ask for no write-once store: still ``at risk``
    and shown, never counted by ``at_risk`` (the check's exit). With ``REPRO_REQUIRE_OBJECT_LOCK`` true it counts."""
    from auditor.settings import REQUIRE_OBJECT_LOCK

    for item in items:
        if item.pop("local", False) and item["status"] == AT_RISK and not require_lock:
            item["declared"] = (f"a local folder, as the settings declare it ({REQUIRE_OBJECT_LOCK.name} is false, the "
                                "embedded default): reported, not counted against the check")
            item["detail"] += f" (declared: {item['declared']})"  # the coverage page shows the detail
    return items


def _inputs(session: Any, info: Any, record: Any, note: str | None, horizon: dt.datetime) -> tuple[list[dict[str, Any]], str | None]:
    """(items, note): the data snapshots and the image a run record names; for a version registered without one, its
    inputs as adoption reads them from MLflow (not in the in-memory test registry, which logs no datasets)."""
    from auditor.registry.open import registry_scheme

    if record is None:
        if registry_scheme(str(session.settings.tracking_uri or "")) == "memory":
            return [], note
        try:
            return adopted_items(session, info, horizon)
        except Exception as exc:  # noqa: BLE001 - worded by _unreadable, like every other reading
            return [_unreadable("inputs", info.ref, exc)], note
    items = []
    for name, ref in sorted(record.data.items()):
        items += _guarded(f"data.{name}", ref.uri, lambda name=name, ref=ref: data_item(name, ref, horizon))
    env = record.environment
    if env is not None and env.image_digest:
        items += _guarded("image", env.image_ref or env.image_digest, lambda: image_item(env.image_ref, env.image_digest))
    return items, note


def retention_check(session: Any, *, years: int | None = None, now: dt.datetime | None = None) -> dict[str, Any]:
    """Every production or audited version's inputs, each with its status and the date it may stop existing."""
    from auditor.lineage.redact import redact_text

    now = now or dt.datetime.now(dt.UTC)
    years = years or session.settings.retention_years
    horizon = now + dt.timedelta(days=years * DAYS_PER_YEAR)
    rows = []
    latest = _ledger_latest(session)
    for info, production, entry in _versions(session, latest):
        info, record, record_error, note = _record(session, info)
        items = run_items(info, record_error, now)
        if record_error is None:
            inputs, note = _inputs(session, info, record, note, horizon)
            items += inputs
        if entry is not None:
            written = parse_when(entry.get("date"))
            key = (entry.get("report") or {}).get("key")
            items += _guarded("report", session.store.uri,
                              lambda written=written, key=key: {**store_item("report", session.store, horizon, written=written),
                                                                "where": f"{session.store.uri.rstrip('/')}/{key}"})
        declare_local(items, require_lock=session.settings.require_object_lock)
        for item in items:
            item["where"], item["detail"] = redact_text(item["where"]), redact_text(item["detail"])
        items.sort(key=lambda i: (ORDER.index(i["status"]), i["until"] or "9999"))
        worst = items[0]["status"] if items else KEPT
        rows.append({"model": info.name, "version": str(info.version), "ref": info.ref, "aliases": list(info.aliases),
                     "production": production, "audited": entry is not None, "status": worst, "items": items,
                     "note": note})
    listed = {(r["model"], r["version"]) for r in rows}
    for (model, version), entry in sorted(latest.items()):
        if (model, version) not in listed:  # audited once, gone from the registry since: nothing left to rebuild from
            from auditor.uris import model_uri

            gone = _item("registered version", model_uri(model, version), LOST,
                         f"audited ({(entry.get('audit') or {}).get('audit_id')}) but no longer in the registry: deleted",
                         fix="restore the registry from a backup; the published evidence and any pack still stand")
            rows.append({"model": model, "version": version, "ref": model_uri(model, version), "aliases": [],
                         "production": False, "audited": True, "status": LOST, "items": [gone], "note": None})
    rows.sort(key=lambda r: (not r["production"], ORDER.index(r["status"]), r["model"], r["version"]))
    return {"checked_at": _iso(now), "years": years, "horizon": _iso(horizon), "versions": rows, "red": red(rows)}


def red(rows: list[dict[str, Any]]) -> list[str]:
    """``ref: input`` of each lost input of a production version: what turns the nightly's retention task red."""
    return [f"{r['ref']}: {i['input']} ({i['where']})" for r in rows if r["production"] for i in r["items"] if i["status"] == LOST]


def at_risk(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Every item lost or at risk before the horizon, with its version (what ``retention check`` exits 1 on); a local
    store the settings declare (``declare_local``) is not counted."""
    return [{**i, "ref": r["ref"], "production": r["production"]} for r in report["versions"] for i in r["items"]
            if i["status"] in (LOST, AT_RISK) and not i.get("declared")]


def declared(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The items at risk only as local stores the settings declare: said, not counted."""
    return [{**i, "ref": r["ref"]} for r in report["versions"] for i in r["items"] if i.get("declared")]


__all__ = ["AT_RISK", "KEPT", "LOST", "UNKNOWN", "at_risk", "data_item", "declare_local", "declared", "image_item", "red",
           "retention_check", "run_items", "store_item"]
