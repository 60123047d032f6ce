"""Re-evaluating the registered weights in the rebuild's own process (issue 18): ``REPRO_EVALUATE_THEN_TRAIN``.

The SDK forks when the script asks for the weights: the child evaluates them (its outputs in
``REPRO_OUTPUT_DIR/evaluation``) and ends; the parent, which the script sees as the same run, gets
None and trains. Real fork, real torch; the other cases start torch's OpenMP pool before asking, inside
the tracked block or before it (as the adapted public example does, whose audit once hung here), which a
forked child must not enter (it would wait forever on the pool's threads).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.gitrepo import init_repo


@pytest.fixture()
def rebuild(tmp_path: Path):
    import torch
    from safetensors.torch import save_file

    repo = init_repo(tmp_path / "tiny", {"train.py": "print('tiny')\n", "config.yaml": "seed: 3\n"})
    weights = tmp_path / "registered.safetensors"
    save_file({"w": torch.ones(4, 4)}, str(weights))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"seed": 3}))
    env = {"REPRO_REBUILD": "1", "REPRO_CONFIG": str(config), "REPRO_OUTPUT_DIR": str(tmp_path / "out"), "REPRO_SEED": "3",
           "REPRO_EVALUATE_WEIGHTS": str(weights), "REPRO_EVALUATE_THEN_TRAIN": "1"}
    return repo, weights, env, tmp_path / "out"


@pytest.mark.parametrize("pool_first", [False, True, "before-start"], ids=["asked-first", "after-parallel-torch", "parallel-torch-before-start"])
@pytest.mark.timeout(300)  # a child stuck in its parent's OpenMP pool would hang here
def test_the_child_evaluates_and_the_parent_trains(rebuild, pool_first):
    import torch
    from safetensors.torch import load_file

    import auditor

    repo, weights, env, out = rebuild
    torch.set_num_threads(2)
    if pool_first == "before-start":
        big = torch.randn(40000, 24)
        (big - big.mean(0)) / big.std(0)  # the pool starts before the SDK sees the run
    with auditor.track(config=repo / "config.yaml", data={}, repo_dir=repo, env=env) as run:
        if pool_first is True:
            big = torch.randn(40000, 24)
            (big - big.mean(0)) / big.std(0)  # a parallel ATen reduction: starts the OpenMP pool
        given = run.weights_to_evaluate
        if given is not None:  # only the forked child gets here, and it ends with the block
            w = load_file(str(given))["w"]
            torch.randn(40000, 24).std(0)  # parallel work in the child too
            run.log_metrics({"score": float((w @ w).sum())})
        else:
            run.log_metrics({"score": -1.0})
            run.save_weights({"w": torch.zeros(2)})
    evaluation = out / "evaluation"
    assert json.loads((evaluation / "metrics.json").read_text()) == {"score": 64.0}
    assert (evaluation / "evaluation.json").exists()
    assert json.loads((evaluation / "status.json").read_text())["exit_code"] == 0
    assert json.loads((out / "metrics.json").read_text()) == {"score": -1.0}  # the parent trained
    assert not (out / "evaluation.json").exists() and (out / "model.safetensors").exists()
    from auditor.rebuild.run import forked_evaluation

    metrics, seconds, crash = forked_evaluation(out)
    assert metrics == {"score": 64.0} and seconds is not None and crash is None
