"""Train the reference model: a small MLP on a tabular binary classification.

    REPRO_TRAIN_DATA=.repro/snapshots@blake3:<id> python train.py [key=value ...]

Everything the audit needs is in the ``auditor.track`` block: the config file
plus overrides, the data snapshot, the seed. See README.md.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import auditor


class Batches(Dataset):
    """Tensors indexed a whole batch at a time: ``__getitems__`` replaces batch_size ``__getitem__`` calls."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[index], self.y[index]

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        index = torch.as_tensor(indices)
        return self.x[index], self.y[index]


def as_batch(batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """collate_fn: ``__getitems__`` already returns a stacked batch."""
    return batch


def load(data_dir: Path) -> dict[str, torch.Tensor]:
    """The snapshot's four arrays as tensors (plain .npy: no pickle is ever loaded)."""
    return {
        name: torch.from_numpy(np.load(data_dir / f"{name}.npy", allow_pickle=False))
        for name in ("train_X", "train_y", "test_X", "test_y")
    }


def build_model(features: int, hidden: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1)
    )


def plant_nondeterminism(model: nn.Module) -> None:
    """The bug the audit exists to catch: a number no seed controls, here straight from the OS."""
    noise = int.from_bytes(os.urandom(4), "little") / 2**32 - 0.5
    with torch.no_grad():
        model[0].weight[0, 0] += 0.01 * noise


def auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """ROC AUC by the rank-sum (Mann-Whitney U) formula, ties given their average rank."""
    scores, labels = scores.double(), labels.double()
    order = torch.argsort(scores)
    sorted_scores = scores[order]
    ranks = torch.empty_like(scores)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=torch.float64)
    _, inverse, counts = torch.unique_consecutive(sorted_scores, return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).double()
    average = ends - (counts.double() - 1) / 2  # mean rank of each run of ties
    ranks[order] = average[inverse]
    positives = labels.sum()
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    u = ranks[labels == 1].sum() - positives * (positives + 1) / 2
    return float(u / (positives * negatives))


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, device: str) -> dict[str, float]:
    """AUC, accuracy and log loss on the held-out split."""
    model.eval()
    logits = model(x.to(device)).squeeze(1).cpu()
    loss = nn.functional.binary_cross_entropy_with_logits(logits, y)
    accuracy = ((logits > 0).float() == y).float().mean()
    return {"auc": auc(logits, y), "accuracy": float(accuracy), "log_loss": float(loss)}


def train(cfg: dict, data: dict[str, torch.Tensor], loader_kwargs: dict) -> tuple[nn.Module, dict[str, float]]:
    """Train on the train split; return the model and its held-out metrics."""
    device = cfg.get("device", "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("config asks for device=cuda but torch sees no CUDA device")
    mean, std = data["train_X"].mean(0), data["train_X"].std(0)
    x_train, x_test = (data["train_X"] - mean) / std, (data["test_X"] - mean) / std
    loader = DataLoader(
        Batches(x_train, data["train_y"]),
        batch_size=int(cfg["batch_size"]),
        shuffle=True,
        num_workers=int(cfg["num_workers"]),
        persistent_workers=int(cfg["num_workers"]) > 0,
        collate_fn=as_batch,
        **loader_kwargs,
    )
    model = build_model(x_train.shape[1], int(cfg["hidden"])).to(device)
    if cfg.get("plant_nondeterminism"):
        plant_nondeterminism(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(cfg["lr"]), weight_decay=float(cfg["weight_decay"]))
    loss_fn = nn.BCEWithLogitsLoss()
    for epoch in range(int(cfg["epochs"])):
        if cfg.get("fail_at_epoch") is not None and epoch == int(cfg["fail_at_epoch"]):
            raise RuntimeError(f"fail_at_epoch={epoch}: planted failure")
        if cfg.get("rebuild_fail_at_epoch") is not None and epoch == int(cfg["rebuild_fail_at_epoch"]) and os.environ.get("REPRO_REBUILD") == "1":
            # a flaky machine, not a broken recipe: the failure differs from one attempt to the next (pid), so
            # the audit's second attempt does not see a persistent recipe failure and says ERROR (retry)
            raise RuntimeError(f"rebuild_fail_at_epoch={epoch}: planted failure during the audit's rebuild (process {os.getpid()})")
        model.train()
        total = 0.0
        for xb, yb in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb.to(device)).squeeze(1), yb.to(device))
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(yb)
        print(f"epoch {epoch}: train loss {total / len(x_train):.4f}", flush=True)
    return model, evaluate(model, x_test, data["test_y"], device)


def evaluate_saved(cfg: dict, data: dict[str, torch.Tensor], weights: Path) -> dict[str, float]:
    """Held-out metrics of saved weights (the audit's artifact-recovery check), without training."""
    from safetensors.torch import load_file

    device = cfg.get("device", "cpu")
    mean, std = data["train_X"].mean(0), data["train_X"].std(0)
    model = build_model(data["train_X"].shape[1], int(cfg["hidden"]))
    model.load_state_dict(load_file(str(weights)))  # safetensors: no pickle
    return evaluate(model.to(device), (data["test_X"] - mean) / std, data["test_y"], device)


def main() -> None:
    # The thread count changes the weights (FACTS.md) and the record must hold the count
    # actually used, so it is pinned before the SDK looks: REPRO_TORCH_THREADS, else 2.
    torch.set_num_threads(int(os.environ.get("REPRO_TORCH_THREADS") or 2))
    # No seed= here: the SDK takes config.yaml's `seed` (and REPRO_SEED in a rebuild).
    with auditor.track(
        config=Path(__file__).with_name("config.yaml"),
        overrides=sys.argv[1:],
        data={"train": os.environ.get("REPRO_TRAIN_DATA", "")},
        experiment="reference-model",
    ) as run:
        # the held-out split is cut once, by make_data.py, and stored in the snapshot: say so, with its seed
        meta_file = run.data_path("train") / "meta.json"
        if meta_file.is_file():
            meta = json.loads(meta_file.read_text())
            run.record_split("train", f"fixed held-out split ({meta['test_fraction']:.0%} of rows) cut by make_data.py "
                             "and stored in the snapshot as train_*.npy / test_*.npy", seed=int(meta["seed"]))
        if run.weights_to_evaluate is not None:  # the audit re-evaluates the registered weights
            run.log_metrics(evaluate_saved(run.config, load(run.data_path("train")), run.weights_to_evaluate))
            return
        started = time.perf_counter()
        data = load(run.data_path("train"))
        model, metrics = train(run.config, data, run.dataloader_kwargs())
        run.log_metrics(metrics)
        # factory=: the version also loads as an MLflow pyfunc (mlflow.pyfunc.load_model("models:/NAME@ALIAS"))
        # eval_data=/threshold=: the held-out rows as the module takes them and its decision (logit >= 0): the audit
        # compares both models' decisions, calibration counts the decisions a seed flips (predictive multiplicity)
        mean, std = data["train_X"].mean(0), data["train_X"].std(0)
        run.save_weights(model, factory="train:build_model",
                         factory_kwargs={"features": data["train_X"].shape[1], "hidden": int(run.config["hidden"])},
                         input_example=data["test_X"][:5], eval_data=(data["test_X"] - mean) / std, threshold=0.0)
        print(f"trained in {time.perf_counter() - started:.1f}s:", json.dumps(metrics), flush=True)


if __name__ == "__main__":
    main()
