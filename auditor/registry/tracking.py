"""The MLflow writing side of the SDK: start or attach to a run, log the record, register a version.

Only the SDK (``auditor.sdk``) calls this module. Every MLflow call goes through
``MlflowClient`` with an explicit run id, so nothing depends on which run the
fluent API thinks is active; the fluent API is used only to start (and end) the
run, so that the user's own ``mlflow.log_*`` calls inside the block land in it.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.errors import BadInput
from auditor.lineage.record import RunRecord
from auditor.registry.base import mlflow_safe_names
from auditor.registry.datasets import dataset_inputs
from auditor.registry.layout import flatten_params, run_layout, safe_key, training_params, write_layout  # noqa: F401 (flatten_params: re-exported)
from auditor.registry.mlflow import mlflow_errors, quiet_progress_bars
from auditor.registry.open import registry_scheme
from auditor.tags import (
    MLFLOW_GIT_COMMIT,
    MLFLOW_GIT_REPO_URL,
    PARAM_SERVED_MANIFEST,
    TAG_DATA_PREFIX,
    TAG_DIRTY,
    TAG_IMAGE_DIGEST,
    TAG_LOGGED_MODEL,
    TAG_RECORD_DIGEST,
    TAG_SCHEMA_VERSION,
    TAG_TRAIN_SECONDS,
    TAG_WEIGHTS_SHA256,
    WEIGHTS_ARTIFACT,
    WEIGHTS_DIR,
)
from auditor.uris import look_alikes, registrable_name, run_artifact_uri

# MLflow's limits (mlflow/utils/validation.py): a batch holds 100 params, a param
# value 6,000 characters, a run tag 8,000 (key characters: layout.safe_key).
_PARAM_BATCH = 100
_MAX_TAG_VALUE = 8000


@dataclass
class Session:
    """An MLflow run this process logs into."""

    client: Any
    uri: str
    run_id: str
    owns_run: bool  # False when attached to a run someone else started (and will end)


def tracking_uri(explicit: str | None = None) -> str:
    """The URI to log to: the one given, else the one MLflow was set to, else the settings' default."""
    if explicit:
        return explicit
    import mlflow
    from mlflow.tracking._tracking_service.utils import is_tracking_uri_set

    if is_tracking_uri_set():
        return mlflow.get_tracking_uri()
    from auditor.settings import tracking_uri_from

    return tracking_uri_from()


def start(uri: str | None, experiment: str | None) -> Session:
    """Attach to the active MLflow run, or start one in ``experiment`` (created when missing)."""
    import mlflow
    from mlflow import MlflowClient

    quiet_progress_bars()
    active = mlflow.active_run()
    if active is not None:
        uri = mlflow.get_tracking_uri()
        return Session(MlflowClient(tracking_uri=uri), uri, active.info.run_id, owns_run=False)
    uri = tracking_uri(uri)
    if registry_scheme(uri) == "memory":
        raise BadInput(
            f"tracking URI {uri} names the in-memory test registry; auditor.track logs to MLflow",
            hint="set MLFLOW_TRACKING_URI to an MLflow URI, e.g. sqlite:///.repro/mlflow.db",
        )
    if uri.startswith("sqlite:///"):
        # MLflow creates the database but not the folder it lives in
        Path(uri[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(tracking_uri=uri)
    with mlflow_errors(f"experiment {experiment!r}", uri):
        experiment_id = _experiment_id(client, experiment or "Default")
        run = mlflow.start_run(experiment_id=experiment_id, tags=_context_tags())
    return Session(client, uri, run.info.run_id, owns_run=True)


def _context_tags() -> dict[str, str]:
    """MLflow's own run tags (git branch, remote URL, source, user) through the one redactor: given explicitly,
    they replace the raw values MLflow would write (a token in a remote URL or a branch name)."""
    from mlflow.tracking.context.registry import resolve_tags

    from auditor.lineage.redact import redact_text

    return {key: redact_text(str(value)) for key, value in resolve_tags({}).items()}


def _experiment_id(client: Any, name: str) -> str:
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    try:
        return client.create_experiment(name)
    except MlflowException:
        # another process created it between our two calls
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return found.experiment_id


def log_metrics(session: Session, metrics: Mapping[str, float], step: int | None) -> None:
    """Log metrics now (the record keeps the last value of each)."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    batch = [Metric(key, float(value), now, step or 0) for key, value in metrics.items()]
    with mlflow_errors(f"metrics of run {session.run_id}", session.uri):
        session.client.log_batch(session.run_id, metrics=batch)


def run_tags(record: RunRecord, train_seconds: float | None) -> dict[str, str]:
    """The tags MLflow users already read, and ours."""
    tags: dict[str, str] = {TAG_RECORD_DIGEST: record.digest(), TAG_SCHEMA_VERSION: record.schema_version}
    code, env = record.code, record.environment
    if code is not None:
        if code.commit:
            tags[MLFLOW_GIT_COMMIT] = code.commit
        if code.repo_url:
            tags[MLFLOW_GIT_REPO_URL] = code.repo_url
        tags[TAG_DIRTY] = "unknown" if code.dirty is None else str(code.dirty).lower()
    tags[TAG_IMAGE_DIGEST] = (env.image_digest if env is not None else None) or "none"
    for name, ref in record.data.items():
        tags[TAG_DATA_PREFIX + safe_key(name)] = f"{ref.uri}@{ref.version}" if ref.version else ref.uri
    weights = [a for a in record.outputs.artifacts if a.uri.endswith(WEIGHTS_ARTIFACT)]
    if weights:
        tags[TAG_WEIGHTS_SHA256] = weights[-1].sha256
    if train_seconds is not None:
        tags[TAG_TRAIN_SECONDS] = f"{train_seconds:.3f}"
    return {k: v[:_MAX_TAG_VALUE] for k, v in tags.items()}


def finish(
    session: Session,
    record: RunRecord,
    diff: str | None,
    *,
    weights: Path | None,
    train_seconds: float | None,
    failed: bool,
    pyfunc: Mapping[str, Any] | None = None,
) -> None:
    """Log params, inputs, tags, record (+ diff) and weights; end the run when this process started it.

    With ``pyfunc`` (from ``Run.save_weights(factory=…)``), also a LoggedModel of the pyfunc flavour
    over the weights, linked to the run; ``register`` makes the version from it.
    """
    from mlflow.entities import Param, RunTag

    from auditor.lineage.redact import redact_text

    client, run_id = session.client, session.run_id
    with mlflow_errors(f"logging run {run_id}", session.uri):
        existing = client.get_run(run_id).data.params
        params = mlflow_safe_names(training_params(record))  # redacted there: the values the audit compares against
        conflicts = sorted(k for k, v in params.items() if k in existing and existing[k] != v)
        if conflicts:
            raise BadInput(
                f"run {run_id} already has param(s) {', '.join(conflicts)} with other values; MLflow params are immutable",
                hint="start a fresh run or drop the outer run's conflicting params",
            )
        fresh = [Param(k, v) for k, v in params.items() if k not in existing]
        for start_at in range(0, len(fresh), _PARAM_BATCH):
            client.log_batch(run_id, params=fresh[start_at : start_at + _PARAM_BATCH])
        if record.data:
            client.log_inputs(run_id, datasets=dataset_inputs(record.data))
        with tempfile.TemporaryDirectory(prefix="repro-record-") as tmp:
            # one folder in the run's layout (record, diff, weights), logged in one call
            write_layout(Path(tmp), run_layout(record, diff), weights_file=weights)
            client.log_artifacts(run_id, tmp)
        tags = [RunTag(k, redact_text(v)) for k, v in run_tags(record, train_seconds).items()]
        if pyfunc is not None and weights is not None and not failed:
            tags.append(RunTag(TAG_LOGGED_MODEL, _log_pyfunc(client, run_id, weights, pyfunc)))
        client.log_batch(run_id, tags=tags)
    if session.owns_run:
        import mlflow

        active = mlflow.active_run()
        status = "FAILED" if failed else "FINISHED"
        if active is not None and active.info.run_id == run_id:
            mlflow.end_run(status=status)
        else:
            with mlflow_errors(f"ending run {run_id}", session.uri):
                client.set_terminated(run_id, status=status)


def _log_pyfunc(client: Any, run_id: str, weights: Path, spec: Mapping[str, Any]) -> str:
    """A LoggedModel (MLmodel, signature, the pyfunc code and the safetensors weights) linked to ``run_id``."""
    import mlflow.pyfunc

    from auditor.lineage.redact import redact_mapping
    from auditor.registry import pyfunc_model

    run = client.get_run(run_id)
    model = client.create_logged_model(run.info.experiment_id, name=WEIGHTS_DIR, source_run_id=run_id)
    with tempfile.TemporaryDirectory(prefix="repro-pyfunc-") as tmp:
        folder = Path(tmp) / "model"
        mlflow.pyfunc.save_model(
            str(folder), python_model=pyfunc_model.__file__, artifacts={"weights": str(weights)},
            code_paths=[str(_redacted_copy(Path(spec["code"]), Path(tmp) / "code"))], model_config={"factory": spec["factory"], "factory_kwargs": redact_mapping(spec["factory_kwargs"])},
            signature=spec.get("signature"), input_example=spec.get("input_example"),
            pip_requirements=["torch", "safetensors", "numpy"],
        )
        client.log_model_artifacts(model.model_id, str(folder))
        # what the version will serve, file by file, in a param nobody can change: the audit holds the LoggedModel to it
        client.log_param(run_id, PARAM_SERVED_MANIFEST, served_manifest_json(folder))
    client.finalize_logged_model(model.model_id, "READY")
    return model.model_id


# MLflow itself writes this file into a registered model's folder whenever ``models:/NAME/V`` is downloaded or loaded,
# and with a local artifact store that folder is the store itself (mlflow.store.artifact.models_artifact_repo).
REGISTERED_MODEL_META = "registered_model_meta"


def _mlflow_own_meta(path: Path) -> bool:
    """Whether ``path`` is MLflow's registered_model_meta as MLflow writes it: two scalar keys and nothing else.

    Anything more (another key, a nested value, bytes that are not YAML) is a file like any other: compared."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return (isinstance(data, dict) and set(data) == {"model_name", "model_version"}
            and all(isinstance(v, (str, int)) for v in data.values()))


def served_manifest(folder: Path) -> dict[str, str]:
    """``{relative path: "sha256:<hex>"}`` of every file under ``folder`` (a LoggedModel's MLmodel, code and weights).

    MLflow's own ``registered_model_meta`` at the top (written by every load through ``models:/``) is left out when it
    holds only what MLflow writes; otherwise it is listed, so content hidden there is still a change."""
    from auditor.digests import sha256_digest

    files = [p for p in sorted(folder.rglob("*")) if p.is_file()]
    return {p.relative_to(folder).as_posix(): sha256_digest(p.read_bytes()) for p in files
            if not (p.parent == folder and p.name == REGISTERED_MODEL_META and _mlflow_own_meta(p))}


def served_manifest_json(folder: Path) -> str:
    """The manifest as the param holds it (canonical JSON; MLflow caps a param at 6,000 characters)."""
    from auditor.canonical import canonical_json

    text = canonical_json(served_manifest(folder)).decode()
    if len(text) > 6000:
        raise BadInput(f"the LoggedModel at {folder} holds too many files for its manifest param ({len(text)} characters)",
                       hint="log fewer code paths")
    return text


def _redacted_copy(script: Path, folder: Path) -> Path:
    """The script the LoggedModel serves its factory from, through the one redactor (still valid Python)."""
    from auditor.lineage.redact_code import redact_source

    folder.mkdir(parents=True, exist_ok=True)
    target = folder / script.name
    target.write_text(redact_source(script.read_text(encoding="utf-8", errors="surrogateescape")), encoding="utf-8",
                      errors="surrogateescape")
    return target


def look_alike_names(client: Any, uri: str, name: str) -> list[str]:
    """The registered models whose names look like ``name`` but are not it (``auditor.uris.look_alikes``: another case,
    another Unicode form, fullwidth letters): MLflow keeps each as a model of its own. Every name is listed, in pages."""
    from auditor.registry.mlflow import registered_names

    return look_alikes(name, registered_names(client, uri))


def register(client: Any, uri: str, run_id: str, name: str, record: RunRecord) -> str:
    """Create the next version of ``name`` from ``run_id``, tagged with the record digest; returns the version.

    ``name`` is held to the audit's rule and registered in NFC (``auditor.uris.registrable_name``; the SDK's
    ``register_model`` has applied it already, and says so): nothing is written under a name the audit refuses."""
    from mlflow.exceptions import MlflowException

    name = registrable_name(name)
    with mlflow_errors(f"registered model {name!r}", uri):
        try:
            client.create_registered_model(name)
        except MlflowException as exc:
            if getattr(exc, "error_code", "") != "RESOURCE_ALREADY_EXISTS":
                raise
        tags = {TAG_RECORD_DIGEST: record.digest()}
        weights = [a for a in record.outputs.artifacts if a.uri.endswith(WEIGHTS_ARTIFACT)]
        if weights:
            tags[TAG_WEIGHTS_SHA256] = weights[-1].sha256
        run = client.get_run(run_id)
        if run.data.tags.get(TAG_TRAIN_SECONDS):
            tags[TAG_TRAIN_SECONDS] = run.data.tags[TAG_TRAIN_SECONDS]
        model_id = run.data.tags.get(TAG_LOGGED_MODEL)
        # a LoggedModel (pyfunc over the weights) when the run logged one; else the run's weights folder
        source = client.get_logged_model(model_id).artifact_location if model_id else run_artifact_uri(run_id, WEIGHTS_DIR)
        version = client.create_model_version(name, source=source, run_id=run_id, tags=tags, model_id=model_id)
    return str(version.version)
