"""Every MLflow tag, param and artifact name the project reads or writes, and the run-artifact layout. Pure.

The SDK writes these names at training time, the registry readers and the steps read and write
them at audit time, the sampler reads them to choose tonight's audits. Nothing else spells them.

Run artifacts (one writer, :func:`run_artifacts`, used by the MLflow SDK path, the in-memory twin
and the test fixtures)::

    repro/run_record.json    the run record (its digest is TAG_RECORD_DIGEST)
    repro/diff.patch         the recorded diff, when the tree was dirty
    model/model.safetensors  the weights (their sha256 is TAG_WEIGHTS_SHA256)
"""

from __future__ import annotations

from collections.abc import Mapping

from auditor.contract import DIFF_FILE, RECORD_FILE, WEIGHTS_FILE
from auditor.uris import run_artifact_uri

#: prefix of every tag this project owns (run tags are copied onto listings by this prefix)
PREFIX = "repro."

# -- run and version tags written at training time ---------------------------------------
TAG_RECORD_DIGEST = "repro.record_digest"
TAG_WEIGHTS_SHA256 = "repro.weights_sha256"
TAG_TRAIN_SECONDS = "repro.train_seconds"
TAG_SCHEMA_VERSION = "repro.schema_version"
TAG_DIRTY = "repro.dirty"
TAG_IMAGE_DIGEST = "repro.image_digest"
TAG_DATA_PREFIX = "repro.data."
#: run tag: the LoggedModel (pyfunc over the weights) the run logged, which its version is registered from
TAG_LOGGED_MODEL = "repro.logged_model"
#: param of a training run: ``{path: sha256}`` of every file of its LoggedModel as logged (what a version serves)
PARAM_SERVED_MANIFEST = "repro.served.manifest"
#: the tag on an MLflow dataset input naming the snapshot version it was
TAG_DATASET_VERSION = "repro.version"

# -- version tags set by people or the sampler --------------------------------------------
TAG_TIER = "repro.tier"
TAG_COST_HOURS = "repro.cost_hours"
#: an owner's mark that a version is retired (``true``): never sampled, shown as retired on the coverage page
TAG_RETIRED = "repro.retired"
#: the values of ``TAG_RETIRED`` that mean retired (read case-insensitively); anything else means not retired
RETIRED_VALUES = frozenset({"true", "yes", "1"})

# -- version tags written by calibration and audits ----------------------------------------
TAG_BANDS = "repro.bands"
#: the calibration evidence the bands and the same-seed floor rest on (``repro.calibration/1`` JSON)
TAG_CALIBRATION = "repro.calibration"
TAG_VERDICT = "repro.audit.verdict"
TAG_AUDIT_AT = "repro.audit.at"
TAG_REPORT = "repro.audit.report"
TAG_AUDIT_DATE = "repro.audit.date"
TAG_AUDIT_PREVIOUS_DATE = "repro.audit.previous_date"
#: the MLflow run the audit was logged as (in the audits experiment)
TAG_AUDIT_RUN = "repro.audit.run"
#: the report's web address, when ``REPRO_REPORTS_URL`` says where the reports folder is served
TAG_REPORT_URL = "repro.audit.report_url"
#: version tag prefix: ``repro.audit.tier.<tier>`` = that tier's status in the last audit (short, beside the verdict)
TAG_AUDIT_TIER_PREFIX = "repro.audit.tier."

# -- where a person looks in MLflow's UI (the ``repro.audit.*`` tags above are for the tools) ------
#: version tag: the latest verdict again, under a short key MLflow's UI lists first (it sorts tag keys by character
#: code, and ``_`` comes before every lowercase letter; MLflow allows no ``!``), so the versions list shows its value
TAG_SUMMARY = "_repro"
#: the markers around the block each audit writes at the top of a version's description (markdown; its page shows no
#: HTML comment): the verdict, its date and links. Only what lies between them is rewritten: the rest is the user's
DESCRIPTION_START = "<!-- repro-audit -->"
DESCRIPTION_END = "<!-- /repro-audit -->"
#: MLflow's longest model-version description (its SQL column)
MAX_VERSION_DESCRIPTION = 5000
#: MLflow's own run tag its UI shows as the run's description (markdown): an audit run's names the version it audited
MLFLOW_NOTE = "mlflow.note.content"

# -- params logged at training time (MLflow params cannot be overwritten through the API) ---
PARAM_RECORD_DIGEST = TAG_RECORD_DIGEST
PARAM_SEED = "repro.seed"

# -- audit and calibration runs (the audits experiment) ---------------------------------------
#: tag: what a run in the audits experiment is ("audit" or "calibration")
TAG_RUN_KIND = "repro.run_kind"
#: tag: the audit's identity (its report stem), so a retried publish logs its run once
TAG_RUN_IDENTITY = "repro.identity"
TAG_RUN_MODEL = "repro.model"
TAG_RUN_MODEL_VERSION = "repro.model_version"
#: tag prefix of an audit run: ``repro.tier.<guarantee>`` = that guarantee tier's status
TAG_RUN_TIER_PREFIX = "repro.tier."
#: MLflow's own tags for what made a run (its UI's "Source" column and the run's source type)
MLFLOW_RUN_NAME = "mlflow.runName"
MLFLOW_SOURCE_NAME = "mlflow.source.name"
MLFLOW_SOURCE_TYPE = "mlflow.source.type"
#: MLflow's own tags for a training run's code (its UI links the commit)
MLFLOW_GIT_COMMIT = "mlflow.source.git.commit"
MLFLOW_GIT_REPO_URL = "mlflow.source.git.repoURL"
#: what fills them on the audits experiment's runs
AUDIT_RUN_SOURCE = "repro-audit"
#: params: the ledger head right after this audit was published (the ledger's anchors)
PARAM_LEDGER_LOCATION = "repro.ledger.location"
PARAM_LEDGER_SEQ = "repro.ledger.seq"
PARAM_LEDGER_HEAD = "repro.ledger.head"
#: param: the hash of the ledger's entry 0, which names the ledger wherever its folder is moved
PARAM_LEDGER_ID = "repro.ledger.id"
#: param: on a versioned (Object Lock) bucket, the version id of the entry object this head is
PARAM_LEDGER_ENTRY_VERSION = "repro.ledger.entry_version"
PARAM_EVIDENCE_SHA256 = "repro.evidence.sha256"
PARAM_ATTESTATION_SHA256 = "repro.attestation.sha256"
#: param of a calibration run: the sha256 of its evidence artifact
PARAM_CALIBRATION_SHA256 = "repro.calibration.sha256"
#: param of a calibration run: how many seed-varied reruns it measured
PARAM_CALIBRATION_RERUNS = "repro.reruns"
CALIBRATION_ARTIFACT = "calibration.json"

#: MLflow's own tag on a dataset input naming its role
MLFLOW_DATASET_CONTEXT = "mlflow.data.context"

# -- the run-artifact layout ------------------------------------------------------------------
RECORD_DIR = "repro"
RECORD_ARTIFACT = f"{RECORD_DIR}/{RECORD_FILE}"
DIFF_ARTIFACT = f"{RECORD_DIR}/{DIFF_FILE}"
WEIGHTS_DIR = "model"
WEIGHTS_ARTIFACT = f"{WEIGHTS_DIR}/{WEIGHTS_FILE}"


def own_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """The ``repro.*`` subset of ``tags``."""
    return {k: v for k, v in tags.items() if k.startswith(PREFIX)}


def diff_artifact(diff_file: str) -> str:
    """Where a record's ``code.diff_file`` lives among the run's artifacts."""
    return f"{RECORD_DIR}/{diff_file}"


def weights_uri(run_id: str) -> str:
    """The ``runs:/`` URI of a run's weights, as the record lists them."""
    return run_artifact_uri(run_id, WEIGHTS_ARTIFACT)


def run_artifacts(record_json: bytes, diff: bytes | None = None, weights: bytes | None = None) -> dict[str, bytes]:
    """The run's artifacts by path: the one description of the layout that every writer uses."""
    artifacts = {RECORD_ARTIFACT: record_json}
    if diff is not None:
        artifacts[DIFF_ARTIFACT] = diff
    if weights is not None:
        artifacts[WEIGHTS_ARTIFACT] = weights
    return artifacts
