"""The expected tier, before any rebuild (a determinism lint): what the record alone says an audit can reach.

Each rule reads the record (the accelerator, PyTorch's determinism flags as ``auditor.seeds.seed_everything``
records them in ``seeds.flags``, ``CUBLAS_WORKSPACE_CONFIG``, DataLoader workers and their seeding, mixed
precision, the world size, a nondeterministic source the script declared with ``run.record_nondeterminism``)
and, when it applies, *caps* the tier: ``bitwise`` (the same platform rebuilds the
same bits), ``statistical`` (the recipe's own arithmetic varies: only the noise floor and the bands can judge
it), ``not_reproducible`` (a randomness source no recorded seed controls). The expectation is the lowest cap.

The tree libraries' knobs are judged by their own table, ``auditor.flavors.rules`` (one home: nothing here
restates a library rule); :data:`FLAVOR_CAPS` only says which tier each of its findings caps at.

What the record does not hold is read where a script can put it: ``seeds.flags`` first, then the resolved
config (``num_workers``, ``worker_init_fn``, ``amp``/``mixed_precision``/``precision``). An unknown flag on
a GPU counts as off: nothing promises a deterministic kernel there. On the CPU, FACTS.md measured the same
seed bitwise-equal in every configuration tried, DataLoader workers included, with the thread count pinned
(which the record holds and the rebuild applies).

How the judge uses it (``auditor.judge.verdict.judge``, ``expected=``): a run expected ``bitwise`` whose
rebuild is not bit-identical gets the stronger finding (an input the record does not pin, or a platform
difference); a run that cannot be better than ``statistical`` is never failed on its bitwise tier alone.
Same-seed spread is execution noise only where the record says why (:func:`spread_is_execution_noise`).
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from auditor.contract import FLAG_NONDETERMINISTIC, FLAG_TORCH_CUDA_USED
from auditor.lineage.findings import Finding

ExpectedTierName = Literal["bitwise", "statistical", "not_reproducible"]
#: strongest first: the expectation is the weakest cap any rule sets
TIER_RANK: dict[str, int] = {"bitwise": 0, "statistical": 1, "not_reproducible": 2}
#: what each expectation means, in words (the report and the CLI use these)
EXPECTED_WORDS: dict[str, str] = {
    "bitwise": "bitwise: the recorded platform should rebuild the same bits",
    "statistical": "statistical at best: the recipe's own arithmetic varies, only the noise floor and the bands can judge it",
    "not_reproducible": "not reproducible: the run draws randomness no recorded seed controls",
}

PYTORCH_RANDOMNESS = "https://pytorch.org/docs/stable/notes/randomness.html"
CUBLAS_REPRODUCIBILITY = "https://docs.nvidia.com/cuda/cublas/index.html#results-reproducibility"
#: the workspace settings cuBLAS documents as deterministic
CUBLAS_DETERMINISTIC = (":4096:8", ":16:8")

#: the tier each finding of the tree libraries' table (``auditor.flavors.rules``) caps at
FLAVOR_CAPS: dict[str, ExpectedTierName] = {
    "knobs.unpinned_seed": "not_reproducible",
    "knobs.lightgbm_gpu_deterministic": "statistical",
    "knobs.xgboost_gpu_ranking": "statistical",
    "knobs.catboost_gpu": "statistical",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExpectedReason(_Model):
    code: str
    cap: ExpectedTierName
    message: str
    source: str


class ExpectedTier(_Model):
    """What the record alone lets an audit reach, and every rule that capped it."""

    tier: ExpectedTierName = "bitwise"
    words: str = EXPECTED_WORDS["bitwise"]
    reasons: list[ExpectedReason] = Field(default_factory=list)
    facts: dict[str, Any] = Field(default_factory=dict)  # what the rules read, as read

    @property
    def sentence(self) -> str:
        why = "; ".join(r.message for r in self.reasons if r.cap == self.tier)
        return f"expected {self.words}" + (f" ({why})" if why else "")


# -- what the rules read ---------------------------------------------------------------------------
def _on(value: Any) -> bool | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", "none", ""):
        return False
    return None


def _flat(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{name}."))
        else:
            out[name] = value
    return out


def _lookup(flags: Mapping[str, Any], config: Mapping[str, Any], *names: str) -> Any:
    """The first of ``names`` in the flags, then the value of any config key ending in one of them."""
    for name in names:
        if flags.get(name) is not None:
            return flags[name]
    for name in names:
        for key, value in config.items():
            if (key == name or key.endswith(f".{name}")) and value is not None:
                return value
    return None


def _mixed(value: Any) -> bool | None:
    """True for autocast/AMP spellings (``amp: true``, ``precision: 16-mixed``, ``bf16``, ``fp16``)."""
    if value is None or not isinstance(value, str):
        return _on(value)
    on = _on(value)
    return on if on is not None else re.search(r"mixed|fp16|bf16|float16|half|amp|^16", value.strip().lower()) is not None


def facts_of(record: Any) -> dict[str, Any]:
    """The facts the rules read, from a ``RunRecord`` (None where the record does not say)."""
    env = record.environment
    seeds = record.seeds
    flags = dict(seeds.flags) if seeds is not None else {}
    config = _flat(record.config.resolved) if record.config is not None else {}
    accelerator = (env.accelerator if env is not None else None) or None
    gpu = bool(accelerator and str(accelerator).lower() not in ("cpu", "none")) or bool(env is not None and env.accelerator_count > 0)
    device = _lookup(flags, config, "device")
    if gpu and isinstance(device, str) and device.strip().lower().startswith("cpu"):
        gpu = False  # trained on the CPU of a machine that has a GPU (the host records the GPU it saw)
    if gpu and flags.get(FLAG_TORCH_CUDA_USED) is False:
        gpu = False  # torch never initialised CUDA in the block: the host's GPU ran none of its kernels
    workers = _lookup(flags, config, "dataloader_num_workers", "num_workers")
    try:
        workers = int(workers) if workers is not None else 0
    except (TypeError, ValueError):
        workers = None
    generators = dict(seeds.generators) if seeds is not None else {}
    variables = dict(env.variables) if env is not None else {}
    return {
        "gpu": gpu,
        "accelerator": accelerator,
        # warn_only=True runs the nondeterministic kernels it warns about: on a GPU that is deterministic algorithms off
        "deterministic_algorithms": (False if _on(flags.get("deterministic_warn_only")) else
                                     _on(flags.get("use_deterministic_algorithms", seeds.deterministic if seeds is not None else None))),
        "deterministic_warn_only": bool(_on(flags.get("deterministic_warn_only"))),
        "cudnn_deterministic": _on(flags.get("cudnn_deterministic")),
        "cudnn_benchmark": _on(flags.get("cudnn_benchmark")),
        "cublas_workspace": flags.get("CUBLAS_WORKSPACE_CONFIG") or variables.get("CUBLAS_WORKSPACE_CONFIG"),
        "num_workers": workers,
        "worker_init_fn": _on(_lookup(flags, config, "dataloader_worker_init_fn", "worker_init_fn")),
        "loader_seeded": any(g in generators for g in ("torch", "dataloader")),
        "mixed_precision": _mixed(_lookup(flags, config, "mixed_precision", "autocast", "amp", "precision")),
        "world_size": record.infrastructure.world_size if record.infrastructure is not None else 1,
        "declared_nondeterministic": _declared(flags.get(FLAG_NONDETERMINISTIC)),
    }


def _declared(value: Any) -> list[str]:
    """The nondeterministic sources the script declared (``run.record_nondeterminism``), as text."""
    if not value:
        return []
    items = value if isinstance(value, (list, tuple)) else [value]
    return [str(item).strip() for item in items if str(item).strip()]


# -- the rules -------------------------------------------------------------------------------------
Facts = Mapping[str, Any]


def _gpu_algorithms(f: Facts) -> str | None:
    if f["gpu"] and f["deterministic_algorithms"] is not True:
        said = ("warn-only (nondeterministic kernels still run)" if f.get("deterministic_warn_only") else
                "off" if f["deterministic_algorithms"] is False else "not recorded")
        return (f"a GPU run ({f['accelerator'] or 'CUDA'}) with torch.use_deterministic_algorithms {said}: "
                "atomic adds in CUDA kernels sum in another order on every run")
    return None


def _cudnn_benchmark(f: Facts) -> str | None:
    if f["gpu"] and f["cudnn_benchmark"] is True:
        return "cudnn.benchmark on: cuDNN times candidate kernels at start-up and may pick another one on the next run"
    return None


def _cudnn_deterministic(f: Facts) -> str | None:
    if f["gpu"] and f["deterministic_algorithms"] is True and f["cudnn_deterministic"] is False:
        return "cudnn.deterministic off: cuDNN may choose a non-deterministic convolution algorithm"
    return None


def _cublas_workspace(f: Facts) -> str | None:
    if f["gpu"] and f["deterministic_algorithms"] is True and f["cublas_workspace"] not in CUBLAS_DETERMINISTIC:
        return (f"CUBLAS_WORKSPACE_CONFIG is {f['cublas_workspace']!r}: cuBLAS is deterministic only with "
                f"{' or '.join(CUBLAS_DETERMINISTIC)} (CUDA 10.2 and later)")
    return None


def _mixed_precision(f: Facts) -> str | None:
    if f["gpu"] and f["mixed_precision"] and f["deterministic_algorithms"] is not True:
        return ("mixed precision on a GPU without deterministic algorithms: half-precision atomics round the "
                "differently ordered sums at every step")
    return None


def _world_size(f: Facts) -> str | None:
    if (f["world_size"] or 1) > 1:
        return (f"world size {f['world_size']}: gradients are all-reduced across workers, and the reduction's order "
                "follows the collective's algorithm and topology, not the seed")
    return None


def _workers_unseeded(f: Facts) -> str | None:
    workers = f["num_workers"]
    if workers is None or workers == 0 or f["loader_seeded"]:
        return None
    # a worker_init_fn alone proves nothing: it can only seed from torch's per-worker seed, which comes from the
    # main process's torch generator (or the loader's generator): unseeded, every worker's seed is new each run
    init = ", a worker_init_fn that can only derive from it" if f["worker_init_fn"] is True else ", no worker_init_fn"
    return (f"DataLoader with {workers} worker(s){init} and neither torch nor the loader's generator seeded: each "
            "worker's random, NumPy and torch generators start from a base seed no recorded seed controls")


def _declared_sources(f: Facts) -> str | None:
    sources = f.get("declared_nondeterministic") or []
    if not sources:
        return None
    return ("the training script declared a nondeterministic source (" + "; ".join(sources) + "): a declaration the "
            "audit cannot verify, shown on every report; the same-seed floor, not the bits, judges this run")


@dataclass(frozen=True)
class Rule:
    code: str
    cap: ExpectedTierName
    source: str
    finds: Callable[[Facts], str | None]
    hint: str = ""


RULES: tuple[Rule, ...] = (
    Rule("expected.gpu_nondeterministic", "statistical", f"{PYTORCH_RANDOMNESS} (Avoiding nondeterministic algorithms)",
         _gpu_algorithms, "call auditor.seed_everything(seed) (deterministic=True) or torch.use_deterministic_algorithms(True)"),
    Rule("expected.cudnn_benchmark", "statistical", f"{PYTORCH_RANDOMNESS} (CUDA convolution benchmarking)",
         _cudnn_benchmark, "set torch.backends.cudnn.benchmark = False"),
    Rule("expected.cudnn_nondeterministic", "statistical", f"{PYTORCH_RANDOMNESS} (CUDA convolution determinism)",
         _cudnn_deterministic, "set torch.backends.cudnn.deterministic = True"),
    Rule("expected.cublas_workspace", "statistical", f"{CUBLAS_REPRODUCIBILITY}; {PYTORCH_RANDOMNESS}",
         _cublas_workspace, "export CUBLAS_WORKSPACE_CONFIG=:4096:8 before CUDA starts (seed_everything does)"),
    Rule("expected.mixed_precision", "statistical", f"https://pytorch.org/docs/stable/amp.html; {PYTORCH_RANDOMNESS}",
         _mixed_precision, "turn deterministic algorithms on, or accept a statistical audit"),
    Rule("expected.distributed", "statistical",
         "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html (NCCL_ALGO, NCCL_PROTO choose the reduction)",
         _world_size, "calibrate the same-seed floor at the same world size"),
    Rule("expected.declared_nondeterministic", "statistical",
         "the training script (run.record_nondeterminism); docs/concepts/tiers-and-verdicts.md", _declared_sources,
         "only declare what the recipe really computes nondeterministically (a GPU kernel's atomic adds, say)"),
    Rule("expected.dataloader_workers_unseeded", "not_reproducible",
         f"{PYTORCH_RANDOMNESS} (DataLoader: worker_init_fn and generator)", _workers_unseeded,
         "DataLoader(..., **run.dataloader_kwargs()): a seeded generator and worker_init_fn"),
)


def _flavor_reasons(record: Any) -> list[ExpectedReason]:
    """The tree libraries' table (``auditor.flavors.rules``), each finding at its :data:`FLAVOR_CAPS` tier."""
    artifact = record.outputs.model()
    if artifact is None or not artifact.flavor:
        return []
    from auditor.flavors.rules import RULES as FLAVOR_RULES
    from auditor.flavors.rules import findings

    sources = {r.code: r.source for r in FLAVOR_RULES}
    return [ExpectedReason(code=f.code, cap=FLAVOR_CAPS.get(f.code, "statistical"), message=f.message.split(" (source:")[0],
                           source=sources.get(f.code, "auditor/flavors/rules.py"))
            for f in findings(artifact.flavor, artifact.knobs)]


def expected_tier(record: Any) -> ExpectedTier:
    """The tier the record alone lets an audit reach (see the module docstring)."""
    facts = facts_of(record)
    reasons = [ExpectedReason(code=rule.code, cap=rule.cap, message=message, source=rule.source)
               for rule in RULES if (message := rule.finds(facts))]
    reasons += _flavor_reasons(record)
    tier: ExpectedTierName = max((r.cap for r in reasons), key=TIER_RANK.__getitem__, default="bitwise")
    return ExpectedTier(tier=tier, words=EXPECTED_WORDS[tier], reasons=reasons, facts=facts)


def spread_is_execution_noise(expected: str | None, *, deterministic: bool, accelerator: bool,
                              measured: str | None = None) -> bool:
    """Whether same-seed reruns that differ may be execution noise (then a floor measures it), or must be an input the
    record does not pin (then no floor may excuse a difference). One home for the rule calibration, the judge and
    segment replay share.

    Noise is accepted only where the *record* says why the recipe cannot be bitwise: an expected tier of
    ``statistical`` (a GPU without deterministic algorithms, a world size above 1, a declared nondeterministic
    source). A run expected ``bitwise`` (a CPU run, whatever its ``deterministic`` flag: FACTS.md measured the
    same seed bit-identical there; a CPU run on a host that has a GPU too) whose reruns differ draws on something no
    seed controls: the clock, an unseeded generator, a side file; so does a run expected ``not_reproducible``. The
    host's accelerator (``accelerator``) is read only without an expected tier (a calibration stored before it was
    kept), where the older rule applies: only a CPU run with deterministic algorithms on is bitwise.

    ``measured`` is the tier the same-seed reruns' own records reach (``SameSeedFloor.expected``): the reason must
    hold where the spread was measured too. A training record with ``WORLD_SIZE=2`` explains all-reduce noise, not
    the spread of reruns that ran as one process.
    """
    if measured is not None and measured != "statistical":
        return False
    if expected is not None:
        return expected == "statistical"
    return not deterministic or accelerator


def why_no_noise(expected: str | None, measured: str | None = None) -> str:
    """Why :func:`spread_is_execution_noise` said no, in words (calibration, the judge and segment replay say it)."""
    if expected == "statistical" and measured is not None and measured != "statistical":
        return (f"the reason training's record gives for noise did not hold in the reruns that measured it (their own "
                f"records expect {measured.replace('_', ' ')}: the same world size, accelerator and declarations)")
    if expected == "bitwise" and measured == "statistical":
        return ("the reruns' own records give a reason for noise that training's record does not (another accelerator, "
                "world size or declaration where they ran): training's run is expected bitwise, so their spread explains "
                "nothing about it")
    if expected == "not_reproducible":
        return ("the record says the run draws randomness no recorded seed controls (expected not reproducible): seed it "
                "from run.seed; declaring it nondeterministic does not lift that")
    if expected == "bitwise":
        return ("nothing in the record says this run cannot be bitwise (expected bitwise: no determinism rule caps it and no "
                "nondeterministic source is declared with run.record_nondeterminism)")
    return "the run is on CPU with deterministic algorithms on"


def hints() -> dict[str, str]:
    return {rule.code: rule.hint for rule in RULES}


def expected_findings(expected: ExpectedTier | None) -> list[Finding]:
    """A warning per rule that capped the tier (the tree libraries' own findings are already said)."""
    if expected is None:
        return []
    advice = hints()
    return [Finding(code=reason.code, path="seeds.flags", severity="warning",
                    message=f"expected {reason.cap.replace('_', ' ')} at best: {reason.message} (source: {reason.source})",
                    hint=advice.get(reason.code, ""))
            for reason in expected.reasons if not reason.code.startswith("knobs.")]


def missed_bitwise(expected: ExpectedTier | None, observed_bitwise: str | None) -> list[Finding]:
    """The stronger finding when a run the record says should be bitwise is not (``observed_bitwise``: the
    bitwise tier's status)."""
    if expected is None or expected.tier != "bitwise" or observed_bitwise != "fail":
        return []
    return [Finding(
        code="expected.bitwise_missed", path="seeds.flags", severity="warning",
        message=("the record promises a bitwise rebuild (no determinism rule caps it) but the rebuilt model differs: the "
                 "stronger finding, since on the recorded platform only an input the record does not pin (an unseeded "
                 "generator, a file or variable read outside the lineage) or a platform difference changes the bits"),
        hint="look for randomness outside the recorded seeds and for inputs the traced reads name; compare the drift section")]


__all__ = ["EXPECTED_WORDS", "FLAVOR_CAPS", "RULES", "TIER_RANK", "ExpectedReason", "ExpectedTier", "expected_findings",
           "expected_tier", "facts_of", "missed_bitwise", "spread_is_execution_noise", "why_no_noise"]
