"""Generate the reference model's dataset: a tabular binary classification, deterministically.

    python make_data.py OUT_DIR [--rows 40000] [--features 24] [--seed 0]

Writes OUT_DIR/{train_X,train_y,test_X,test_y}.npy and meta.json. The same
arguments give the same bytes, so the folder can be stored as a snapshot
(``repro-audit snapshot create OUT_DIR``) and named by its id. The held-out
split is cut here, once, so it is part of the snapshot rather than of the code.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

TEST_FRACTION = 0.2


def make(rows: int = 40_000, features: int = 24, seed: int = 0) -> dict[str, np.ndarray]:
    """Features with correlations, and labels from a logistic model with non-linear terms."""
    if features < 5:
        raise ValueError("need at least 5 features for the non-linear terms")
    rng = np.random.default_rng(seed)
    mixing = np.eye(features) + 0.3 * rng.standard_normal((features, features))
    x = rng.standard_normal((rows, features)) @ mixing
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    weights = rng.standard_normal(features) * (rng.random(features) < 0.6)
    logit = (
        x @ weights / np.sqrt(features)
        + 1.5 * np.sin(x[:, 0] * x[:, 1])
        + 0.8 * (x[:, 2] ** 2 - 1.0)
        - 0.7 * np.abs(x[:, 3]) * x[:, 4]
    )
    y = (rng.random(rows) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
    order = rng.permutation(rows)
    cut = int(rows * (1 - TEST_FRACTION))
    train, test = order[:cut], order[cut:]
    x = x.astype(np.float32)
    return {"train_X": x[train], "train_y": y[train], "test_X": x[test], "test_y": y[test]}


def write(out_dir: Path, rows: int = 40_000, features: int = 24, seed: int = 0) -> Path:
    """Write the dataset into ``out_dir`` (created); returns it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    arrays = make(rows, features, seed)
    for name, array in arrays.items():
        np.save(out_dir / f"{name}.npy", array, allow_pickle=False)
    meta = {
        "generator": "examples/reference_model/make_data.py",
        "rows": rows,
        "features": features,
        "seed": seed,
        "test_fraction": TEST_FRACTION,
        "positives": {"train": int(arrays["train_y"].sum()), "test": int(arrays["test_y"].sum())},
    }
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--rows", type=int, default=40_000)
    parser.add_argument("--features", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = write(args.out_dir, args.rows, args.features, args.seed)
    print(f"wrote {args.rows} rows x {args.features} features to {out}")


if __name__ == "__main__":
    main()
