"""The end-to-end demo on the embedded default, and the registry seeding the tests share.

``seed(root)`` makes a git repository of the reference project, snapshots its
data, trains and registers versions that between them show every verdict, and
returns the environment that points the auditor at them. ``seed_tabular`` adds
credit-scoring models of ``examples/tabular`` (XGBoost and a scikit-learn
scorecard, one with a planted divergence). ``run_demo()`` then calibrates bands
and runs ``repro_nightly_audit`` through Airflow in-process.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor import git
from auditor import settings as S
from auditor.contract import ENV_TORCH_THREADS
from auditor.errors import EXTRAS, BadInput, InfrastructureError, MissingExtra
from auditor.tags import TAG_TIER
from auditor.uris import model_uri, run_artifact_uri

REPO_ROOT = Path(__file__).resolve().parents[1]
REFERENCE = REPO_ROOT / "examples" / "reference_model"
MODEL = "credit-scorer"
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "repro-audit demo",
    "GIT_AUTHOR_EMAIL": "demo@repro-audit.invalid",
    "GIT_COMMITTER_NAME": "repro-audit demo",
    "GIT_COMMITTER_EMAIL": "demo@repro-audit.invalid",
}


@dataclass(frozen=True)
class Variant:
    """One version to train and register, and what it is meant to show."""

    key: str
    shows: str
    overrides: tuple[str, ...] = ()
    dirty: bool = False  # train from an uncommitted edit (the diff is recorded and replayed)
    overwrite_data: bool = False  # after training, overwrite a file of its data snapshot in the store
    plain_mlflow: bool = False  # registered with plain MLflow: no run record at all
    alias: str | None = None
    tier: int | None = None
    calibrate: int = 0  # seed-varied reruns to calibrate bands from (0: not calibrated)


VARIANTS: tuple[Variant, ...] = (
    # 19 reruns: the fewest the seed lottery can test at 0.05 (auditor.judge.lottery.min_reruns), so the clean
    # version's report has no "too few reruns" warning
    Variant("clean", "a clean, deterministic run", alias="champion", tier=1, calibrate=19),
    Variant("dirty", "trained from uncommitted edits", dirty=True),
    Variant("overwritten", "its data partition was overwritten after training", overwrite_data=True),
    Variant("nondeterministic", "draws an unseeded random number", overrides=("plant_nondeterminism=true",), calibrate=5),
    Variant("plain", "registered by plain MLflow, no run record", plain_mlflow=True),
    Variant("flaky", "fails during the audit's rebuild", overrides=("rebuild_fail_at_epoch=1",)),
)


@dataclass
class Seeded:
    root: Path
    env: dict[str, str]
    versions: dict[str, str] = field(default_factory=dict)  # variant key -> models:/NAME/VERSION

    def to_json(self) -> str:
        return json.dumps({"root": str(self.root), "env": self.env, "versions": self.versions}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> Seeded:
        data = json.loads(text)
        return cls(root=Path(data["root"]), env=data["env"], versions=data["versions"])


def _run(argv: Sequence[str], *, cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise InfrastructureError(f"{' '.join(argv)} failed in {cwd}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result.stdout


def make_project(dest: Path, source: Path = REFERENCE) -> Path:
    """A git repository holding a copy of the reference project (or ``source``), one commit."""
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if source != REFERENCE:  # what the SDK and the auditor write stays out of the tree (README step 2)
        (dest / ".gitignore").write_text(".repro/\nmlruns/\nreports/\n__pycache__/\ncatboost_info/\n")
    env = {**os.environ, **GIT_IDENTITY}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "reference model"]):
        git.run(args, dest, env=env)
    return dest


def signing_key_path(root: Path) -> Path:
    """The demo's Ed25519 signing key (its public key is beside it, ``.pub``)."""
    return root / "keys" / "signing.pem"


def base_env(root: Path) -> dict[str, str]:
    """Everything that points the auditor at one self-contained world under ``root`` (its signing key is made
    there when missing: a world names a key, so every calibration and audit in it is signed and checked)."""
    _ensure_signing_key(signing_key_path(root), lambda _message: None)
    return {
        S.TRACKING_URI.name: S.tracking_uri_under(root),
        S.HOME.name: str(root / "home"),
        S.SNAPSHOT_STORE.name: str(root / "snapshots"),
        S.REPORTS.name: str(root / "reports"),
        S.SIGNING_KEY.name: str(signing_key_path(root)),
        S.SIGNER.name: "repro-audit demo",
        S.NIGHTLY_MAX_MODELS.name: "20",
        S.NIGHTLY_BUDGET_HOURS.name: "100",
        "PYTHONHASHSEED": "0",
        ENV_TORCH_THREADS: "2",
    }


def _latest_run(tracking_uri: str, experiment_name: str = "reference-model") -> str:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    experiment = client.get_experiment_by_name(experiment_name)
    runs = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time DESC"], max_results=1)
    return runs[0].info.run_id


def _overwrite_one_object(store: Path, snapshot_id: str) -> None:
    """Simulate a partition overwritten in place: rewrite the bytes of one stored file of the snapshot."""
    from auditor.snapshots import load_manifest
    from auditor.storage import open_store

    blob = open_store(store)
    manifest = load_manifest(snapshot_id, blob)
    entry = next(e for e in manifest.files if e.path.endswith("train_y.npy"))
    from auditor.snapshots.store import object_key

    path = blob.local_path(object_key(entry.hash))
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


def _register_plain(tracking_uri: str, name: str) -> str:
    """A version registered the plain MLflow way, with no run record (what many registries hold today)."""
    import mlflow
    from mlflow import MlflowClient

    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_experiment("plain-mlflow")
    with mlflow.start_run() as run:
        mlflow.log_param("note", "registered without repro-audit")
        mlflow.log_text("weights live elsewhere", "model/README.txt")
    version = MlflowClient(tracking_uri=tracking_uri).create_model_version(name, run_artifact_uri(run.info.run_id, "model"), run_id=run.info.run_id)
    return str(version.version)


def seed(
    root: Path,
    variants: Sequence[Variant] = VARIANTS,
    *,
    epochs: int = 3,
    env: dict[str, str] | None = None,
    progress: Callable[[str], None] = print,
) -> Seeded:
    """Train and register ``variants`` of the reference model into a fresh world under ``root``."""
    from auditor.snapshots import create_snapshot

    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    _ensure_signing_key(signing_key_path(root), progress)  # said aloud here; base_env makes it silently elsewhere
    env = {**base_env(root), **(env or {})}  # e.g. a PostgreSQL tracking URI and S3 stores
    full_env = {**os.environ, **env}
    _ensure_signing_key(Path(env[S.SIGNING_KEY.name]), progress)  # an env that names another key
    progress("making a git repository of the reference project")
    project = make_project(root / "project")
    progress("generating the dataset and storing it as a snapshot")
    _run([sys.executable, str(project / "make_data.py"), str(root / "data")], cwd=project, env=full_env)
    snapshot = create_snapshot(root / "data", env[S.SNAPSHOT_STORE.name]).id
    env["REPRO_TRAIN_DATA"] = f"{env[S.SNAPSHOT_STORE.name]}@{snapshot}"
    from mlflow import MlflowClient

    _make_experiments(env[S.TRACKING_URI.name], root)
    client = None
    seeded = Seeded(root=root, env=env)
    for variant in variants:
        progress(f"training version '{variant.key}': {variant.shows}")
        if variant.plain_mlflow:
            if client is None:
                client = MlflowClient(tracking_uri=env[S.TRACKING_URI.name])
                _ensure_model(client, MODEL)
            version = _register_plain(env[S.TRACKING_URI.name], MODEL)
        else:
            version = _train_and_register(variant, project, root, env={**full_env, **env}, epochs=epochs)
        client = client or MlflowClient(tracking_uri=env[S.TRACKING_URI.name])
        _label_version(client, variant, version)
        seeded.versions[variant.key] = model_uri(MODEL, version)
    return seeded


def _ensure_signing_key(key: Path, progress: Callable[[str], None]) -> None:
    """Make the demo's signing key at ``key`` unless one is there already."""
    if not key.exists():
        from auditor.report.attest import generate_key

        progress(f"making the demo's signing key {key} (its public key: {key}.pub)")
        generate_key(key)


def _make_experiments(tracking_uri: str, root: Path, names: Sequence[str] = ("reference-model", "plain-mlflow", S.AUDIT_EXPERIMENT.default)) -> None:
    """The demo's experiments, with their artifacts under ``root``."""
    from mlflow import MlflowClient

    # Experiments made up front so their artifacts live under root, not in ./mlruns of whoever runs this.
    setup = MlflowClient(tracking_uri=tracking_uri)
    for experiment in names:
        if setup.get_experiment_by_name(experiment) is None:
            setup.create_experiment(experiment, artifact_location=(root / "artifacts" / experiment).as_uri())


def _train_and_register(variant: Variant, project: Path, root: Path, *, env: dict[str, str], epochs: int) -> str | None:
    """Train ``variant`` with ``train.py`` (from an uncommitted edit when dirty) and register its run.

    ``env`` is the training environment (copied, not changed). An ``overwrite_data`` variant trains
    on a snapshot of its own, one of whose stored files is then overwritten.
    """
    import auditor
    from auditor.snapshots import create_snapshot

    store = env[S.SNAPSHOT_STORE.name]
    train_env = dict(env)
    if variant.overwrite_data:  # its own snapshot, so overwriting it spares the others
        data = root / f"data-{variant.key}"
        _run([sys.executable, str(project / "make_data.py"), str(data), "--seed", "1"], cwd=project, env=train_env)
        train_env["REPRO_TRAIN_DATA"] = f"{store}@{create_snapshot(data, store).id}"
    config = project / "config.yaml"
    original = config.read_text()
    if variant.dirty:
        config.write_text(original.replace("hidden: 64", "hidden: 48"))
    try:
        _run([sys.executable, "train.py", f"epochs={epochs}", *variant.overrides], cwd=project, env=train_env)
    finally:
        config.write_text(original)
    run_id = _latest_run(env[S.TRACKING_URI.name])
    version = auditor.register_model(run_id, MODEL, tracking_uri=env[S.TRACKING_URI.name])
    if variant.overwrite_data:
        _overwrite_one_object(Path(store), train_env["REPRO_TRAIN_DATA"].rsplit("@", 1)[1])
    return version


def _label_version(client: Any, variant: Variant, version: str | None) -> None:
    """Set the variant's alias and tier tag on its registered version."""
    if variant.alias:
        client.set_registered_model_alias(MODEL, variant.alias, version)
    if variant.tier is not None:
        client.set_model_version_tag(MODEL, version, TAG_TIER, str(variant.tier))


def _ensure_model(client, name: str) -> None:
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
    except MlflowException:
        client.create_registered_model(name)


TABULAR = REPO_ROOT / "examples" / "tabular"


#: what the demo imports beyond the core install; each one missing is named with its extra
DEMO_MODULES = ("mlflow", "torch", "airflow", "sklearn", "xgboost")


def check_can_run() -> None:
    """Raise, before anything is written, when this install cannot run the demo: it needs the repository's
    examples (a clone, not an installed wheel) and the extras its versions train and audit with."""
    import importlib.util

    for folder in (REFERENCE, TABULAR):
        if not folder.is_dir():
            raise BadInput(f"repro-audit demo needs a clone of the repository: {folder} is missing (the examples are "
                           "not part of the installed package)", hint="git clone the repository, then run `make demo` in it")
    for module in DEMO_MODULES:
        if importlib.util.find_spec(module) is None:
            raise MissingExtra(module, EXTRAS[module])


@dataclass(frozen=True)
class TabularVariant:
    """A credit-scoring model of ``examples/tabular`` to train and register beside the PyTorch versions."""

    model: str  # the registered model's name
    shows: str
    overrides: tuple[str, ...]


#: the tabular versions the demo registers: scikit-learn and XGBoost beside PyTorch, one planted divergence
TABULAR_VARIANTS: tuple[TabularVariant, ...] = (
    TabularVariant("credit-xgboost", "an XGBoost credit model, rebuilt at another thread count",
                   ("model=xgboost", "rebuild_override=threads=2")),
    TabularVariant("credit-scorecard", "a scikit-learn scorecard (quantile bins + logistic regression)", ("model=scorecard",)),
    # measured: AUC 0.9523 -> 0.9530 while 1.2 % of the 500 decisions flip; the tree ladder names the first divergent node
    TabularVariant("credit-xgboost", "an XGBoost credit model whose rebuild resolves a learning rate the record does not hold",
                   ("model=xgboost", "rebuild_override=learning_rate=0.12")),
)


def seed_tabular(root: Path, env: dict[str, str], variants: Sequence[TabularVariant] = TABULAR_VARIANTS, *,
                 progress: Callable[[str], None] = print) -> dict[str, str]:
    """Train and register ``variants`` of ``examples/tabular`` in the world ``env`` points at; returns key -> models:/ URI."""
    import auditor

    project = make_project(Path(root) / "tabular", TABULAR)
    tracking = env[S.TRACKING_URI.name]
    _make_experiments(tracking, Path(root), ("tabular",))
    train_env = {k: v for k, v in {**os.environ, **env}.items() if k != ENV_TORCH_THREADS}
    versions: dict[str, str] = {}
    for variant in variants:
        progress(f"training {variant.model}: {variant.shows}")
        _run([sys.executable, "train.py", *variant.overrides], cwd=project, env=train_env)
        version = auditor.register_model(_latest_run(tracking, "tabular"), variant.model, tracking_uri=tracking)
        versions[f"{variant.model}/{version}"] = model_uri(variant.model, version)
    return versions


def with_env(env: dict[str, str]):
    """Settings for ``env`` (the auditor's own calls in this process)."""
    from auditor.settings import Settings

    return Settings.from_env({**os.environ, **env})


AIRFLOW_SCRIPT = r"""
import json, os, sys
import pendulum
from airflow.dag_processing.dagbag import DagBag
from airflow.models.pool import Pool
dag_id, logical_date = sys.argv[1], sys.argv[2]
Pool.create_or_update_pool("repro_gpu", slots=2, description="accelerator workers for rebuilds", include_deferred=False)
bag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
if bag.import_errors:
    raise SystemExit(f"DAG import errors: {bag.import_errors}")
run = bag.get_dag(dag_id).test(logical_date=pendulum.parse(logical_date))
# a mapped task by what it works on (its rendered map index: the model ref), not by its position
states = {ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{getattr(ti, 'rendered_map_index', None) or ti.map_index}]": str(ti.state)
          for ti in run.get_task_instances()}
# what the night's tasks left in XCom: the error each failed with ("failure"), and publish's summary
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session
failures, summary = {}, None
with create_session() as session:
    for row in session.query(XComModel).filter(XComModel.dag_id == dag_id, XComModel.run_id == run.run_id):
        if row.key == "failure":
            failures[row.task_id if row.map_index < 0 else f"{row.task_id}[{row.map_index}]"] = str(XComModel.deserialize_value(row))
        elif row.key == "return_value" and row.task_id == "publish":
            summary = XComModel.deserialize_value(row)
print("REPRO_DAG_RESULT " + json.dumps({"state": str(run.state), "tasks": states, "failures": failures, "summary": summary}, default=str))
"""


def airflow_env(home: Path, env: dict[str, str]) -> dict[str, str]:
    return {
        **os.environ,
        **env,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{(home / 'airflow.db').as_posix()}",
        S.RETRY_DELAY_S.name: env.get(S.RETRY_DELAY_S.name, "2"),
        "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }


def run_dag(dag_id: str, logical_date: str, *, env: dict[str, str], home: Path) -> dict:
    """``dag.test()`` in a child process (Airflow reads its configuration once, at import)."""
    airflow = Path(sys.executable).with_name("airflow")
    full = airflow_env(home, env)
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "airflow.db").exists():
        _run([str(airflow), "db", "migrate"], cwd=REPO_ROOT, env=full)
    out = _run([sys.executable, "-c", AIRFLOW_SCRIPT, dag_id, logical_date], cwd=REPO_ROOT, env=full)
    line = next((ln for ln in out.splitlines() if ln.startswith("REPRO_DAG_RESULT ")), None)
    if line is None:
        raise InfrastructureError(f"dag.test of {dag_id} printed no result:\n{out[-3000:]}")
    return json.loads(line.split(" ", 1)[1])


def check_night(outcome: dict[str, Any]) -> None:
    """Raise when the night failed for any reason but the red verdicts it publishes by design, naming each failed
    task and its own error (``auditor.steps.nightly.night_failures``)."""
    from auditor.steps.nightly import night_failures

    summary = outcome.get("summary") if isinstance(outcome.get("summary"), dict) else None
    lines = night_failures(outcome.get("tasks", {}), outcome.get("failures") or {}, summary)
    if outcome.get("state") != "success" and not summary and not lines:
        lines = ["the DAG run failed and published no summary (see the tasks' logs)"]
    if lines:
        raise InfrastructureError("the night failed before auditing what it sampled:\n" + "\n".join(f"  - {line}" for line in lines),
                                  hint="fix the failing task's error above, then run the demo again")


def run_demo(root: Path = Path(".repro/demo"), reports: Path = Path("reports"), *, progress: Callable[[str], None] = print) -> Path:
    """Seed (once), calibrate, run the nightly DAG through Airflow, and return the index's path."""
    import logging

    from auditor.steps import Session

    logging.getLogger("mlflow").setLevel(logging.WARNING)  # keep the demo's own progress readable
    root = root.resolve()
    marker = root / "seeded.json"
    if marker.exists():
        seeded = Seeded.from_json(marker.read_text())
        progress(f"reusing the demo registry in {root} (delete it to start over)")
    else:
        shutil.rmtree(root, ignore_errors=True)
        seeded = seed(root, progress=progress)
        seeded.versions.update(seed_tabular(root, seeded.env, progress=progress))
        seeded.env[S.REPORTS.name] = str(reports.resolve())
        session = Session(with_env(seeded.env))
        for variant in VARIANTS:
            if variant.calibrate:
                progress(f"calibrating {seeded.versions[variant.key]} from {variant.calibrate} reruns")
                session.calibrate(seeded.versions[variant.key], reruns=variant.calibrate)
        marker.write_text(seeded.to_json())
    today = dt.datetime.now(dt.UTC).date().isoformat()
    progress(f"running repro_nightly_audit for {today} through Airflow (in-process)")
    outcome = run_dag("repro_nightly_audit", today, env=seeded.env, home=root / "airflow")
    progress(f"DAG run {outcome['state']}: " + ", ".join(f"{k}={v}" for k, v in sorted(outcome["tasks"].items())))
    check_night(outcome)
    from auditor.report.index import INDEX_FILE

    return Path(seeded.env[S.REPORTS.name]) / INDEX_FILE
