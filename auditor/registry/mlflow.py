"""The registry read through MLflow's client: SQLite, PostgreSQL or a tracking server alike.

Costs are what shaped this module (FACTS.md, MLflow call costs): versions are
listed in pages, aliases come from a page of registered models (MLflow's
version search leaves them empty), and the runs' tags are fetched with one
``search_runs`` per chunk of run ids, never one call per version. ``mlflow`` is
imported when the client is first needed, not at import.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from auditor.errors import BadInput, InfrastructureError, NotFound
from auditor.registry.base import ModelVersionInfo, Registry, RunInfo, RunLinks
from auditor.tags import TAG_RUN_IDENTITY, own_tags

# MLflow caps a registered-model page at 1,000 and a version page at 200,000;
# 1,000 versions a page keeps each response small and the call count low.
VERSION_PAGE = 1000
MODEL_PAGE = 1000
EXPERIMENT_PAGE = 1000
RUN_CHUNK = 500
_RUN_ID = re.compile(r"^[0-9A-Za-z_-]{1,64}$")


@contextmanager
def mlflow_errors(what: str, uri: str) -> Iterator[None]:
    """Turn MLflow and transport errors into ours: NotFound, BadInput or InfrastructureError, naming ``what``."""
    from mlflow.exceptions import MlflowException

    from auditor.lineage.redact import redact_text

    uri = redact_text(uri)  # a database URI may carry a password; messages end up in logs
    try:
        yield
    except MlflowException as exc:
        code = getattr(exc, "error_code", "")
        message = redact_text(str(getattr(exc, "message", exc)))
        # MLflow reports a missing alias as INVALID_PARAMETER_VALUE "... alias X not found."
        if code in {"RESOURCE_DOES_NOT_EXIST", "NOT_FOUND"} or "not found" in message.lower():
            raise NotFound(f"{what}: not found in {uri} ({message})") from exc
        if code in {"INVALID_PARAMETER_VALUE", "BAD_REQUEST", "INVALID_STATE", "RESOURCE_ALREADY_EXISTS"}:
            raise BadInput(f"{what}: MLflow at {uri} refused it ({message})") from exc
        raise InfrastructureError(
            f"{what}: MLflow at {uri} failed ({code or 'no error code'}: {message})",
            hint="check that the tracking server and its database are up, then retry",
        ) from exc
    except ImportError as exc:
        raise BadInput(
            f"{what}: MLflow needs the package {exc.name!r} for {uri}, and it is not installed",
            hint="install the database driver or use another tracking URI",
        ) from exc
    except (OSError, ConnectionError) as exc:
        raise InfrastructureError(
            f"{what}: could not reach MLflow at {uri} ({redact_text(str(exc))})",
            hint="check the tracking URI and the network",
        ) from exc


@contextmanager
def artifact_errors(what: str) -> Iterator[None]:
    """Artifact stores raise their own kinds (botocore, requests, OSError): all are infrastructure to us."""
    from mlflow.exceptions import MlflowException

    from auditor.errors import ReproError
    from auditor.lineage.redact import redact_text

    what = redact_text(what)
    try:
        yield
    except ReproError:
        raise
    except MlflowException as exc:
        message = redact_text(str(exc.message))
        if getattr(exc, "error_code", "") == "RESOURCE_DOES_NOT_EXIST":
            raise NotFound(f"{what}: not found ({message})") from exc
        raise InfrastructureError(f"{what}: {message}", hint="check the artifact store, then retry") from exc
    except Exception as exc:  # noqa: BLE001 - the boundary to arbitrary storage backends
        raise InfrastructureError(
            f"{what}: {type(exc).__name__}: {redact_text(str(exc))}",
            hint="check the artifact store and its credentials, then retry",
        ) from exc


def quiet_progress_bars() -> None:
    """Keep MLflow's per-download progress bars off our stderr, unless the user asked for them."""
    import os

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


def _quote(value: str) -> str:
    # MLflow's filter grammar has no escape character: pick the quote the value does not contain.
    if "'" not in value:
        return f"'{value}'"
    if '"' not in value:
        return f'"{value}"'
    raise BadInput(f"model name {value!r} contains both quote characters; MLflow cannot filter on it")


def _pages(call, **kwargs: Any) -> Iterator[Any]:
    token = None
    while True:
        page = call(page_token=token, **kwargs)
        yield from page
        token = getattr(page, "token", None)
        if not token:
            return


def registered_names(client: Any, uri: str) -> list[str]:
    """Every registered model's name, sorted, listed in pages: one listing for "did you mean" and for the look-alike
    check at registration (``auditor.registry.tracking.look_alike_names``)."""
    with mlflow_errors("listing registered models", uri):
        return sorted(m.name for m in _pages(client.search_registered_models, max_results=MODEL_PAGE))


class MlflowRegistry(Registry):
    """The registry behind an MLflow tracking (and optionally registry) URI."""

    def __init__(
        self,
        tracking_uri: str,
        *,
        registry_uri: str | None = None,
        client: Any | None = None,
        version_page: int = VERSION_PAGE,
        run_chunk: int = RUN_CHUNK,
    ) -> None:
        self.uri = tracking_uri
        self.registry_uri = registry_uri
        self._client = client
        self.version_page = version_page
        self.run_chunk = run_chunk
        self._artifact_uris: dict[str, str] = {}  # run id -> artifact root, learnt while listing

    @property
    def client(self) -> Any:
        """The ``MlflowClient`` (created on first use; tests may pass their own, e.g. a call counter)."""
        if self._client is None:
            from mlflow import MlflowClient

            quiet_progress_bars()
            self._client = MlflowClient(tracking_uri=self.uri, registry_uri=self.registry_uri)
        return self._client

    # -- listing ---------------------------------------------------------------
    def list_versions(self, name: str | None = None) -> Iterator[ModelVersionInfo]:
        name_filter = f"name = {_quote(name)}" if name is not None else None
        aliases = self._aliases(name_filter)
        experiment_ids: list[str] | None = None
        for batch in self._version_pages(name_filter):
            run_ids = {mv.run_id for mv in batch if mv.run_id}
            if run_ids and experiment_ids is None:
                experiment_ids = self._experiment_ids()
            run_tags = self._run_tags(run_ids, experiment_ids or [])
            for mv in batch:
                yield self._info(mv, aliases.get((mv.name, str(mv.version)), ()), run_tags.get(mv.run_id, {}))

    def model_names(self) -> list[str]:
        return registered_names(self.client, self.uri)

    def version_names(self, name: str) -> tuple[list[str], list[str]]:
        name_filter = f"name = {_quote(name)}"
        versions = [str(mv.version) for page in self._version_pages(name_filter) for mv in page]
        aliases = {alias for found in self._aliases(name_filter).values() for alias in found}
        return versions, sorted(aliases)

    def _version_pages(self, name_filter: str | None) -> Iterator[list[Any]]:
        token = None
        while True:
            with mlflow_errors("listing model versions", self.uri):
                page = self.client.search_model_versions(
                    filter_string=name_filter,
                    max_results=self.version_page,
                    # A total order, so that offset pages neither skip nor repeat while tags change.
                    order_by=["name ASC", "version_number ASC"],
                    page_token=token,
                )
            yield list(page)
            token = getattr(page, "token", None)
            if not token:
                return

    def _aliases(self, name_filter: str | None) -> dict[tuple[str, str], tuple[str, ...]]:
        found: dict[tuple[str, str], list[str]] = {}
        with mlflow_errors("listing registered models", self.uri):
            for model in _pages(self.client.search_registered_models, filter_string=name_filter, max_results=MODEL_PAGE):
                for alias, version in _alias_items(model.aliases):
                    found.setdefault((model.name, str(version)), []).append(alias)
        return {key: tuple(sorted(value)) for key, value in found.items()}

    def _experiment_ids(self) -> list[str]:
        from mlflow.entities import ViewType

        with mlflow_errors("listing experiments", self.uri):
            experiments = _pages(self.client.search_experiments, view_type=ViewType.ALL, max_results=EXPERIMENT_PAGE)
            return [e.experiment_id for e in experiments]

    def _run_tags(self, run_ids: Iterable[str], experiment_ids: list[str]) -> dict[str, dict[str, str]]:
        """The ``repro.*`` tags of many runs, one ``search_runs`` per chunk of ids."""
        from mlflow.entities import ViewType

        wanted = sorted(r for r in run_ids if _RUN_ID.match(r))
        found: dict[str, dict[str, str]] = {}
        if not experiment_ids:
            return found
        for start in range(0, len(wanted), self.run_chunk):
            chunk = wanted[start : start + self.run_chunk]
            ids = ", ".join(f"'{r}'" for r in chunk)
            with mlflow_errors(f"looking up {len(chunk)} runs", self.uri):
                runs = _pages(
                    self.client.search_runs,
                    experiment_ids=experiment_ids,
                    filter_string=f"attributes.run_id IN ({ids})",
                    run_view_type=ViewType.ALL,
                    max_results=len(chunk) + 1,
                )
                for run in runs:
                    found[run.info.run_id] = own_tags(run.data.tags)
                    self._artifact_uris[run.info.run_id] = run.info.artifact_uri
        return found

    # -- single versions ---------------------------------------------------------
    def _get_version(self, name: str, version: str) -> ModelVersionInfo:
        with mlflow_errors(f"model version models:/{name}/{version}", self.uri):
            mv = self.client.get_model_version(name, version)
        return self._with_run_tags(mv)

    def _get_by_alias(self, name: str, alias: str) -> ModelVersionInfo:
        with mlflow_errors(f"model alias models:/{name}@{alias}", self.uri):
            mv = self.client.get_model_version_by_alias(name, alias)
        return self._with_run_tags(mv)

    def _with_run_tags(self, mv: Any) -> ModelVersionInfo:
        run_tags: dict[str, str] = {}
        run_params: dict[str, str] = {}
        deleted = False
        if mv.run_id:
            from mlflow.exceptions import MlflowException

            try:
                run = self.client.get_run(mv.run_id)
                run_tags = own_tags(run.data.tags)
                run_params = dict(run.data.params)
                deleted = run.info.lifecycle_stage == "deleted"
                self._artifact_uris[mv.run_id] = run.info.artifact_uri
            except MlflowException as exc:
                # A deleted or purged run is data about this version; load_record reports it precisely.
                if getattr(exc, "error_code", "") != "RESOURCE_DOES_NOT_EXIST":
                    with mlflow_errors(f"run {mv.run_id}", self.uri):
                        raise
        return replace(self._info(mv, tuple(sorted(mv.aliases or ())), run_tags), run_deleted=deleted, run_params=run_params)

    @staticmethod
    def _info(mv: Any, aliases: tuple[str, ...], run_tags: Mapping[str, str]) -> ModelVersionInfo:
        return ModelVersionInfo(
            name=mv.name,
            version=str(mv.version),
            aliases=aliases,
            tags=dict(mv.tags or {}),
            run_id=mv.run_id or None,
            source=mv.source,
            creation_ts=mv.creation_timestamp,
            run_tags=dict(run_tags),
            model_id=getattr(mv, "model_id", None) or None,
        )

    # -- runs of the audits experiment ------------------------------------------------------
    def _experiment(self, name: str, *, create: bool) -> str | None:
        from mlflow.exceptions import MlflowException

        with mlflow_errors(f"experiment {name!r}", self.uri):
            found = self.client.get_experiment_by_name(name)
            if found is not None:
                return found.experiment_id
            if not create:
                return None
            try:
                return self.client.create_experiment(name, artifact_location=own_artifact_location(self.uri))
            except MlflowException as exc:  # created meanwhile by a concurrent publisher
                if getattr(exc, "error_code", "") != "RESOURCE_ALREADY_EXISTS":
                    raise
                return self.client.get_experiment_by_name(name).experiment_id

    def _search(self, experiment_id: str, filter_string: str) -> list[Any]:
        from mlflow.entities import ViewType

        with mlflow_errors(f"searching runs of experiment {experiment_id}", self.uri):
            return list(_pages(self.client.search_runs, experiment_ids=[experiment_id], filter_string=filter_string,
                               run_view_type=ViewType.ALL, max_results=1000, order_by=["attributes.start_time ASC"]))

    @staticmethod
    def _run_info(run: Any) -> RunInfo:
        return RunInfo(run.info.run_id, dict(run.data.params), dict(run.data.tags),
                       run.info.lifecycle_stage == "deleted", run.info.start_time, dict(run.data.metrics),
                       experiment_id=run.info.experiment_id)

    def log_run(self, *, experiment: str, identity: str, name: str, params: Mapping[str, str],
                tags: Mapping[str, str], metrics: Mapping[str, float], artifacts: Mapping[str, bytes],
                links: RunLinks | None = None) -> str:
        """One run per ``identity``, made whole: a run a failed attempt left half made is completed, not reused as is.

        Names MLflow refuses are made safe first (``mlflow_safe_names``); a param already logged with another
        value is a finding (params are immutable, and an anchor that changed is tampering). ``links`` become the
        run's inputs (the LoggedModel, the datasets) and the model's metrics are logged with its ``model_id``.
        """
        from auditor.registry.base import mlflow_safe_names

        params, metrics = mlflow_safe_names(params), mlflow_safe_names(metrics)
        experiment_id = self._experiment(experiment, create=True)
        existing = self._search(experiment_id, f"tags.`{TAG_RUN_IDENTITY}` = {_quote(identity)}")
        with mlflow_errors(f"logging a run in experiment {experiment!r}", self.uri):
            if existing:
                run = existing[0]
            else:
                run = self.client.create_run(experiment_id, tags={**tags, TAG_RUN_IDENTITY: identity}, run_name=name)
            self._complete(run, params, tags, metrics, artifacts, links)
        return run.info.run_id

    def _complete(self, run: Any, params: Mapping[str, str], tags: Mapping[str, str], metrics: Mapping[str, float],
                  artifacts: Mapping[str, bytes], links: RunLinks | None = None) -> None:
        """Log what ``run`` lacks of params, metrics, tags, inputs and artifacts, then mark it finished (idempotent)."""
        import time

        from mlflow.entities import Metric, Param, RunTag

        from auditor.errors import Findings

        run_id, have = run.info.run_id, run.data
        changed = sorted(k for k, v in params.items() if k in have.params and have.params[k] != v)
        if changed:
            raise Findings(f"run {run_id} already anchors other values for {', '.join(changed)}: params are immutable",
                           hint="run repro-audit evidence verify")
        model_id, dataset = self._link_inputs(run, links) if links else (None, None)
        linked = set(links.model_metrics) if links and model_id else set()
        now = int(time.time() * 1000)
        self.client.log_batch(
            run_id,
            params=[Param(k, v) for k, v in params.items() if k not in have.params],
            metrics=[Metric(k, float(v), now, 0, **({"model_id": model_id, **dataset} if k in linked else {}))
                     for k, v in metrics.items() if k not in have.metrics],
            tags=[RunTag(k, v) for k, v in tags.items() if have.tags.get(k) != v],
        )
        present = {f.path for f in self.client.list_artifacts(run_id)} if artifacts else set()
        missing = {path: data for path, data in artifacts.items() if path.split("/", 1)[0] not in present}
        if missing:
            with tempfile.TemporaryDirectory(prefix="repro-run-") as tmp:
                for path, data in missing.items():
                    target = Path(tmp) / path
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)
                self.client.log_artifacts(run_id, tmp)
        if run.info.status != "FINISHED":
            self.client.set_terminated(run_id, status="FINISHED")

    def _link_inputs(self, run: Any, links: RunLinks) -> tuple[str | None, dict[str, str]]:
        """Log ``links`` as the run's inputs (what it lacks of them); the model id and the one dataset to log
        the model's metrics with (``dataset_name``/``dataset_digest``; empty unless there is exactly one dataset).

        A LoggedModel the tracking server no longer has (deleted, or another server's id) is left out with a
        warning: the audit stands without the link.
        """
        import logging

        from mlflow.entities import LoggedModelInput
        from mlflow.exceptions import MlflowException

        from auditor.lineage.record import DataRef
        from auditor.registry.datasets import dataset_inputs

        model_id = links.model_id
        if model_id:
            try:
                self.client.get_logged_model(model_id)
            except MlflowException as exc:
                logging.getLogger(__name__).warning("audit run %s: LoggedModel %s not linked (%s)", run.info.run_id,
                                                    model_id, getattr(exc, "error_code", "") or exc)
                model_id = None
        refs = {name: DataRef.model_validate(ref) for name, ref in links.datasets.items()}
        datasets = dataset_inputs(refs, context=links.context, extra_tags=links.input_tags) if refs else []
        inputs = getattr(run, "inputs", None)
        have_data = {(d.dataset.name, d.dataset.digest) for d in getattr(inputs, "dataset_inputs", None) or []}
        have_models = {m.model_id for m in getattr(inputs, "model_inputs", None) or []}
        new_data = [d for d in datasets if (d.dataset.name, d.dataset.digest) not in have_data]
        new_models = [LoggedModelInput(model_id)] if model_id and model_id not in have_models else []
        if new_data or new_models:
            self.client.log_inputs(run.info.run_id, datasets=new_data or None, models=new_models or None)
        one = {"dataset_name": datasets[0].dataset.name, "dataset_digest": datasets[0].dataset.digest} if len(datasets) == 1 else {}
        return model_id, one

    def find_runs(self, *, experiment: str, params: Mapping[str, str]) -> list[RunInfo]:
        experiment_id = self._experiment(experiment, create=False)
        if experiment_id is None:
            return []
        where = " AND ".join(f"params.`{k}` = {_quote(v)}" for k, v in params.items())
        return [self._run_info(run) for run in self._search(experiment_id, where)]

    def get_run(self, run_id: str) -> RunInfo:
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException as exc:
            if getattr(exc, "error_code", "") == "RESOURCE_DOES_NOT_EXIST":
                raise NotFound(f"run {run_id} does not exist in {self.uri}") from None
            with mlflow_errors(f"run {run_id}", self.uri):
                raise
        self._artifact_uris[run_id] = run.info.artifact_uri
        return self._run_info(run)

    # -- run artifacts ---------------------------------------------------------------
    # Straight to the run's artifact repository: the client's runs:/ path costs four
    # get_run calls and a logged-model search per file (31 ms a record on SQLite).
    def _repo(self, run_id: str) -> Any:
        from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

        location = self._artifact_uris.get(run_id)
        if location is None:
            with mlflow_errors(f"run {run_id}", self.uri):
                location = self.client.get_run(run_id).info.artifact_uri
            self._artifact_uris[run_id] = location
        with artifact_errors(f"artifact store {location} of run {run_id}"):
            return get_artifact_repository(location, tracking_uri=self.uri, registry_uri=self.registry_uri)

    def _has_file(self, run_id: str, path: str) -> bool:
        directory = path.rsplit("/", 1)[0] if "/" in path else None
        repo = self._repo(run_id)
        with artifact_errors(f"artifacts of run {run_id}"):
            return any(f.path == path and not f.is_dir for f in repo.list_artifacts(directory))

    def _fetch(self, run_id: str, path: str, folder: str) -> Path:
        repo = self._repo(run_id)
        with artifact_errors(f"artifact {path} of run {run_id}"):
            return Path(repo.download_artifacts(path, dst_path=folder))

    def _read_run_file(self, run_id: str, path: str) -> bytes | None:
        if not self._has_file(run_id, path):
            return None
        with tempfile.TemporaryDirectory(prefix="repro-artifact-") as tmp:
            return self._fetch(run_id, path, tmp).read_bytes()

    def download_artifact(self, info: ModelVersionInfo, artifact_path: str, dest: Path) -> Path:
        dest = Path(dest)
        if dest.exists():
            raise BadInput(f"download destination {dest} already exists")
        if info.run_id and not self._has_file(info.run_id, artifact_path):
            raise NotFound(f"run {info.run_id} of {info.ref} has no artifact {artifact_path}")
        if not info.run_id and not info.source:
            raise NotFound(f"{info.ref} names neither a run nor a source, so it has no artifact {artifact_path}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        # Downloaded beside dest and renamed: a reader never sees half a file.
        with tempfile.TemporaryDirectory(prefix=".repro-download-", dir=dest.parent) as tmp:
            if info.run_id:
                local = self._fetch(info.run_id, artifact_path, tmp)
            else:
                import mlflow.artifacts

                with artifact_errors(f"artifact {artifact_path} of {info.ref}"):
                    local = mlflow.artifacts.download_artifacts(
                        artifact_uri=f"{(info.source or '').rstrip('/')}/{artifact_path}", dst_path=tmp, tracking_uri=self.uri
                    )
            shutil.move(local, dest)
        return dest

    def download_served(self, info: ModelVersionInfo, dest: Path) -> Path | None:
        """The folder ``mlflow.pyfunc.load_model(info.ref)`` loads (the version's LoggedModel: MLmodel, code copy,
        weights), downloaded to ``dest``; None when the version serves its run's own artifact (``runs:/…``)."""
        from auditor.tags import TAG_LOGGED_MODEL
        from auditor.uris import run_artifact_path

        source = info.source or ""
        if not source or run_artifact_path(source) is not None or not info.run_tags.get(TAG_LOGGED_MODEL):
            return None
        import mlflow.artifacts

        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        with artifact_errors(f"the served model {source} of {info.ref}"):
            return Path(mlflow.artifacts.download_artifacts(artifact_uri=source, dst_path=str(dest), tracking_uri=self.uri))

    # -- writes ------------------------------------------------------------------------
    def _set_version_tags(self, info: ModelVersionInfo, tags: Mapping[str, str]) -> None:
        for key, value in tags.items():
            with mlflow_errors(f"tag {key} on {info.ref}", self.uri):
                self.client.set_model_version_tag(info.name, info.version, key, value)

    def get_description(self, info: ModelVersionInfo) -> str:
        """Read now, not from ``info``: a person may have edited it while the audit rebuilt."""
        with mlflow_errors(f"model version {info.ref}", self.uri):
            return self.client.get_model_version(info.name, info.version).description or ""

    def _set_description(self, info: ModelVersionInfo, text: str) -> None:
        with mlflow_errors(f"the description of {info.ref}", self.uri):
            self.client.update_model_version(info.name, info.version, description=text)


def own_artifact_location(tracking_uri: str) -> str | None:
    """Where the audits experiment keeps its runs' artifacts: beside a SQLite database (``<its folder>/artifacts``),
    never ``./mlruns`` of whatever folder the first audit ran in; a tracking server's own default otherwise."""
    from auditor.uris import sqlite_file

    path = sqlite_file(tracking_uri)
    return (path.expanduser().resolve().parent / "artifacts").as_uri() if path is not None else None


def _alias_items(aliases: Any) -> Iterable[tuple[str, Any]]:
    # MLflow returns aliases as a dict {alias: version} on registered models, as entities on some stores.
    if isinstance(aliases, Mapping):
        return aliases.items()
    return [(a.alias, a.version) for a in aliases or ()]
