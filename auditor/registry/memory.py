"""The in-memory twin of the MLflow registry, for unit tests and ``memory://`` URIs.

Same behaviour as the MLflow backend where the audit can observe it: aliases
live on the registered model, a version names its run, a run holds artifact
bytes and tags. ``register_record`` builds what the SDK would have left behind.
Instances are per name: ``MemoryRegistry.named("memory://x")`` returns the same
object each time within a process.
"""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from auditor.digests import sha256_hex
from auditor.errors import BadInput, NotFound
from auditor.lineage.record import RunRecord
from auditor.registry.base import ModelVersionInfo, Registry, RunInfo, RunLinks
from auditor.registry.layout import run_layout, training_params
from auditor.tags import MLFLOW_RUN_NAME, TAG_RECORD_DIGEST, TAG_RUN_IDENTITY, TAG_WEIGHTS_SHA256, WEIGHTS_DIR, own_tags
from auditor.uris import model_alias_uri, model_uri, run_artifact_uri

_INSTANCES: dict[str, MemoryRegistry] = {}
_INSTANCES_LOCK = threading.Lock()


@dataclass
class _Run:
    tags: dict[str, str] = field(default_factory=dict)
    artifacts: dict[str, bytes] = field(default_factory=dict)
    deleted: bool = False
    params: dict[str, str] = field(default_factory=dict)
    experiment: str = "Default"
    start_time: int = 0
    links: RunLinks | None = None  # the LoggedModel and datasets an audit run is about


@dataclass
class _Version:
    name: str
    version: int
    run_id: str | None
    source: str | None
    creation_ts: int
    tags: dict[str, str] = field(default_factory=dict)


class MemoryRegistry(Registry):
    """A registry held in a dict. Thread-safe enough for tests that write outcomes concurrently."""

    def __init__(self, uri: str = "memory://default") -> None:
        self.uri = uri
        self._runs: dict[str, _Run] = {}
        self._versions: dict[tuple[str, int], _Version] = {}
        self._aliases: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    @classmethod
    def named(cls, uri: str) -> MemoryRegistry:
        """The process-wide registry for ``uri`` (created on first use)."""
        with _INSTANCES_LOCK:
            if uri not in _INSTANCES:
                _INSTANCES[uri] = cls(uri)
            return _INSTANCES[uri]

    @classmethod
    def forget(cls, uri: str) -> None:
        """Drop the process-wide registry for ``uri`` (tests call this to start clean)."""
        with _INSTANCES_LOCK:
            _INSTANCES.pop(uri, None)

    # -- building a registry (what MLflow and the SDK do on the writing side) --
    def create_run(
        self,
        *,
        tags: Mapping[str, str] | None = None,
        artifacts: Mapping[str, bytes] | None = None,
        params: Mapping[str, str] | None = None,
        experiment: str = "Default",
    ) -> str:
        """A new run with ``tags``, ``params`` and ``artifacts`` (run-relative path -> bytes); returns its id."""
        run_id = uuid.uuid4().hex
        with self._lock:
            self._runs[run_id] = _Run(dict(tags or {}), dict(artifacts or {}), params=dict(params or {}),
                                      experiment=experiment, start_time=time.time_ns() // 1_000_000)
        return run_id

    def set_run_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        """Set tags on a run (tags, unlike params, may be changed: tests use it to tamper)."""
        with self._lock:
            self._run(run_id).tags.update(tags)

    def delete_run(self, run_id: str) -> None:
        """Mark a run deleted, as ``MlflowClient.delete_run`` does (artifacts stay until a purge)."""
        with self._lock:
            self._run(run_id).deleted = True

    def put_artifact(self, run_id: str, path: str, data: bytes) -> None:
        """Add or replace one artifact of a run (tests use it to tamper with a record)."""
        with self._lock:
            self._run(run_id).artifacts[path] = bytes(data)

    def create_version(
        self,
        name: str,
        *,
        run_id: str | None = None,
        source: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> ModelVersionInfo:
        """Register the next version of ``name`` (creating the model), as ``MlflowClient.create_model_version``."""
        if not name or "/" in name or ":" in name:
            raise BadInput(f"model name {name!r} is empty or contains '/' or ':'")
        with self._lock:
            if run_id is not None:
                self._run(run_id)
            number = 1 + max((v for (n, v) in self._versions if n == name), default=0)
            self._aliases.setdefault(name, {})
            self._versions[(name, number)] = _Version(
                name=name,
                version=number,
                run_id=run_id,
                source=source or (run_artifact_uri(run_id, WEIGHTS_DIR) if run_id else None),
                creation_ts=int(time.time() * 1000),
                tags=dict(tags or {}),
            )
        return self._get_version(name, str(number))

    def set_alias(self, name: str, alias: str, version: str | int) -> None:
        """Point ``alias`` of model ``name`` at ``version`` (the model owner's act; the audit never calls it)."""
        with self._lock:
            if (name, int(version)) not in self._versions:
                raise NotFound(f"model version models:/{name}/{version} does not exist")
            self._aliases[name][alias] = int(version)

    def register_record(
        self,
        name: str,
        record: RunRecord | None,
        *,
        diff: str | None = None,
        weights: bytes | None = None,
        aliases: tuple[str, ...] = (),
        tags: Mapping[str, str] | None = None,
    ) -> ModelVersionInfo:
        """A version laid out as the SDK lays it out: record, diff and weights in its run, digest tags.

        ``record=None`` makes a version whose run holds no record (as plain MLflow would).
        """
        version_tags = dict(tags or {})
        run_tags: dict[str, str] = {}
        run_params: dict[str, str] = {}
        if record is not None:
            version_tags.setdefault(TAG_RECORD_DIGEST, record.digest())
            run_tags[TAG_RECORD_DIGEST] = record.digest()
            run_params = training_params(record)
        if weights is not None:
            version_tags.setdefault(TAG_WEIGHTS_SHA256, sha256_hex(weights))
        run_id = self.create_run(tags=run_tags, artifacts=run_layout(record, diff, weights), params=run_params)
        info = self.create_version(name, run_id=run_id, tags=version_tags)
        for alias in aliases:
            self.set_alias(name, alias, info.version)
        return self._get_version(name, info.version)

    # -- the Registry interface --------------------------------------------
    def list_versions(self, name: str | None = None) -> Iterator[ModelVersionInfo]:
        with self._lock:
            keys = sorted(k for k in self._versions if name is None or k[0] == name)
            infos = [self._info(self._versions[k]) for k in keys]
        yield from infos

    def _get_version(self, name: str, version: str) -> ModelVersionInfo:
        with self._lock:
            found = self._versions.get((name, int(version)))
            if found is None:
                raise NotFound(self._missing(name, model_uri(name, version)))
            return self._info(found)

    def _get_by_alias(self, name: str, alias: str) -> ModelVersionInfo:
        with self._lock:
            number = self._aliases.get(name, {}).get(alias)
            if number is None:
                raise NotFound(self._missing(name, model_alias_uri(name, alias)))
            return self._info(self._versions[(name, number)])

    def _read_run_file(self, run_id: str, path: str) -> bytes | None:
        with self._lock:
            return self._run(run_id).artifacts.get(path)

    def log_run(self, *, experiment: str, identity: str, name: str, params: Mapping[str, str],
                tags: Mapping[str, str], metrics: Mapping[str, float], artifacts: Mapping[str, bytes],
                links: RunLinks | None = None) -> str:
        with self._lock:
            for run_id, run in self._runs.items():
                if run.experiment == experiment and run.tags.get(TAG_RUN_IDENTITY) == identity:
                    return run_id
        run_id = self.create_run(tags={**tags, TAG_RUN_IDENTITY: identity, MLFLOW_RUN_NAME: name},
                                 artifacts=artifacts, params=params, experiment=experiment)
        with self._lock:
            self._runs[run_id].links = links
        return run_id

    def find_runs(self, *, experiment: str, params: Mapping[str, str]) -> list[RunInfo]:
        with self._lock:
            found = [
                RunInfo(run_id, dict(run.params), dict(run.tags), run.deleted, run.start_time)
                for run_id, run in self._runs.items()
                if run.experiment == experiment and all(run.params.get(k) == v for k, v in params.items())
            ]
        return sorted(found, key=lambda r: (r.start_time or 0, r.run_id))

    def get_run(self, run_id: str) -> RunInfo:
        with self._lock:
            run = self._run(run_id)
            return RunInfo(run_id, dict(run.params), dict(run.tags), run.deleted, run.start_time)

    def _set_version_tags(self, info: ModelVersionInfo, tags: Mapping[str, str]) -> None:
        with self._lock:
            found = self._versions.get((info.name, int(info.version)))
            if found is None:
                raise NotFound(f"model version {info.ref} does not exist")
            found.tags.update(tags)

    def download_artifact(self, info: ModelVersionInfo, artifact_path: str, dest: Path) -> Path:
        dest = Path(dest)
        if dest.exists():
            raise BadInput(f"download destination {dest} already exists")
        if not info.run_id:
            raise NotFound(f"{info.ref} names no run, so it has no artifact {artifact_path}")
        data = self._read_run_file(info.run_id, artifact_path)
        if data is None:
            raise NotFound(f"run {info.run_id} of {info.ref} has no artifact {artifact_path}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = dest.with_name(dest.name + ".partial")
        partial.write_bytes(data)
        shutil.move(partial, dest)
        return dest

    # -- helpers -------------------------------------------------------------
    def _run(self, run_id: str) -> _Run:
        try:
            return self._runs[run_id]
        except KeyError:
            raise NotFound(f"run {run_id} does not exist in {self.uri}") from None

    def _missing(self, name: str, ref: str) -> str:
        if name not in self._aliases:
            return f"{ref}: no registered model named {name!r} in {self.uri}"
        known = sorted(v for (n, v) in self._versions if n == name)
        aliases = ", ".join(sorted(self._aliases[name])) or "none"
        return f"{ref} does not exist (versions of {name!r}: {', '.join(map(str, known))}; aliases: {aliases})"

    def _info(self, version: _Version) -> ModelVersionInfo:
        aliases = tuple(sorted(a for a, v in self._aliases.get(version.name, {}).items() if v == version.version))
        run_tags: dict[str, str] = {}
        run_params: dict[str, str] = {}
        deleted = False
        if version.run_id is not None and version.run_id in self._runs:
            run_tags = own_tags(self._runs[version.run_id].tags)
            run_params = dict(self._runs[version.run_id].params)
            deleted = self._runs[version.run_id].deleted
        return ModelVersionInfo(
            name=version.name,
            version=str(version.version),
            aliases=aliases,
            tags=dict(version.tags),
            run_id=version.run_id,
            source=version.source,
            creation_ts=version.creation_ts,
            run_tags=run_tags,
            run_deleted=deleted,
            run_params=run_params,
        )
