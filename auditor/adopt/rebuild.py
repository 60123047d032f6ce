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

from auditor.adopt.rules import PINNED, Metadata, Row, delta_version, seed_params
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
    blockers = [f"{r.path} is {r.klass}: {r.identifier} ({r.why}; fix: {r.fix})" for r in rows
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
    delta = [DeltaInput(name=d.name or d.context or "input", table=at[0], version=at[1])
             for d in meta.datasets if (at := delta_version(d)) is not None]
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
    for d in (d for d in others if d.verified):
        assumptions.append(f"dataset {d.name or d.context}: the frame autolog logged is taken as the rows of {d.verified}, "
                           "which give its digest (MLflow's digest covers the first 10,000 rows, the row count and the "
                           "column names)")
    for d in (d for d in others if not d.verified):
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


# -- the scores (issue 42, build 3): what the model outputs, not only its labels -----------------------------------
#: the order a decision is read from: the first score both models were compared on (``sandbox_compare.SCORE_ORDER``)
SCORE_ORDER = ("predict_proba", "decision_function", "raw margin", "forward", "predict")
#: the margin named in a summary: how many rows' scores differ by more than this
NAMED_MARGIN = "0.05"


def _score_name(c: Mapping[str, Any]) -> str:
    column = c.get("column")
    return f"{c.get('score')} {column}" if column else str(c.get("score"))


def _cutoff_line(c: Mapping[str, Any]) -> str:
    cut = c.get("cutoffs") or []
    shown = "; ".join(f"{x['cutoff']:g}: {x['flips']}" for x in cut)
    return f"decisions flipped at each cut-off of {_score_name(c)} (score >= cut-off): {shown}" if cut else ""


def _score_line(c: Mapping[str, Any], rows: Any) -> str:
    """One score's difference in words: by how much, on how many rows, and the decisions it flips at its worst cut-off."""
    if c.get("problem"):
        return f"{_score_name(c)}: {c['problem']}"
    if c.get("max_abs") is None:
        return f"{_score_name(c)}: {c.get('differing')} of {rows} row(s) differ"
    over = (c.get("over") or {}).get(NAMED_MARGIN)
    line = (f"{_score_name(c)}: max |difference| {c['max_abs']:.4g}, {c.get('differing')} of {rows} row(s) beyond float "
            f"resolution" + (f", {over} by more than {NAMED_MARGIN}" if over is not None else ""))
    worst = max(c.get("cutoffs") or [], key=lambda x: x["flips"], default=None)
    return line + (f"; {worst['flips']} decision(s) flip at cut-off {worst['cutoff']:g}" if worst and worst["flips"] else "")


def _statistical(plan: Plan, pred: Mapping[str, Any]) -> TierResult:
    """The statistical tier: every score the flavour exposes, compared row by row in the sandbox. Any score beyond float
    resolution fails it, named with the rows it moves and the decisions it flips at the model's own threshold (its
    ``predict()``) and at each cut-off."""
    rows, same, where = pred.get("rows"), pred.get("identical"), pred.get("data") or "(no data)"
    compared = [c for c in pred.get("scores") or [] if isinstance(c, Mapping)]
    names = ", ".join(_score_name(c) for c in compared) or "predict"
    head = (f"scores ({names}) of both models on {rows} row(s) of {where}, each loaded by mlflow.{plan.flavour}.load_model "
            "in the sandbox")
    if same is None:
        return TierResult(name="statistical", status="skipped", summary=f"{head}: not compared")
    if same:
        return TierResult(name="statistical", status="pass", summary=f"{head}: identical within float resolution")
    differ = [c for c in compared if not c.get("within_resolution")] or [dict(pred, score="predict")]
    labels = pred.get("differing")
    first = next((c for name in SCORE_ORDER for c in differ if c.get("score") == name), differ[0])
    own = (f"{labels if labels is not None else 'no'} decision(s) flip at the model's own threshold (its predict())"
           if pred.get("classifier", True) else "no threshold of its own (not a classifier): see the cut-offs")
    summary = f"{head}: scores differ beyond float resolution; {_score_line(first, rows)}; {own}"
    details = [_score_line(c, rows) for c in differ] + [line for c in differ if (line := _cutoff_line(c))]
    return TierResult(name="statistical", status="fail", summary=summary, details=details)


def evidence_lines(found: Mapping[str, Any]) -> dict[str, str]:
    """The comparison as the report's prediction lines (``predictions.*``, as an audit's): the rows scored, the decisions
    the model's own threshold flips, the largest score differences, and the flips at each cut-off."""
    pred = found.get("predictions") or {}
    compared = [c for c in pred.get("scores") or [] if isinstance(c, Mapping)]
    if not pred or not pred.get("rows"):
        return {}
    rows = int(pred["rows"])
    lines = {"predictions": f"{rows} rows of {pred.get('data')} scored by both models in the sandbox "
                            f"({', '.join(_score_name(c) for c in compared) or 'predict'})"}
    flips = pred.get("differing")
    if flips is not None and pred.get("classifier", True):
        lines.update({"predictions.threshold": "the model's own (its predict())", "predictions.flips": str(flips),
                      "predictions.decision_flip_rate": repr(int(flips) / rows)})
    primary = next((c for name in SCORE_ORDER for c in compared if c.get("score") == name and c.get("max_abs") is not None), None)
    raw = next((c for c in compared if c.get("score") in ("decision_function", "raw margin") and c.get("max_abs") is not None), None)
    lines["predictions.max_abs_score"] = repr(primary["max_abs"]) if primary else "not compared"
    lines["predictions.max_abs_raw_score"] = repr(raw["max_abs"]) if raw else "not exposed"
    cut = next((line for c in compared if (line := _cutoff_line(c))), "")
    if cut:
        lines["predictions.cutoffs"] = cut
    return lines


def judge(plan: Plan, found: Mapping[str, Any], *, registered_sha256: str | None,
          rebuilt_sha256: str | None) -> tuple[Verdict, dict[str, TierResult], list[str]]:
    """The verdict, tiers and findings' lines from the sandbox's answer (``sandbox_compare``'s JSON) and the file digests.

    Every score within float resolution and identical model-file bytes: REPRODUCED_BITWISE. The same scores, other
    bytes: REPRODUCED_WITHIN_TOLERANCE (the tolerance is float resolution on every score). Any score beyond it, or other
    labels: OUT_OF_TOLERANCE, the difference and the decisions it flips named (``_statistical``).
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
    same = pred.get("identical")
    bitwise = bool(registered_sha256) and registered_sha256 == rebuilt_sha256
    statistical = _statistical(plan, pred)
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
