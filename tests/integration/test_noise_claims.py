"""Issue 42, acceptance 1: a claimed noise source is verified before it widens a tolerance.

The traps of the issue, with real torch training (the recipe of ``test_consumed_data``, changed where each trap
needs it): labels flipped by the clock inside a hand-written loss (targets that reach no fingerprinted call) give
same-seed spread; a claim explains it away, either a declared kernel (``run.record_nondeterminism``) or
``os.environ["WORLD_SIZE"] = "2"`` set by the script in a single process. After calibration, a learning rate doubled
through a side file read by ``cat`` must never audit REPRODUCED_*. The honest counterpart (a simulated kernel whose
deterministic form adds no noise: ``test_consumed_data.test_execution_noise_with_identical_consumed_data_still_gets_a
_statistical_verdict``) keeps its statistical verdict, its floor marked verified.
"""

from __future__ import annotations

import json

import pytest

from tests.integration.test_consumed_data import TRAIN, World, _git

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

LOSS = "                    loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x[i]).squeeze(1), y[i])"
LR = '        lr = float(cfg["lr"]) * float(os.environ.get("REC_LR_SCALE", "1"))   # kind: an unpinned variable'
START = "def main():\n"


def _trap(world_size: bool, lr_file: str) -> str:
    """The recipe with clock-flipped labels in a hand-written loss and the learning rate scaled by a side file that
    ``cat`` reads (a child process: no trace sees it); optionally a WORLD_SIZE the script sets itself."""
    assert LOSS in TRAIN and LR in TRAIN and START in TRAIN, "the recipe this test plants drifted"
    out = TRAIN.replace(LOSS, (
        "                    out = model(x[i]).squeeze(1)\n"
        "                    yy = y[i].clone()\n"
        "                    flip = torch.from_numpy(np.random.default_rng(time.time_ns()).random(len(yy)) < 0.1)\n"
        "                    yy[flip] = 1 - yy[flip]\n"
        "                    loss = (torch.nn.functional.softplus(out) - yy * out).mean()"))
    out = out.replace(LR, (
        "        import subprocess\n"
        f"        side = subprocess.run(['cat', {lr_file!r}], capture_output=True, text=True).stdout.strip()\n"
        "        lr = float(cfg['lr']) * float(side or 1)"))
    if world_size:
        out = out.replace(START, START + "    os.environ['WORLD_SIZE'] = '2'  # a claim: no process group is ever started\n")
    return out


# the world-size claim's mechanism (the record keeps the framework's world size) is in CI in test_world_size.py
@pytest.mark.parametrize("claim", ["declared-kernel", pytest.param("script-set-world-size", marks=pytest.mark.extended)])
def test_a_claimed_noise_source_that_deterministic_execution_does_not_remove_widens_nothing(tmp_path, claim):
    world = World(tmp_path)
    lr_file = tmp_path / "lr_scale"
    lr_file.write_text("1\n")
    (world.project / "train.py").write_text(_trap(world_size=claim == "script-set-world-size", lr_file=str(lr_file)))
    _git(world.project, "commit", "-q", "-am", f"a trap: {claim}")
    overrides = ["deterministic=false"] + (["grad_noise=true", "declare_noise=true"] if claim == "declared-kernel" else [])
    ref = world.train(overrides)
    record = world.record(ref)
    assert record.infrastructure.world_size == 1  # from the framework: WORLD_SIZE alone is no world of two
    proc = world.calibrate(ref)
    said = proc.stderr
    from auditor.tags import TAG_BANDS, TAG_CALIBRATION

    if claim == "declared-kernel":  # the claim is checked: deterministic execution leaves the spread, so no band
        assert proc.returncode == 1, said[-3000:]
        # the deterministic reruns still differ; or, before them, the clock moved a rerun's metric off the registered one
        assert "stored no band" in said, said[-3000:]
        assert "still differ" in said or "not execution noise of the recipe" in said, said[-3000:]
        assert TAG_BANDS not in world.tags(ref)
    else:  # no claim survives: the record keeps a world of one, so the spread is said to be an input, never noise
        assert "nothing in the record says this run cannot be bitwise" in said, said[-3000:]
        assert json.loads(world.tags(ref)[TAG_CALIBRATION])["same_seed"]["expected"] == "bitwise"
    lr_file.write_text("2\n")  # after calibration: the learning rate doubled through the side file
    result = world.audit(ref)
    assert not result["verdict"].startswith("REPRODUCED"), json.dumps(result["result"]["tiers"], indent=1)
