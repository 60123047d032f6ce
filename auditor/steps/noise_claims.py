"""A claimed noise source is verified before it widens a tolerance (issue 42, build 1).

Same-seed reruns that differ may be execution noise only where the record says why the recipe cannot be bitwise
(``auditor.judge.expected.spread_is_execution_noise``: a GPU without deterministic algorithms, a world size above
one, a source declared with ``run.record_nondeterminism``). A declaration is a claim the audit cannot read; a script
that flips labels by the clock in its own loss declares a kernel and gets a floor wide enough to hide a doubled
learning rate. So before calibration accepts such spread, it reruns the recipe twice more under the recorded seed
with execution made deterministic (deterministic algorithms on, one thread in every pool, cuBLAS's deterministic
workspace: ``contract.rebuild_env(force_deterministic=True)``):

- the two agree bit for bit: the spread came from execution, which the claim names; the floor is marked verified;
- they still differ: the noise comes from an input no record pins, so calibration stops and stores no band;
- they cannot run so (a kernel with no deterministic form raises): the claim is unverified on this host and widens
  nothing; calibration stops, naming the reason.

The judge accepts spread only from a verified floor (``auditor.judge.verdict``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from auditor.errors import Findings, RecipeCrashed
from auditor.lineage.redact import redacted_logger
from auditor.rebuild.run import RunResult, run_recipe
from auditor.steps.common import Progress

log = redacted_logger(__name__)

#: reruns with execution made deterministic that must agree bit for bit before spread counts as execution noise
VERIFY_RERUNS = 2
HINT = ("find what the script reads that differs from run to run (the clock, an unseeded generator, a side file read "
        "in a hand-written loss) and pin it; a declared noise source widens a tolerance only when deterministic execution "
        "removes it")


def needs_verifying(record: Any, floor: Any) -> bool:
    """Whether the same-seed reruns differ where the record gives a reason they may (the claim to verify)."""
    from auditor.judge.expected import expected_tier, spread_is_execution_noise

    if floor.bit_identical:
        return False
    return spread_is_execution_noise(expected_tier(record).tier, deterministic=bool(record.seeds and record.seeds.deterministic),
                                     accelerator=bool(floor.platform.get("accelerator")), measured=floor.expected)


def verify(ref: str, record: Any, workspace: Any, runner: Any, scratch: Path, *, timeout_s: float, progress: Progress,
           digest: Any) -> str:
    """Run the deterministic reruns; the words of the verified claim, or ``Findings`` (nothing is stored)."""
    runs: list[RunResult] = []
    for i in range(VERIFY_RERUNS):
        progress(f"verifying the noise claim: deterministic rerun {i + 1}/{VERIFY_RERUNS}")
        log.info("calibrate %s: deterministic rerun %d/%d (verifying the claimed noise source)", ref, i + 1, VERIFY_RERUNS)
        try:
            runs.append(run_recipe(record, workspace, runner, scratch / f"deterministic-{i}", timeout_s=timeout_s,
                                   force_deterministic=True, fresh=True))
        except RecipeCrashed as exc:
            tail = (getattr(exc, "log_tail", "") or "").strip().splitlines()[-1:] or [str(exc)]
            raise Findings(f"calibration of {ref} stopped and stored no band: the same-seed reruns differ and the record "
                           "claims a noise source, but the claim could not be verified on this host: with execution made "
                           f"deterministic (deterministic algorithms, one thread) the recipe failed: {tail[0][:300]}; an "
                           "unverified claim widens no tolerance", hint=HINT) from None
    digests = [digest(run) for run in runs]
    if None in digests or len(set(digests)) > 1:
        raise Findings(f"calibration of {ref} stopped and stored no band: the same-seed reruns differ, and with execution "
                       f"made deterministic (deterministic algorithms, one thread) {VERIFY_RERUNS} more reruns still differ "
                       "from each other: the noise comes from an input the record does not pin, not from the claimed source, "
                       "so no floor may excuse it", hint=HINT)
    return (f"verified: {VERIFY_RERUNS} reruns with execution made deterministic (deterministic algorithms, one thread) "
            "were bit-identical, so the same-seed spread is execution noise")
