"""Runner-side: load the registered and the rebuilt model with the flavour's own loader, compare predictions.

Runs INSIDE the rebuild's sandbox (the runner's subprocess; a container without network on the Docker runner),
never in the auditor's process: a plain-MLflow model is usually a pickle, and loading one executes whatever
code it carries. Standalone on purpose (only the standard library, mlflow, numpy, pandas and, for a Delta input,
deltalake): the auditor copies this file into the workspace and runs it with ``python sandbox_compare.py
SPEC.json OUT.json``. It writes JSON only: the rebuilt model's folder, the rebuilt run's params and metrics, whether the
registered model loaded, and the predictions' comparison. Nothing it loads travels back.

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
    names = [n for n in names if n] or list(getattr(model, "feature_names_in_", []) or [])
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


def compare(spec: dict, out: dict) -> dict:
    """Fill ``out`` step by step, so that a failure half-way still says how far it got."""
    import numpy as np

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
    a = np.asarray(registered.predict(x), dtype=np.float64)
    b = np.asarray(rebuilt.predict(x), dtype=np.float64)
    same = a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
    differing = int(np.sum(a != b)) if a.shape == b.shape else None
    max_abs = float(np.nanmax(np.abs(a - b))) if a.shape == b.shape and a.size else None
    out["predictions"] = {"rows": int(len(frame)), "data": where, "identical": bool(same), "differing": differing,
                          "max_abs": max_abs}
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
