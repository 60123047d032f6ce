"""The determinism rules of the tabular libraries: one table, each rule with its source and the versions
it was measured on (``../shared/FACTS.md``, "Measured 2026-12-02"). One home: nothing else judges knobs.

A rule reads the knobs a flavour recorded at fit time (``Artifact.knobs``) and says what it finds. A rule
whose divergence the library did not produce when measured is kept in the table with ``finds=None`` and
the measurement, so nobody re-adds it as a false alarm: LightGBM bagging and XGBoost subsampling at another
thread count, and CatBoost at another thread count, gave identical trees on the versions listed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from auditor.lineage.findings import Finding

Knobs = Mapping[str, Any]


def _on(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes")


def _unpinned(knobs: Knobs) -> str | None:
    steps = [k for k, v in knobs.items() if k.split("__")[-1] == "random_state" and v is None]
    if not steps:
        return None
    named = ", ".join(k.rsplit("__", 1)[0] if "__" in k else "(the estimator itself)" for k in steps)
    return f"random_state=None in {named}: it draws from NumPy's global generator, a seed no record pins"


def _lightgbm_gpu_deterministic(knobs: Knobs) -> str | None:
    device = str(knobs.get("param.device") or knobs.get("param.device_type") or knobs.get("device_type") or "cpu").lower()
    deterministic = knobs.get("param.deterministic", knobs.get("deterministic"))
    if _on(deterministic) and device in ("gpu", "cuda"):
        return f"deterministic=True with device={device!r}: LightGBM honours deterministic on the CPU device only"
    return None


def _xgboost_gpu_ranking(knobs: Knobs) -> str | None:
    device = str(knobs.get("device") or knobs.get("param.device") or "cpu").lower()
    tree_method = str(knobs.get("tree_method") or knobs.get("param.tree_method") or "")
    gpu = device.startswith(("cuda", "gpu")) or tree_method.startswith("gpu")
    if gpu and str(knobs.get("objective", "")).startswith("rank:"):
        return f"objective {knobs.get('objective')!r} on device {device!r}: XGBoost's GPU ranking objective is not deterministic"
    return None


def _catboost_gpu(knobs: Knobs) -> str | None:
    if str(knobs.get("task_type", "CPU")).upper() == "GPU":
        return "task_type='GPU': some of CatBoost's GPU settings are not deterministic"
    return None


@dataclass(frozen=True)
class Rule:
    code: str
    flavor: str
    source: str  # the library's documentation the rule rests on
    measured: str  # the versions it was measured on, and what was measured
    finds: Callable[[Knobs], str | None] | None  # None: measured not to diverge, kept so it is not re-added
    hint: str = ""


RULES: tuple[Rule, ...] = (
    Rule("knobs.unpinned_seed", "sklearn",
         "https://scikit-learn.org/stable/glossary.html#term-random_state (None: the global NumPy RandomState)",
         "scikit-learn 1.9.1: RandomForest(random_state=None) twice gave probabilities up to 0.3 apart", _unpinned,
         "pass an int random_state to every step (e.g. from run.seed)"),
    Rule("knobs.lightgbm_gpu_deterministic", "lightgbm",
         "https://lightgbm.readthedocs.io/en/stable/Parameters.html#deterministic (used only with the CPU device)",
         "lightgbm 4.7.0: documented; no GPU build here to measure", _lightgbm_gpu_deterministic,
         "train on device='cpu' with deterministic=True and force_row_wise=True, or set gpu_use_dp=True and calibrate"),
    Rule("knobs.xgboost_gpu_ranking", "xgboost",
         "https://xgboost.readthedocs.io/en/stable/faq.html (the GPU ranking objective is not deterministic)",
         "xgboost 3.2.0: documented; no GPU build here to measure", _xgboost_gpu_ranking,
         "train ranking models on device='cpu' or calibrate the same-seed floor on the GPU"),
    Rule("knobs.catboost_gpu", "catboost",
         "https://catboost.ai/docs/en/features/training-on-gpu (some GPU settings are not deterministic)",
         "catboost 1.2.10: documented; no GPU build here to measure", _catboost_gpu,
         "train on task_type='CPU' or calibrate the same-seed floor on the GPU"),
    Rule("knobs.lightgbm_bagging_threads", "lightgbm",
         "https://lightgbm.readthedocs.io/en/stable/FAQ.html (bagging depends on the number of threads)",
         "lightgbm 4.7.0, 5,000 and 50,000 rows: bagging_fraction 0.8 at 1 vs 2 threads gave identical trees", None),
    Rule("knobs.xgboost_subsample_threads", "xgboost",
         "https://xgboost.readthedocs.io/en/stable/faq.html (results may differ with the thread count or platform)",
         "xgboost 3.2.0 hist: subsample and colsample_bytree 0.8 at nthread 1 vs 2 gave identical UBJ bytes", None),
    Rule("knobs.catboost_threads", "catboost", "https://catboost.ai/docs/en/references/training-parameters/common#thread_count",
         "catboost 1.2.10: thread_count 1 vs 2 gave identical trees (the cbm differs only in model_guid)", None),
)

#: knobs that only say how many threads ran: a difference is reported, not judged (the rules above)
THREAD_KNOBS = frozenset({"nthread", "n_jobs", "num_threads", "thread_count", "param.n_jobs"})
#: parameters of the native APIs (``xgboost.train(params, …)``, ``lightgbm.train(params, …)``) that say only how the
#: work runs: how many threads, how much is printed. Never consumed data (``auditor.sdk.consumed``); the thread
#: count is still recorded and compared as a knob (the rules above)
EXECUTION_PARAMS = frozenset({"nthread", "n_jobs", "num_threads", "num_thread", "nthreads", "n_threads", "thread_count",
                              "verbosity", "verbose", "silent"})


#: parameters a library echoes into its model file that say only what it printed or wrote where (its log level, its
#: training folder, snapshots), per flavour: set aside by the normal form (an honest rebuild writes into a folder of
#: its own). CatBoost: ``model_info.params`` (``flat_params`` as given, ``logging_level`` as resolved)
OUTPUT_PARAMS: Mapping[str, frozenset[str]] = {
    "catboost": frozenset({"verbose", "silent", "logging_level", "metric_period", "train_dir", "allow_writing_files",
                           "save_snapshot", "snapshot_file", "snapshot_interval"}),
}


def without_execution_params(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A native ``train``/``cv`` call's arguments with ``EXECUTION_PARAMS`` left out of its params mapping (the first
    positional argument, or ``params=``): what the model is trained on and with, not how the work runs."""
    def strip(params: Any) -> Any:
        return {k: v for k, v in params.items() if k not in EXECUTION_PARAMS} if isinstance(params, dict) else params

    if args:
        args = (strip(args[0]), *args[1:])
    if "params" in kwargs:
        kwargs = {**kwargs, "params": strip(kwargs["params"])}
    return args, kwargs


#: parameters a library echoes as a list but reads as a set, per flavour: compared sorted, so an order that Python's
#: hash seed gave (``metric={"l2", "l1"}``) is not another model. LightGBM evaluates every listed metric; their order
#: matters only to early stopping with ``first_metric_only`` (then the list is compared as given).
ORDER_FREE_PARAMS: Mapping[str, tuple[str, ...]] = {"lightgbm": ("metric",)}


def order_free(flavor: str, params: Mapping[str, str]) -> dict[str, str]:
    """``params`` (as the model file prints them, comma-separated lists) with each order-free list sorted."""
    if _on(params.get("first_metric_only", "0")):
        return dict(params)
    keys = ORDER_FREE_PARAMS.get(flavor, ())
    return {k: ",".join(sorted(v.split(","))) if k in keys else v for k, v in params.items()}


def findings(flavor: str | None, knobs: Knobs, *, path: str = "outputs.artifacts") -> list[Finding]:
    """What the rule table finds in ``knobs`` recorded by ``flavor`` (warnings: lineage still passes)."""
    out = []
    for rule in RULES:
        if rule.flavor != flavor or rule.finds is None:
            continue
        message = rule.finds(knobs)
        if message:
            out.append(Finding(code=rule.code, path=path, severity="warning",
                               message=f"{message} (source: {rule.source}; measured: {rule.measured})", hint=rule.hint))
    return out


def knob_changes(recorded: Knobs, rebuilt: Knobs) -> dict[str, tuple[Any, Any]]:
    """The knobs that differ between training and a rebuild: ``{name: (recorded, rebuilt)}``."""
    return {k: (recorded.get(k), rebuilt.get(k)) for k in sorted(set(recorded) | set(rebuilt)) if recorded.get(k) != rebuilt.get(k)}
