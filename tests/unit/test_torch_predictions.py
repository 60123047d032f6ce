"""PyTorch predictions as evidence (issue 31, multiplicity for every calibrated report): a module scores the recorded
evaluation rows itself, and in a rebuild a copy of it holding the registered safetensors weights scores them too."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from safetensors.torch import save_file  # noqa: E402

from auditor.contract import ENV_EVALUATE_WEIGHTS, PREDICTIONS_FILE  # noqa: E402
from auditor.flavors import predictions  # noqa: E402
from auditor.flavors import torch as torch_flavor  # noqa: E402
from auditor.sdk.models import module_predictions  # noqa: E402


def _module(seed: int):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))


def test_a_one_column_module_is_scored_by_its_output_and_its_mode_is_restored():
    module = _module(0)
    module.train()
    x = np.random.default_rng(1).normal(size=(5, 3)).astype(np.float32)
    raw, score = torch_flavor.scores(module, x)
    expected = module(torch.as_tensor(x)).detach().double().numpy()[:, 0]
    assert np.allclose(raw, expected) and np.array_equal(raw, score) and module.training


def test_two_columns_give_the_second_class_probability():
    torch.manual_seed(0)
    module = torch.nn.Linear(3, 2)
    _, score = torch_flavor.scores(module, np.ones((4, 3), dtype=np.float32))
    assert score.shape == (4,) and ((score > 0) & (score < 1)).all()


def test_in_a_rebuild_both_the_registered_weights_and_the_rebuilt_module_score_the_rows(tmp_path):
    registered, rebuilt = _module(0), _module(1)
    weights = tmp_path / "registered.safetensors"
    save_file({k: v.contiguous() for k, v in registered.state_dict().items()}, str(weights))
    x = torch.as_tensor(np.random.default_rng(2).normal(size=(20, 3)), dtype=torch.float32)
    meta = module_predictions(rebuilt, x, 0.0, tmp_path, {ENV_EVALUATE_WEIGHTS: str(weights)})
    assert meta["rows"] == 20 and meta["threshold"] == 0.0 and "error" not in meta
    _, arrays = predictions.read(tmp_path / PREDICTIONS_FILE)
    assert np.allclose(arrays["registered_score"], torch_flavor.scores(registered, x.numpy())[1])
    assert np.allclose(arrays["rebuilt_score"], torch_flavor.scores(rebuilt, x.numpy())[1])
    assert not np.allclose(arrays["registered_score"], arrays["rebuilt_score"])


def test_at_training_only_the_rows_and_threshold_are_recorded(tmp_path):
    meta = module_predictions(_module(0), np.zeros((3, 3), dtype=np.float32), 0.5, tmp_path, None)
    assert meta == predictions.recorded(np.zeros((3, 3), dtype=np.float32), 0.5)
    assert not (tmp_path / PREDICTIONS_FILE).exists()
