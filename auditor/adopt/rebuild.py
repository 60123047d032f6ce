"""Rebuilding a plain-MLflow version whose lineage MLflow pinned: the plan, and the judgement. Pure: no I/O.

``plan`` reads the assessment's rows (``auditor.adopt.rules``) and says whether a rebuild can run: the code at a
clean commit with a known entry point (``mlflow.source.name``), every dataset pinned, every param logged, the
environment pinned exactly, every seed an integer. Infrastructure may be missing (the rebuild runs on this
machine's CPU, said as an assumption). What the rebuild cannot know from MLflow and must assume is listed in
``Plan.assumptions``: each one goes into the result's ``assumptions`` (the report and the signed attestation).

``judge`` turns what the sandbox found (``sandbox_compare``: both models loaded by the flavour's own loader in
the runner's subprocess, predictions on the training data at its pinned version) into a verdict and tiers.
The tier basis always says "lineage recovered from MLflow metadata": never the same as a record captured at
training time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from auditor.adopt.rules import PINNED, Metadata, Row, seed_params
from auditor.judge.result import TierResult
from auditor.outcomes import Verdict
from auditor.tags import MLFLOW_GIT_COMMIT, MLFLOW_GIT_REPO_URL, MLFLOW_SOURCE_NAME

#: the audit-id prefix of a rebuilt adoption (an ``adopt-`` id: the index still counts it as adoption, not an audit)
AUDIT_ID_PREFIX = "adopt-rebuild-"
#: the inputs that must be pinned before anything is rebuilt (infrastructure may be missing: said as an assumption)
REQUIRED = ("code", "data", "config", "environment", "seeds")
#: the flavours whose loader the sandbox knows (``mlflow.<flavour>.load_model``)
FLAVOURS = ("sklearn", "xgboost", "lightgbm", "catboost", "pytorch")
_REQ = re.compile(r"^\s*([A-Za-z0-9_.\-\[\]]+)\s*==\s*([^\s;#]+)")


@dataclass(frozen=True)
class DeltaInput:
    """A dataset logged from a Delta table at a version: the rebuild checks it is still readable there."""

    name: str
    table: str
    version: int


@dataclass(frozen=True)
class Plan:
    """What a rebuild runs, or why none can (``blockers``), and what it assumes."""

    ref: str
    commit: str = ""
    repo_url: str = ""
    entry: str = ""
    flavour: str = ""
    model_file: str = ""  # the flavour's model file inside the artifact folder, when MLmodel names one
    params: Mapping[str, str] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)  # the registered run's metrics
    delta: tuple[DeltaInput, ...] = ()
    requirements: Mapping[str, str] = field(default_factory=dict)  # name -> exact version, from requirements.txt
    blockers: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()

    @property
    def runnable(self) -> bool:
        return not self.blockers


def requirements(text: str) -> dict[str, str]:
    """``requirements.txt``'s exact pins (``name==version``), names lower-cased with ``_`` as ``-``."""
    out = {}
    for line in text.splitlines():
        m = _REQ.match(line.split("#", 1)[0])
        if m:
            out[re.sub(r"\[.*\]", "", m.group(1)).lower().replace("_", "-")] = m.group(2)
    return out


def flavour_of(mlmodel: Mapping[str, Any]) -> tuple[str, str]:
    """The first flavour with a known loader in ``MLmodel`` and its model file (``""`` when it names none)."""
    flavors = mlmodel.get("flavors") if isinstance(mlmodel.get("flavors"), dict) else {}
    for name in FLAVOURS:
        if name in flavors:
            spec = flavors[name] if isinstance(flavors[name], dict) else {}
            return name, str(spec.get("pickled_model") or spec.get("model_data") or spec.get("data") or "")
    return "", ""


def plan(meta: Metadata, rows: list[Row], *, ref: str) -> Plan:
    """The rebuild of ``meta`` if its lineage allows one; else a ``Plan`` whose ``blockers`` say which input and why."""
    blockers = [f"{r.path} is {r.klass}: {r.identifier} (fix: {r.fix})" for r in rows
                if r.section in REQUIRED and r.klass != PINNED]
    if meta.supplied is not None:
        blockers.append("a record supplied after training is attached: the rebuild reads only what MLflow recorded")
    commit, repo_url, entry = (meta.tags.get(k, "") for k in (MLFLOW_GIT_COMMIT, MLFLOW_GIT_REPO_URL, MLFLOW_SOURCE_NAME))
    if commit and not repo_url:
        blockers.append(f"code: MLflow recorded commit {commit} but no repository URL ({MLFLOW_GIT_REPO_URL}): "
                        "there is nowhere to fetch it from (fix: train from a clone with a remote)")
    flavour, model_file = flavour_of(meta.mlmodel)
    if not flavour:
        shown = ", ".join(sorted(meta.mlmodel.get("flavors") or {})) or "none"
        blockers.append(f"model: MLmodel names no flavour the sandbox can load (found: {shown}; known: {', '.join(FLAVOURS)})")
    delta = []
    for d in meta.datasets:
        kind = (d.source_type or "").lower()
        version = d.source.get("delta_table_version")
        if kind in ("delta", "delta_table") and version is not None and str(version).lstrip("+-").isdigit():
            table = str(d.source.get("path") or d.source.get("delta_table_name") or "")
            delta.append(DeltaInput(name=d.name or d.context or "input", table=table, version=int(version)))
    pins = requirements(meta.env_files.get("requirements.txt", ""))
    seeds = seed_params(meta.params)
    assumptions = [
        f"lineage recovered from MLflow metadata, not a record captured at training time: commit {commit} of "
        f"{repo_url or '(no remote)'} is taken as the code because the run's own tag says its tree was clean",
        f"the entry point is {entry}, run with no command-line arguments (MLflow records none) from the repository's root",
        f"the entry point sets its {len(meta.params)} logged parameter(s) itself: the rebuilt run's logged parameters "
        "are compared with the registered run's, and any difference is a finding",
        "the entry point sets its seeds from the logged values (" + ", ".join(f"{k}={v}" for k, v in sorted(seeds.items()))
        + "); no generator is seeded by the rebuild",
        "the rebuild ran in the auditor's Python environment on this machine's CPU; where and in what image the "
        "model was trained is not recorded (infrastructure), and the environment's drift from requirements.txt is listed",
    ]
    for d in delta:
        assumptions.append(f"dataset {d.name}: the entry point reads Delta table {d.table} at version {d.version} itself, "
                           "as the logged dataset says; the rebuild checks that version is still readable")
    others = [d for d in meta.datasets if not any(x.name == (d.name or d.context or "input") for x in delta)]
    for d in others:
        assumptions.append(f"dataset {d.name or d.context}: pinned by MLflow's metadata but not checked before the rebuild "
                           "(only a Delta version is)")
    return Plan(ref=ref, commit=commit, repo_url=repo_url, entry=entry, flavour=flavour, model_file=model_file,
                params=dict(meta.params), metrics=dict(meta.metrics), delta=tuple(delta), requirements=pins, blockers=tuple(blockers),
                assumptions=tuple(assumptions))


def drift(pins: Mapping[str, str], installed: Mapping[str, str | None]) -> list[str]:
    """One line per pinned requirement the auditor's environment does not match (``installed``: name -> version or None)."""
    out = []
    for name, want in sorted(pins.items()):
        have = installed.get(name)
        if have != want:
            out.append(f"{name}=={want} recorded, {have or 'not installed'} in the rebuild")
    return out


def _metrics_recomputed(recovery: TierResult, plan: Plan, found: Mapping[str, Any], *, same: bool) -> TierResult:
    """The registered run's metrics against the rebuilt run's, when both models predict the same (issue 26, point 2):
    a model that gives the same predictions but other registered metrics (taken on rows the clock picked, say) fails
    artifact recovery; a rebuilt run that logged none of them is said, not judged."""
    from auditor.judge.verdict import NOT_REPRODUCIBLE_METRICS, metric_problems

    rebuilt = found.get("rebuilt_metrics") or {}
    if not same or recovery.status != "pass" or not plan.metrics:
        return recovery
    if not set(rebuilt) & set(plan.metrics):
        return recovery.model_copy(update={"details": [*recovery.details, "the registered run's metrics were not recomputed: "
                                                       "the rebuilt run logged none of them"]})
    notes: list[str] = []
    lines = metric_problems("the rebuilt run, whose model predicts the same, logged", dict(rebuilt), dict(plan.metrics), notes)
    if not lines:
        return recovery.model_copy(update={"summary": f"{recovery.summary}; the rebuilt run gives the registered metrics",
                                           "details": [*recovery.details, *notes]})
    summary = f"{NOT_REPRODUCIBLE_METRICS}: {lines[0]}"
    return recovery.model_copy(update={"status": "fail", "summary": summary, "details": [summary, *lines[1:], *notes]})


def judge(plan: Plan, found: Mapping[str, Any], *, registered_sha256: str | None,
          rebuilt_sha256: str | None) -> tuple[Verdict, dict[str, TierResult], list[str]]:
    """The verdict, tiers and findings' lines from the sandbox's answer (``sandbox_compare``'s JSON) and the file digests.

    Identical predictions and identical model-file bytes: REPRODUCED_BITWISE. Identical predictions, other bytes:
    REPRODUCED_WITHIN_TOLERANCE (the tolerance is zero on predictions). Other predictions: OUT_OF_TOLERANCE.
    """
    problems: list[str] = []
    rebuilt_params = found.get("rebuilt_params") or {}
    differing = sorted(k for k in plan.params if k in rebuilt_params and str(rebuilt_params[k]) != str(plan.params[k]))
    missing = sorted(k for k in plan.params if k not in rebuilt_params)
    if differing:
        problems.append("the rebuilt run logged other parameters: " + ", ".join(
            f"{k}={rebuilt_params[k]} (registered {plan.params[k]})" for k in differing[:10]))
    if missing and rebuilt_params:
        problems.append(f"the rebuilt run did not log {len(missing)} registered parameter(s): {', '.join(missing[:10])}")
    pred = found.get("predictions") or {}
    rows, same = pred.get("rows"), pred.get("identical")
    where = pred.get("data") or "(no data)"
    bitwise = bool(registered_sha256) and registered_sha256 == rebuilt_sha256
    statistical = TierResult(
        name="statistical", status="pass" if same else ("fail" if same is False else "skipped"),
        summary=(f"predictions of both models on {rows} row(s) of {where}, each loaded by mlflow.{plan.flavour}.load_model "
                 f"in the sandbox: {'identical' if same else 'different' if same is False else 'not compared'}"),
        details=[] if same in (True, None) else [f"max |difference| {pred.get('max_abs')}, {pred.get('differing')} row(s) differ"])
    bits = TierResult(
        name="bitwise", status="pass" if bitwise else ("fail" if registered_sha256 and rebuilt_sha256 else "skipped"),
        summary=(f"model file {plan.model_file or '(none named)'}: registered {registered_sha256 or '(not hashed)'}, "
                 f"rebuilt {rebuilt_sha256 or '(not hashed)'}"))
    recovery = TierResult(name="artifact_recovery", status="pass" if found.get("registered_loaded") else "fail",
                          summary=f"the registered model loaded with mlflow.{plan.flavour}.load_model in the sandbox"
                          if found.get("registered_loaded") else "the registered model did not load in the sandbox")
    recovery = _metrics_recomputed(recovery, plan, found, same=bool(same))
    if recovery.status == "fail" and found.get("registered_loaded"):  # a model that predicts the same, other metrics
        verdict = Verdict.NOT_REPRODUCIBLE
    elif problems or same is False or not found.get("registered_loaded"):
        verdict = Verdict.OUT_OF_TOLERANCE if found.get("registered_loaded") else Verdict.NOT_REPRODUCIBLE
    elif same and bitwise:
        verdict = Verdict.REPRODUCED_BITWISE
    elif same:
        verdict = Verdict.REPRODUCED_WITHIN_TOLERANCE
    else:
        verdict = Verdict.NOT_REPRODUCIBLE  # nothing to judge the rebuild by
    return verdict, {"artifact_recovery": recovery, "statistical": statistical, "bitwise": bits}, problems
