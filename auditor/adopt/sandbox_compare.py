"""Runner-side: load the registered and the rebuilt model with the flavour's own loader, compare predictions.

Runs INSIDE the rebuild's sandbox (the runner's subprocess; a container without network on the Docker runner),
never in the auditor's process: a plain-MLflow model is usually a pickle, and loading one executes whatever
code it carries. Standalone on purpose (only the standard library, mlflow, numpy, pandas and, for a Delta input,
deltalake): the auditor copies this file into the workspace and runs it with ``python sandbox_compare.py
SPEC.json OUT.json``. It writes JSON only: the rebuilt model's folder, the rebuilt run's params and metrics, whether the
registered model loaded, and the comparison of every score the flavour exposes (``predict_proba``,
``decision_function``, a booster's raw margin, a module's output, and ``predict``): per score, whether the two models
agree within float resolution, by how much they differ, how many rows differ by more than 0.001 ... 0.1, and the
decisions that flip at each cut-off. Nothing it loads travels back.

SPEC: ``{"flavour", "registered" (a folder), "tracking_uri" (the sandbox's own store), "name" (the registered
model's name), "search_root" (where the rebuilt run's artifacts lie), "data": {"kind": "delta", "table",
"version"} or null}``.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback


def _rebuilt(spec: dict) -> tuple[str | None, dict, dict]:
    """The rebuilt model's folder and its run's params and metrics: the version the entry point registered, else the one
    MLmodel (no run: neither)."""
    from mlflow import MlflowClient
    from mlflow.artifacts import download_artifacts

    client = MlflowClient(tracking_uri=spec["tracking_uri"])
    versions = []
    db = spec["tracking_uri"].removeprefix("sqlite:///")
    if os.path.isfile(db):  # an entry point that never opened MLflow left no store (opening one would create it)
        try:
            versions = client.search_model_versions(f"name = '{spec['name']}'")
        except Exception:  # noqa: BLE001 - a script that registers nothing
            versions = []
    if versions:
        mv = max(versions, key=lambda v: int(v.version))
        path = download_artifacts(artifact_uri=client.get_model_version_download_uri(mv.name, mv.version),
                                  tracking_uri=spec["tracking_uri"])
        run = client.get_run(mv.run_id) if mv.run_id else None
        return path, (dict(run.data.params) if run else {}), (dict(run.data.metrics) if run else {})
    found = [root for root, _dirs, files in os.walk(spec["search_root"]) if "MLmodel" in files]
    if len(found) != 1:
        return None, {}, {}
    return found[0], {}, {}


def _features(model: object, frame: object, registered: str) -> object:
    """The columns the model takes: its logged signature's inputs, else ``feature_names_in_``, else every column."""
    try:
        from mlflow.models import Model

        sig = Model.load(registered).signature
        names = [c.name for c in sig.inputs.inputs] if sig is not None and sig.inputs is not None else []
    except Exception:  # noqa: BLE001 - no signature: fall back
        names = []
    names = [n for n in names if n] or [str(n) for n in getattr(model, "feature_names_in_", [])]  # an array: no `or`
    return frame[names] if names else frame


def _data(spec: dict) -> tuple[object, str]:
    data = spec.get("data")
    if not data:
        return None, ""
    if data["kind"] == "delta":
        from deltalake import DeltaTable

        return DeltaTable(data["table"], version=int(data["version"])).to_pandas(), \
            f"Delta table {data['table']} @ version {data['version']}"
    raise ValueError(f"unknown data kind {data['kind']!r}")


#: a score difference within this many machine epsilons of the score's dtype, relative to max(1, |score|), is float
#: resolution (the last bits of one computation); anything beyond it is a difference
RESOLUTION_EPS = 8
#: besides float resolution, how many rows' scores differ by more than each of these
MARGINS = (0.001, 0.01, 0.05, 0.1)
#: the cut-offs of a probability (a score in [0, 1]); any other score is cut at its registered quantiles (5 % ... 95 %)
PROBABILITY_CUTOFFS = tuple(round(0.05 * i, 2) for i in range(1, 20))
#: the order a decision is read from: the first score the model exposes
SCORE_ORDER = ("predict_proba", "decision_function", "raw margin", "forward", "predict")


def _forward(model: object, x: object) -> object:
    import torch

    model.eval()
    with torch.no_grad():
        out = model(torch.as_tensor(x.to_numpy(dtype="float32")))
    return (out[0] if isinstance(out, (tuple, list)) else out).detach().cpu().numpy()


def _calls(model: object, x: object) -> list[tuple[str, object]]:
    """What the flavour's model exposes, as (score name, call): a classifier's probabilities and decision function, a
    booster's raw margin, a module's output, and ``predict`` (a classifier's labels, a regressor's values)."""
    top = type(model).__module__.split(".")[0]
    calls = [(name, lambda name=name: getattr(model, name)(x)) for name in ("predict_proba", "decision_function")
             if callable(getattr(model, name, None))]
    if top == "xgboost" and type(model).__name__ == "Booster":
        import xgboost

        calls += [("raw margin", lambda: model.predict(xgboost.DMatrix(x), output_margin=True)),
                  ("predict", lambda: model.predict(xgboost.DMatrix(x)))]
    elif top == "xgboost":
        calls.append(("raw margin", lambda: model.predict(x, output_margin=True)))
    elif top == "lightgbm":
        calls.append(("raw margin", lambda: model.predict(x, raw_score=True)))
    elif top == "catboost":
        calls.append(("raw margin", lambda: model.predict(x, prediction_type="RawFormulaVal")))
    elif top == "torch":
        calls.append(("forward", lambda: _forward(model, x)))
    if callable(getattr(model, "predict", None)) and not any(n == "predict" for n, _ in calls):
        calls.append(("predict", lambda: model.predict(x)))
    return calls


def scores(model: object, x: object) -> dict[str, object]:
    """Every score ``model`` exposes on ``x``, by name: an array, or the error its call raised (said, not skipped)."""
    import numpy as np

    out: dict[str, object] = {}
    for name, call in _calls(model, x):
        try:
            out[name] = np.asarray(call())
        except Exception as exc:  # noqa: BLE001 - one model exposing a score the other cannot give is a difference
            out[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return out


def _decision(name: str, a: object, classes: object) -> tuple[object, str]:
    """The columns a decision is taken on, and their name: a binary classifier's positive class, else every column."""
    if name == "predict_proba" and a.ndim == 2 and a.shape[1] == 2:
        label = list(classes)[1] if classes is not None and len(classes) == 2 else 1
        return a[:, 1:], f"P(class {label})"
    return (a.reshape(len(a), -1) if a.ndim else a.reshape(1, 1)), ""


def _cutoffs(name: str, a: object) -> list[float]:
    import numpy as np

    finite = a[np.isfinite(a)]
    if name == "predict_proba" or (finite.size and finite.min() >= 0.0 and finite.max() <= 1.0):
        return list(PROBABILITY_CUTOFFS)
    if not finite.size:
        return []
    return sorted({float(f"{q:.6g}") for q in np.quantile(finite, [0.05 * i for i in range(1, 20)])})


def compare_scores(name: str, a: object, b: object, *, classes: object = None) -> dict:
    """One score of both models, row by row: within float resolution or not, by how much, and the decisions that flip
    at each cut-off (``score >= cut-off``; a binary classifier's positive-class probability, else every column)."""
    import numpy as np

    out: dict = {"score": name, "shape": [list(np.shape(a)), list(np.shape(b))]}
    if isinstance(a, str) or isinstance(b, str) or np.shape(a) != np.shape(b):
        out.update(within_resolution=False, problem=(f"registered: {a}" if isinstance(a, str) else
                   f"rebuilt: {b}" if isinstance(b, str) else "the two models' scores have other shapes"))
        return out
    rows = len(a) if a.ndim else 1
    if a.dtype.kind not in "biuf" or b.dtype.kind not in "biuf":  # labels that are not numbers: equal or not
        differ = (a != b).reshape(rows, -1).any(axis=1)
        out.update(within_resolution=not differ.any(), differing=int(differ.sum()), rows=rows)
        return out
    eps = float(np.finfo(a.dtype if a.dtype.kind == "f" else np.float64).eps)
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    both_nan = np.isnan(fa) & np.isnan(fb)
    diff = np.where(both_nan, 0.0, np.abs(fa - fb))
    diff = np.where(np.isnan(diff), np.inf, diff)
    beyond = (diff > RESOLUTION_EPS * eps * np.maximum(1.0, np.maximum(np.abs(fa), np.abs(fb)))).reshape(rows, -1).any(axis=1)
    row_diff = diff.reshape(rows, -1).max(axis=1) if diff.size else np.zeros(rows)
    da, column = _decision(name, fa, classes)
    db, _ = _decision(name, fb, classes)
    labels = name == "predict" and classes is not None  # a classifier's labels are its decisions: no cut-off to take
    flips = [] if labels else [{"cutoff": c, "flips": int(((da >= c) != (db >= c)).any(axis=1).sum())}
                               for c in _cutoffs(name, da)]
    out.update(within_resolution=not beyond.any(), rows=rows, differing=int(beyond.sum()), column=column,
               resolution=f"{RESOLUTION_EPS} x {eps:.3g} x max(1, |score|)", max_abs=float(row_diff.max()) if rows else 0.0,
               over={str(m): int((row_diff > m).sum()) for m in MARGINS}, cutoffs=flips)
    return out


def compare(spec: dict, out: dict) -> dict:
    """Fill ``out`` step by step, so that a failure half-way still says how far it got."""
    flavour = importlib.import_module(f"mlflow.{spec['flavour']}")
    registered = flavour.load_model(spec["registered"])
    out["registered_loaded"] = True
    rebuilt_dir, params, metrics = _rebuilt(spec)
    out["rebuilt_dir"], out["rebuilt_params"], out["rebuilt_metrics"] = rebuilt_dir, params, metrics
    if rebuilt_dir is None:
        out["problem"] = "the entry point registered no model and left no single MLmodel folder"
        return out
    rebuilt = flavour.load_model(rebuilt_dir)
    frame, where = _data(spec)
    if frame is None:
        return out
    x = _features(registered, frame, spec["registered"])
    mine, theirs = scores(registered, x), scores(rebuilt, x)
    classes = getattr(registered, "classes_", None)
    compared = [compare_scores(name, mine.get(name, "not exposed"), theirs.get(name, "not exposed"), classes=classes)
                for name in SCORE_ORDER if name in mine or name in theirs]
    labels = next((c for c in compared if c["score"] == "predict"), compared[-1] if compared else {})
    same = bool(compared) and all(c.get("within_resolution") for c in compared)
    out["predictions"] = {"rows": int(len(frame)), "data": where, "identical": same, "classifier": classes is not None,
                          "labels_identical": bool(labels.get("within_resolution")), "differing": labels.get("differing"),
                          "max_abs": labels.get("max_abs"), "scores": compared}
    return out


def main(argv: list[str]) -> int:
    spec_path, out_path = argv[1], argv[2]
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    result: dict = {"registered_loaded": False, "rebuilt_dir": None, "rebuilt_params": {}, "rebuilt_metrics": {}, "predictions": {}}
    try:
        compare(spec, result)
    except Exception as exc:  # noqa: BLE001 - said in the JSON: the auditor words it
        result.update(error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()[-4000:])
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
