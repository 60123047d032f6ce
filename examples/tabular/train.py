"""Train a credit-scoring model with scikit-learn, XGBoost, LightGBM or CatBoost, audited by repro-audit.

    python train.py model=lightgbm [key=value ...]

The data is generated here (fixed, not seed-dependent) and recorded as a snapshot with ``auditor.generated``;
the model is saved without pickle with ``run.save_model`` (see README: "Audit your own scikit-learn /
XGBoost / LightGBM / CatBoost script").
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

import auditor


def make_data(rows: int) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic credit book: 8 features, default probability from a logistic score (fixed generator)."""
    rng = np.random.default_rng(20240601)
    x = rng.normal(size=(rows, 8))
    score = 1.2 * x[:, 0] - 0.8 * x[:, 1] + 0.5 * x[:, 2] * x[:, 3] + 0.3 * rng.normal(size=rows)
    return x, (score > 0.2).astype(np.int64)


def auc(y: np.ndarray, score: np.ndarray) -> float:
    """The area under the ROC curve (the rank statistic; ties count half)."""
    order = np.argsort(score, kind="stable")
    ranks = np.empty(len(score))
    ranks[order] = np.arange(1, len(score) + 1)
    ordered = np.sort(score)
    for value in np.unique(ordered[1:][np.diff(ordered) == 0]):  # ties share their mean rank
        ranks[score == value] = ranks[score == value].mean()
    positives = int(y.sum())
    return float((ranks[y == 1].sum() - positives * (positives + 1) / 2) / (positives * (len(y) - positives)))


def build(cfg: dict, seed: int):
    kind, n, depth, lr = cfg["model"], int(cfg["n_estimators"]), int(cfg["max_depth"]), float(cfg["learning_rate"])
    threads, sub = int(cfg["threads"]), float(cfg["subsample"])
    if kind == "xgboost":
        import xgboost

        return xgboost.XGBClassifier(n_estimators=n, max_depth=depth, learning_rate=lr, subsample=sub, colsample_bytree=sub,
                                     tree_method="hist", n_jobs=threads, random_state=seed)
    if kind == "lightgbm":
        import lightgbm

        return lightgbm.LGBMClassifier(n_estimators=n, max_depth=depth, num_leaves=2**depth, learning_rate=lr, subsample=sub,
                                       subsample_freq=1 if sub < 1 else 0, n_jobs=threads, random_state=seed,
                                       deterministic=True, force_row_wise=True, verbose=-1)
    if kind == "catboost":
        from catboost import CatBoostClassifier

        return CatBoostClassifier(iterations=n, depth=depth, learning_rate=lr, thread_count=threads, random_seed=seed,
                                  verbose=False, allow_writing_files=False)
    return _sklearn(cfg, kind, seed)


def _sklearn(cfg: dict, kind: str, seed: int):
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import KBinsDiscretizer, StandardScaler

    unpinned = cfg.get("unpinned_step")

    def state(step: str) -> int | None:
        return None if unpinned == step else seed

    if kind == "forest":
        return Pipeline([("scale", StandardScaler()),
                         ("forest", RandomForestClassifier(n_estimators=int(cfg["n_estimators"]), max_depth=int(cfg["max_depth"]),
                                                           n_jobs=int(cfg["threads"]), random_state=state("forest")))])
    return Pipeline([("bins", KBinsDiscretizer(n_bins=5, encode="onehot-dense", strategy="quantile", random_state=state("bins"))),
                     ("logit", LogisticRegression(C=float(cfg["C"]), max_iter=500, random_state=state("logit")))])


def planted(cfg: dict) -> dict:
    """``rebuild_override`` applied inside an audit's rebuild only (a setting the record does not hold)."""
    override = cfg.get("rebuild_override")
    if not override or os.environ.get("REPRO_REBUILD") != "1":
        return cfg
    key, _, value = str(override).partition("=")
    return {**cfg, key: type(cfg[key])(value) if cfg.get(key) is not None else value}


#: what each model kind imports; imported before ``auditor.track`` (see ``main``)
LIBRARIES = {"xgboost": ("xgboost", "pandas"), "lightgbm": ("lightgbm", "pandas"), "catboost": ("catboost", "pandas"),
             "scorecard": ("sklearn.pipeline", "sklearn.preprocessing", "sklearn.linear_model", "pandas"),
             "forest": ("sklearn.pipeline", "sklearn.preprocessing", "sklearn.ensemble", "pandas")}


def import_libraries(argv: list[str]) -> None:
    """Import the model's library before the tracked block: libraries read environment variables as they are
    imported, and a rebuild (which does no MLflow I/O, so imports none of what MLflow imports) would
    otherwise read them inside the block where training did not, which the audit reports as an input."""
    import importlib

    kind = next((a.split("=", 1)[1] for a in argv if a.startswith("model=")), "xgboost")
    for name in LIBRARIES.get(kind, ()):
        importlib.import_module(name)


def main() -> None:
    import_libraries(sys.argv[1:])
    x, y = make_data(2000)  # fixed: a calibration's other seeds vary the model, not the data
    with auditor.track(config=Path(__file__).with_name("config.yaml"), overrides=sys.argv[1:],
                       data={"train": auditor.generated(x=x, y=y)}, experiment="tabular") as run:
        cfg = planted(run.config)
        cut = int(0.75 * len(y))
        run.record_split("train", "the first 75% of rows train, the last 25% are held out (no shuffle)", train_rows=cut)
        model = build(cfg, run.seed).fit(x[:cut], y[:cut])
        proba = model.predict_proba(x[cut:])[:, 1]
        decisions = proba >= float(cfg["threshold"])
        run.log_metrics({"auc": auc(y[cut:], proba), "accuracy": float(np.mean(decisions == y[cut:])),
                         "approval_rate": float(np.mean(~decisions))})
        run.save_model(model, eval_data=x[cut:], threshold=float(cfg["threshold"]))  # the audit scores both models on it
        print("trained:", cfg["model"], json.dumps(run.record.outputs.metrics), flush=True)


if __name__ == "__main__":
    main()
