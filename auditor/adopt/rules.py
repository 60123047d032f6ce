"""How a plain-MLflow version's inputs are classified: pinned, named but mutable, or missing. Pure: no I/O.

Each of the five inputs (code, data, config, environment, seeds) and the infrastructure gets one class from what
MLflow holds (``Metadata``, read by ``auditor.adopt.mlflow_reader``), the identifier it found, why, and the one
line the team must change in its training code to pin it (``FIXES``: the one table of fixes). A class is a claim
about the metadata, never about the model: an assessment is never a pass (``auditor.adopt.assess``).

What MLflow's metadata cannot show is not assumed: a commit without a recorded tree state is not pinned (the
model may have been trained from uncommitted changes), and MLflow's dataset digest (an MD5 of at most the first
10,000 rows, cut to 8 hex digits) names a dataset without proving one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from auditor.digests import SNAPSHOT_ID, is_digest_ref
from auditor.tags import (
    MLFLOW_GIT_COMMIT,
    MLFLOW_GIT_REPO_URL,
    MLFLOW_SOURCE_NAME,
    MLFLOW_SOURCE_TYPE,
    PARAM_SEED,
    TAG_DIRTY,
    TAG_IMAGE_DIGEST,
)

PINNED = "pinned"
MUTABLE = "named but mutable"
MISSING = "missing"
#: the classes, best first; an input's overall class is its worst row's
CLASSES = (PINNED, MUTABLE, MISSING)
#: the short spelling used in finding codes (``adopt.data.mutable``)
CODE_OF = {PINNED: "pinned", MUTABLE: "mutable", MISSING: "missing"}
SECTIONS = ("code", "data", "config", "environment", "seeds", "infrastructure")

#: the one table of fixes: what the team changes in its training code to move an input to pinned
FIXES: dict[tuple[str, str], str] = {
    ("code", MISSING): "train from a git checkout (MLflow then logs mlflow.source.git.commit) and refuse a dirty tree",
    ("code", MUTABLE): f"commit before training, fail the job unless `git diff --quiet HEAD`, and log tag {TAG_DIRTY}=false",
    ("data", MISSING): "log each input with mlflow.log_input(mlflow.data.from_pandas(df, source=...), context='train')",
    ("data", MUTABLE): "read the data at a version and log that version: a Delta table version, an S3 versionId, "
                       "or a snapshot id (repro-audit snapshot create)",
    ("config", MISSING): "log every hyper-parameter with mlflow.log_params (autolog does it for scikit-learn and XGBoost)",
    ("config", MUTABLE): "log the config file's contents as params (mlflow.log_params), not its path",
    ("environment", MISSING): "log the model with log_model (it writes requirements.txt and python_env.yaml) "
                              "or train in an image pinned by digest",
    ("environment", MUTABLE): "pin every requirement exactly (log_model(pip_requirements=<pip freeze output>)) "
                              "or train in an image pinned by digest",
    ("seeds", MISSING): "pass an explicit integer seed (random_state=42, torch.manual_seed(42)) and log it as a param",
    ("seeds", MUTABLE): "pass an integer seed, not a generator object, and log it as a param",
    ("infrastructure", MISSING): f"tag the run with the image it trained in, by digest ({TAG_IMAGE_DIGEST}=REF@<digest>)",
    ("infrastructure", MUTABLE): "name the training image by digest (REF@sha256:...), not by tag",
}

_SEED_NAMES = frozenset({"random_state", "seed", "random_seed", "rng_seed", "manual_seed", PARAM_SEED})
_CONFIG_FILE = re.compile(r"\.(ya?ml|json|toml|cfg|ini|conf)$", re.IGNORECASE)
_INT = re.compile(r"[+-]?\d+")
_IMAGE_KEYS = (TAG_IMAGE_DIGEST, "image", "docker_image", "image_digest", "container_image")
_INSTANCE_KEYS = ("instance_type", "repro.instance_type", "node_type", "machine_type")
_TREE_STATE_KEYS = (TAG_DIRTY, "git.dirty", "mlflow.source.git.dirty")
_S3_VERSION = re.compile(r"[?&]versionId=[^&]+")
_WEAK_DIGEST = "MLflow's digest {d} is an MD5 of at most the first 10,000 rows: it names the data, it does not pin it"


@dataclass(frozen=True)
class Dataset:
    """One ``mlflow.log_input`` of the run: what ``DatasetInput`` holds."""

    name: str
    digest: str = ""
    source_type: str = ""
    source: Mapping[str, Any] = field(default_factory=dict)
    context: str = ""
    schema: str = ""  # MLflow's logged schema (JSON): a frame's column names, an array's shapes
    #: a frame built in code whose rows were verified against a pinned input of the same run (``auditor.adopt.frames``):
    #: what it was verified against; ``unverified``: why it could not be
    verified: str = ""
    unverified: str = ""


@dataclass(frozen=True)
class Supplied:
    """What an owner attached after training (``repro-audit adopt REF --data ...``), as stored and signed."""

    by: str
    at: str
    data: Mapping[str, str] = field(default_factory=dict)  # name -> STORE@ID
    image: str | None = None  # REF@sha256:...
    seed: int | None = None
    key: str = ""  # where the signed record lies in the reports store
    sha256: str = ""


@dataclass(frozen=True)
class Metadata:
    """Everything MLflow holds about one version that the assessment reads (read by ``mlflow_reader``)."""

    name: str
    version: str
    run_id: str | None = None
    run_found: bool = False
    source: str | None = None
    version_tags: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)  # the run's tags
    params: Mapping[str, str] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)  # the run's metrics, MLflow's latest values
    datasets: tuple[Dataset, ...] = ()
    env_files: Mapping[str, str] = field(default_factory=dict)  # requirements.txt, python_env.yaml, conda.yaml
    mlmodel: Mapping[str, Any] = field(default_factory=dict)  # flavours, utc_time_created, ...
    supplied: Supplied | None = None


@dataclass(frozen=True)
class Row:
    """One input's class: where, the identifier found (or what is absent), why, the fix; supplied after training?"""

    section: str
    path: str
    klass: str
    identifier: str
    why: str
    supplied_by: str | None = None
    hint: str = ""  # a fix more precise than the table's (an autolog frame's)

    @property
    def fix(self) -> str:
        return "" if self.klass == PINNED else (self.hint or FIXES[(self.section, self.klass)])


def worst(rows: list[Row]) -> str:
    return max((r.klass for r in rows), key=CLASSES.index, default=MISSING)


# -- one function per input ---------------------------------------------------------------------
def _code(m: Metadata) -> list[Row]:
    commit, entry = m.tags.get(MLFLOW_GIT_COMMIT), m.tags.get(MLFLOW_SOURCE_NAME)
    where = f"{m.tags.get(MLFLOW_GIT_REPO_URL) or '(no remote)'} @ {commit}" if commit else ""
    entry_text = f"entry point {entry} ({m.tags.get(MLFLOW_SOURCE_TYPE) or 'type not recorded'})" if entry else ""
    ident = "; ".join(x for x in (where, entry_text) if x)
    if not commit:
        if entry:
            return [Row("code", "code", MUTABLE, ident, "an entry point without a commit: the file can change")]
        return [Row("code", "code", MISSING, "no commit, no entry point", "MLflow recorded no source for this version")]
    state = next((str(m.tags[k]).strip().lower() for k in _TREE_STATE_KEYS if k in m.tags), None)
    if state in ("false", "0", "no"):
        if not entry:
            return [Row("code", "code", MUTABLE, ident, "a clean commit, but no entry point: what ran is not recorded")]
        return [Row("code", "code", PINNED, ident, "a commit on a tree recorded as clean (by the run's own tag, as the "
                                                  "team's job reported it)")]
    if state in ("true", "1", "yes"):
        return [Row("code", "code", MUTABLE, ident, "trained from a tree with uncommitted changes (recorded as dirty)")]
    return [Row("code", "code", MUTABLE, ident,
                "MLflow does not record whether the tree was clean: uncommitted changes may have trained it")]


def _dataset(d: Dataset, beside: tuple[Dataset, ...] = ()) -> Row:
    label = d.name or d.context or "dataset"
    path = f"data.{d.name or d.context or 'input'}"
    weak = _WEAK_DIGEST.format(d=d.digest or "(none)")
    src = dict(d.source)
    kind = (d.source_type or "").lower()
    if kind in ("delta", "delta_table"):  # MLflow's DeltaDatasetSource says "delta_table"
        table = src.get("path") or src.get("delta_table_name") or "(unnamed table)"
        version = src.get("delta_table_version")
        if isinstance(version, int) or (isinstance(version, str) and _INT.fullmatch(version)):
            return Row("data", path, PINNED, f"{label}: delta table {table} @ version {version}", "a Delta table at a version")
        return Row("data", path, MUTABLE, f"{label}: delta table {table} (no version: its latest)",
                   f"a table name reads whatever is latest; {weak}")
    uri = str(src.get("uri") or src.get("url") or src.get("path") or "")
    snapshot = SNAPSHOT_ID.search(uri)  # only where the data is read from: a name or a tag saying "blake3:…" pins nothing
    if snapshot:
        return Row("data", path, PINNED, f"{label}: snapshot {snapshot.group(0)}", "a content-addressed snapshot id")
    if kind == "s3" or uri.startswith("s3://"):
        if _S3_VERSION.search(uri):
            return Row("data", path, PINNED, f"{label}: {uri}", "an S3 object at a version id")
        return Row("data", path, MUTABLE, f"{label}: {uri or '(no uri)'}", f"an S3 key without a versionId; {weak}")
    if kind == "code":
        return _code_frame(d, label, path, weak, list(beside))
    shown = uri or (f"{kind} source" if kind else "(no source)")
    return Row("data", path, MUTABLE, f"{label}: {shown}", f"a path or name, read as it is today; {weak}")


#: the fix of a frame built in code that no pinned input verifies: autolog logs the frame ``fit`` was given (source
#: ``code``); stop it, and log the input at its version yourself
AUTOLOG_FIX = ("pass log_datasets=False to autolog (mlflow.sklearn.autolog(log_datasets=False), or the flavour's own: it "
               "logs the frame fit() was given, built in code) and log the input at its version yourself (a Delta table "
               "version, an S3 versionId or a snapshot id), e.g. "
               "mlflow.log_input(mlflow.data.from_pandas(df, source=DeltaDatasetSource(path={table}, "
               "delta_table_version={version}), name={name}), context='train')")


def delta_version(d: Dataset) -> tuple[str, int] | None:
    """A Delta table at an integer version, as MLflow's ``DeltaDatasetSource`` logs it; None for any other source."""
    src = dict(d.source)
    version = src.get("delta_table_version")
    if (d.source_type or "").lower() not in ("delta", "delta_table"):
        return None
    if isinstance(version, bool) or not (isinstance(version, int) or (isinstance(version, str) and _INT.fullmatch(version))):
        return None
    return str(src.get("path") or src.get("delta_table_name") or ""), int(version)


def _code_frame(d: Dataset, label: str, path: str, weak: str, beside: list[Dataset]) -> Row:
    """A frame built in code (autolog's own): pinned when its rows were verified against a pinned input of the run,
    else named but mutable, and the fix shows the ``log_input`` call that logs the input instead (``AUTOLOG_FIX``)."""
    src = dict(d.source)
    where = src.get("tags", {}).get(MLFLOW_SOURCE_NAME) if isinstance(src.get("tags"), dict) else None
    ident = f"{label}: a frame built in code{f' ({where})' if where else ''}, digest {d.digest}"
    if d.verified:
        return Row("data", path, PINNED, f"{ident}, verified: the rows of {d.verified}",
                   "its rows, read from a pinned input of the same run, give the digest MLflow recorded (an MD5 of the "
                   "first 10,000 rows, the row count and the column names): the same frame")
    why = f"no source is recorded; {weak}" + (f"; not verified against a pinned input: {d.unverified}" if d.unverified else "")
    pinned = next(((x, delta_version(x)) for x in beside if delta_version(x) is not None), None)
    table, version = pinned[1] if pinned else ("TABLE", "N")
    name = repr(pinned[0].name or pinned[0].context or "train") if pinned else "'train'"
    return Row("data", path, MUTABLE, ident, why, hint=AUTOLOG_FIX.format(table=repr(table) if pinned else table,
                                                                         version=version, name=name))


def _data(m: Metadata) -> list[Row]:
    if not m.datasets:
        why = "the run logged no dataset with mlflow.log_input" if m.run_found else "there is no run to hold datasets"
        return [Row("data", "data", MISSING, "no dataset", why)]
    return [_dataset(d, m.datasets) for d in m.datasets]


def seed_params(params: Mapping[str, str]) -> dict[str, str]:
    """The params that set a seed: ``random_state``, ``seed``, and nested ones (``clf__random_state``)."""
    found = {}
    for key, value in params.items():
        last = re.split(r"__|\.|/", key)[-1].lower()
        if key.lower() in _SEED_NAMES or last in _SEED_NAMES or last.endswith("_seed"):
            found[key] = str(value)
    return found


def _seeds(m: Metadata) -> list[Row]:
    seeds = seed_params(m.params)
    if not seeds:
        return [Row("seeds", "seeds", MISSING, "no seed param", "no random_state or seed was logged")]
    shown = ", ".join(f"{k}={v}" for k, v in sorted(seeds.items()))
    unseeded = sorted(k for k, v in seeds.items() if v.strip() in ("", "None", "null"))
    if unseeded:
        return [Row("seeds", "seeds", MISSING, shown,
                    f"{', '.join(unseeded)} is None: the estimator draws from the global generator, unseeded")]
    odd = sorted(k for k, v in seeds.items() if not _INT.fullmatch(v.strip()))
    if odd:
        return [Row("seeds", "seeds", MUTABLE, shown, f"{', '.join(odd)} is not an integer: a generator's state is not logged")]
    return [Row("seeds", "seeds", PINNED, shown, "every logged seed is an explicit integer")]


def _config(m: Metadata) -> list[Row]:
    own = {k: v for k, v in m.params.items() if not k.startswith("repro.")}
    if not own:
        return [Row("config", "config", MISSING, "no params", "the run logged no parameters" if m.run_found else "there is no run")]
    files = sorted(k for k, v in own.items() if _CONFIG_FILE.search(str(v).strip()))
    if files:
        return [Row("config", "config", MUTABLE, f"{len(own)} params; {', '.join(f'{k}={own[k]}' for k in files)}",
                    "a param names a config file by path: its content can change")]
    return [Row("config", "config", PINNED, f"{len(own)} params", "parameters cannot be changed once logged in MLflow")]


def image_ref(m: Metadata) -> str | None:
    """The training image the run or version names (a digest reference when it has one), or None."""
    for tags in (m.tags, m.version_tags):
        for key in _IMAGE_KEYS:
            if tags.get(key):
                return str(tags[key]).strip()
    return None


def _requirements(text: str) -> tuple[list[str], list[str]]:
    pinned, loose = [], []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        (pinned if "==" in line and not any(c in line for c in "<>~*") else loose).append(line)
    return pinned, loose


def _environment(m: Metadata) -> list[Row]:
    image = image_ref(m)
    if image and is_digest_ref(image):
        return [Row("environment", "environment", PINNED, f"image {image}", "an image pinned by digest")]
    files = {k: v for k, v in m.env_files.items() if v}
    if not files:
        return [Row("environment", "environment", MISSING, "no requirements.txt, python_env.yaml or conda.yaml",
                    "the model was logged without its environment files" if m.source else "nothing was logged")]
    python = re.search(r"^python:\s*['\"]?([0-9.]+)", files.get("python_env.yaml", ""), re.MULTILINE)
    pinned, loose = _requirements(files.get("requirements.txt", ""))
    where = ", ".join(sorted(files))
    ident = f"{where}: Python {python.group(1) if python else '(not recorded)'}, {len(pinned)} exact pins"
    if loose or not pinned:
        shown = ", ".join(loose[:3]) + ("…" if len(loose) > 3 else "")
        return [Row("environment", "environment", MUTABLE, ident, f"requirements not pinned exactly: {shown or 'none listed'}")]
    if not python:
        return [Row("environment", "environment", MUTABLE, ident, "the Python version is not recorded")]
    return [Row("environment", "environment", PINNED, ident,
                "every listed requirement is pinned exactly (their own dependencies are not listed and float)")]


def _infrastructure(m: Metadata) -> list[Row]:
    image = image_ref(m)
    if image and is_digest_ref(image):
        return [Row("infrastructure", "infrastructure", PINNED, f"image {image}", "an image pinned by digest")]
    if image:
        return [Row("infrastructure", "infrastructure", MUTABLE, f"image {image}", "an image tag moves: it is a name")]
    instance = next((m.tags[k] for k in _INSTANCE_KEYS if m.tags.get(k)), None)
    if instance:
        return [Row("infrastructure", "infrastructure", MUTABLE, f"instance {instance}", "an instance type, no image")]
    return [Row("infrastructure", "infrastructure", MISSING, "no image, no instance type",
                "MLflow records nothing about where the model was trained")]


#: the one table of rules: each input and the function that classifies it from MLflow's metadata
RULES: dict[str, Callable[[Metadata], list[Row]]] = {
    "code": _code, "data": _data, "config": _config, "environment": _environment, "seeds": _seeds,
    "infrastructure": _infrastructure,
}


def _supplied_rows(m: Metadata, section: str, rows: list[Row]) -> list[Row]:
    """What the owner attached after training replaces what MLflow held for that input, marked as supplied."""
    s = m.supplied
    if s is None:
        return rows
    mark = f"supplied after training by {s.by} on {s.at}, not recorded when the model was trained"
    if section == "data" and s.data:
        return [Row("data", f"data.{name}", PINNED, f"{name}: {ref}", mark, s.by) for name, ref in sorted(s.data.items())]
    if section in ("environment", "infrastructure") and s.image:
        return [Row(section, section, PINNED, f"image {s.image}", mark, s.by)]
    if section == "seeds" and s.seed is not None:
        return [Row("seeds", "seeds", PINNED, f"seed {s.seed}", mark, s.by)]
    return rows


def classify(m: Metadata) -> list[Row]:
    """Every input's rows, in the fixed order (code, data, config, environment, seeds, infrastructure)."""
    rows: list[Row] = []
    for section in SECTIONS:
        rows += _supplied_rows(m, section, RULES[section](m))
    return rows


def counts(rows: list[Row]) -> dict[str, int]:
    """How many inputs are in each class (an input's class is its worst row's)."""
    by_section: dict[str, list[Row]] = {}
    for r in rows:
        by_section.setdefault(r.section, []).append(r)
    out = dict.fromkeys(CLASSES, 0)
    for section_rows in by_section.values():
        out[worst(section_rows)] += 1
    return out
