"""Checkpoint chains and segment replay: the file format, the chain in the record, which segments an audit replays.

A **checkpoint** is one safetensors file: the model's tensors (``model.<name>``), the optimizer's tensors
(``optim.<param index>.<key>``), every generator's state that is a tensor (``rng.torch``, ``rng.cuda.<i>``,
``rng.gen.<i>`` for the generators the SDK handed out), and one metadata entry, ``repro``, holding
canonical JSON of the rest: the step, the optimizer's param groups and non-tensor state, Python's and
NumPy's generator states, the data loader's position. Never a pickle. Its key in the artifact store is
its sha256 (``checkpoints/<hex>.safetensors``), and the run record lists the chain as artifacts named
``checkpoint@<step>`` (``chain(record)`` reads it back), so the record's digest covers every link.

A **segment** runs from one checkpoint to the next (the first from the seeded start of training).
``pick_segments`` chooses which ones an audit replays: always the first (from the seed: the one link no
stored state can stand in for), one interior segment drawn at random and the last (the minimum sample,
``minimum_sample``), plus more drawn at random up to the count asked for. The draw is seeded by a value the
auditor draws at audit time (``draw_seed``), after the chain was registered, so whoever trained the chain
cannot know which interior segment will be replayed. ``compare_checkpoints`` says whether a replayed end
state is the stored one; ``chain_edited`` names a chain whose record was edited after registration.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.canonical import canonical_json
from auditor.digests import bare, sha256_file, sha256_hex, spelled
from auditor.errors import BadInput

CHECKPOINT_PREFIX = "checkpoint@"
STORE_FOLDER = "checkpoints"
META_KEY = "repro"
FORMAT = "repro.checkpoint/1"


# -- the chain in the record -------------------------------------------------------------------
@dataclass(frozen=True)
class Link:
    """One checkpoint of the chain: the step it was saved after, and its sha256 (hex)."""

    step: int
    digest: str
    uri: str = ""
    size: int | None = None


def artifact_name(step: int) -> str:
    return f"{CHECKPOINT_PREFIX}{step}"


def store_path(digest: str) -> str:
    """The checkpoint's path in the run's artifacts: content-addressed by its sha256."""
    return f"{STORE_FOLDER}/{digest}.safetensors"


def chain(record: Any) -> list[Link]:
    """The record's checkpoint chain, by step (``[]`` when training saved none)."""
    links = []
    for artifact in record.outputs.artifacts:
        if artifact.name.startswith(CHECKPOINT_PREFIX):
            try:
                step = int(artifact.name[len(CHECKPOINT_PREFIX) :])
            except ValueError:
                continue
            links.append(Link(step=step, digest=bare(artifact.sha256), uri=artifact.uri, size=artifact.size))
    return sorted(links, key=lambda link: link.step)


@dataclass(frozen=True)
class Segment:
    """Steps ``start`` (exclusive; 0 is the seeded start) to ``end``: replayed from ``begin`` to ``finish``."""

    index: int
    start: int
    end: int
    begin: Link | None  # None: the first segment starts from the seed, not from a checkpoint
    finish: Link

    @property
    def steps(self) -> str:
        return f"steps {self.start}–{self.end}"


def segments(links: Sequence[Link]) -> list[Segment]:
    out, previous = [], None
    for i, link in enumerate(links):
        out.append(Segment(index=i, start=previous.step if previous else 0, end=link.step, begin=previous, finish=link))
        previous = link
    return out


#: what every segment audit replays at least: the first segment (from the seed), one interior segment drawn at
#: random, and the last (a chain of fewer segments: all of them)
MINIMUM_SAMPLE = ("the first", "one random interior", "the last")


def minimum_sample(n: int) -> int:
    """How many of ``n`` segments every audit replays at least (the first, one random interior, the last)."""
    return min(n, len(MINIMUM_SAMPLE))


def draw_seed() -> str:
    """A fresh seed for the interior draw, drawn at audit time: unknowable when the chain was registered."""
    import secrets

    return secrets.token_hex(8)


def sample_size(n: int, *, count: int | None = None, budget: float | None = None) -> int:
    """How many of ``n`` segments an audit replays: ``count``, or ``ceil(budget · n)``, never below the minimum sample."""
    if budget is not None and not 0 < budget <= 1:
        raise BadInput(f"segment budget {budget} is not a fraction of the training in (0, 1]", hint="pass --budget 0.1")
    if count is not None and count < 1:
        raise BadInput(f"--segments {count}: replay at least one segment")
    wanted = count if count is not None else (max(1, math.ceil(budget * n - 1e-9)) if budget is not None else 0)
    return min(n, max(wanted, minimum_sample(n)))


def pick_segments(n: int, *, seed: str, count: int | None = None, budget: float | None = None) -> list[int]:
    """Which of ``n`` segments an audit replays: the first, one interior drawn by ``seed``, the last, and more drawn
    at random up to ``count`` (or ``ceil(budget · n)``); never fewer than ``minimum_sample(n)``."""
    if n <= 0:
        return []
    size = sample_size(n, count=count, budget=budget)
    rng = random.Random(int.from_bytes(hashlib.sha256(f"repro-audit:segments:{seed}".encode()).digest()[:8], "big"))
    chosen = {0, n - 1}
    if n > 2:
        chosen.add(rng.randrange(1, n - 1))
    rest = [i for i in range(n) if i not in chosen]
    chosen.update(rng.sample(rest, max(0, size - len(chosen))))
    return sorted(chosen)


def sample_basis(n: int, *, seed: str, drawn: bool, count: int | None, budget: float | None) -> str:
    """The report's sentence on how the replayed segments were chosen: the seed, who fixed it and when, the minimum."""
    size = sample_size(n, count=count, budget=budget)
    asked = count if count is not None else (max(1, math.ceil(budget * n - 1e-9)) if budget is not None else None)
    who = ("drawn by the auditor at this audit, after the chain was registered, so its trainer could not choose it"
           if drawn else "given to this audit")
    raised = f"; {asked} asked for, raised to the minimum" if asked is not None and asked < size else ""
    return (f"seed {seed} ({who}); the minimum sample is {minimum_sample(n)} of {n} segments "
            f"({', '.join(MINIMUM_SAMPLE[: minimum_sample(n)]) if n > 2 else 'every segment of so short a chain'}){raised}")


def chain_edited(record: Any, earlier: Any = None) -> str | None:
    """How an edited record's checkpoint chain reads (``record``: the record stored now, edited after registration;
    ``earlier``: the record an earlier published audit of the version held, when one is known); None: no chain in
    it, or the chain is the one the earlier evidence held (the edit is elsewhere)."""
    links = chain(record)
    if not links:
        return None
    before = {link.step: link.digest for link in chain(earlier)} if earlier is not None else None
    if before:
        now = {link.step: link.digest for link in links}
        changed = [f"checkpoint@{step} now {spelled(now[step])[:23]}… (it was {spelled(before[step])[:23]}…)"
                   for step in sorted(set(now) & set(before)) if now[step] != before[step]]
        changed += [f"checkpoint@{step} added" for step in sorted(set(now) - set(before))]
        changed += [f"checkpoint@{step} removed" for step in sorted(set(before) - set(now))]
        if not changed:
            return None
        return ("the checkpoint chain was edited after registration (against the record an earlier published audit of "
                f"this version held): {'; '.join(changed)}; no segment of an edited chain is replayed")
    return (f"the checkpoint chain ({len(links)} checkpoints, steps {links[0].step}–{links[-1].step}) is listed by a record "
            "edited after registration: an edited chain (a checkpoint replaced and the record rewritten to match it) reads "
            "exactly so, and no earlier evidence of this version says which link changed; no segment of it is replayed")


# -- the checkpoint file ----------------------------------------------------------------------------
def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise BadInput(f"checkpoint state {value!r} ({type(value).__name__}) is neither a tensor nor JSON",
                   hint="loader_state= takes numbers, strings, lists and dicts")


def _tensor(value: Any) -> Any:
    return value.detach().cpu().contiguous()


def pack(step: int, *, model: Any, optimizer: Any = None, loader_state: Mapping[str, Any] | None = None,
         generators: Sequence[Any] = ()) -> tuple[dict[str, Any], str]:
    """(tensors, metadata JSON) of one checkpoint; deterministic for the same state."""
    import numpy as np
    import torch

    tensors: dict[str, Any] = {}
    seen: set[int] = set()
    state = model.state_dict() if hasattr(model, "state_dict") else model
    for key, tensor in state.items():
        tensor = _tensor(tensor)
        tensors[f"model.{key}"] = tensor.clone() if tensor.data_ptr() in seen else tensor
        seen.add(tensor.data_ptr())
    meta: dict[str, Any] = {"format": FORMAT, "step": int(step), "loader": _jsonable(dict(loader_state or {}))}
    if optimizer is not None:
        optim = optimizer.state_dict()
        rest: dict[str, Any] = {}
        for index, values in optim["state"].items():
            for key, value in values.items():
                if torch.is_tensor(value):
                    tensors[f"optim.{index}.{key}"] = _tensor(value).clone()
                else:
                    rest.setdefault(str(index), {})[key] = _jsonable(value)
        meta["optimizer"] = {"param_groups": _jsonable(optim["param_groups"]), "state": rest, "tensor_state": sorted(
            {f"{i}.{k}" for i, v in optim["state"].items() for k, t in v.items() if torch.is_tensor(t)})}
    python = random.getstate()
    meta["rng"] = {"python": [python[0], list(python[1]), python[2]]}
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    meta["rng"]["numpy"] = {"kind": kind, "pos": int(pos), "has_gauss": int(has_gauss), "cached_gaussian": float(cached)}
    tensors["rng.numpy"] = torch.from_numpy(np.ascontiguousarray(keys).astype(np.uint32).view(np.int32).copy())
    tensors["rng.torch"] = torch.get_rng_state()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i, cuda_state in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{i}"] = cuda_state
    for i, generator in enumerate(generators):
        tensors[f"rng.gen.{i}"] = generator.get_state()
    return tensors, canonical_json(meta).decode()


def save(path: Path, step: int, **state: Any) -> str:
    """Write one checkpoint to ``path`` (atomically); returns its sha256 (hex)."""
    from safetensors.torch import save as to_bytes

    tensors, meta = pack(step, **state)
    data = to_bytes(tensors, metadata={META_KEY: meta})
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    partial.replace(path)
    return sha256_hex(data)


@dataclass
class Restored:
    """What ``Run.resume()`` gives back: the step to go on from, and the loader's position as saved."""

    step: int
    loader_state: dict[str, Any]
    path: Path


def read(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tensors, metadata) of a checkpoint file."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        meta_text = (handle.metadata() or {}).get(META_KEY)
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118 - safe_open has no iterator
    if not meta_text:
        raise BadInput(f"{path} is not a repro-audit checkpoint (no {META_KEY!r} metadata)")
    meta = json.loads(meta_text)
    if meta.get("format") != FORMAT:
        raise BadInput(f"{path} is checkpoint format {meta.get('format')!r}, not {FORMAT}")
    return tensors, meta


def restore(path: Path, *, model: Any = None, optimizer: Any = None, generators: Sequence[Any] = ()) -> Restored:
    """Load a checkpoint into ``model``/``optimizer``/the global generators/``generators``; returns its step."""
    import numpy as np
    import torch

    tensors, meta = read(path)
    if model is not None:
        model.load_state_dict({k[len("model.") :]: v for k, v in tensors.items() if k.startswith("model.")})
    if optimizer is not None and "optimizer" in meta:
        saved = meta["optimizer"]
        state: dict[int, dict[str, Any]] = {}
        for key in saved["tensor_state"]:
            index, name = key.split(".", 1)
            state.setdefault(int(index), {})[name] = tensors[f"optim.{key}"]
        for index, values in saved["state"].items():
            state.setdefault(int(index), {}).update(values)
        optimizer.load_state_dict({"state": state, "param_groups": saved["param_groups"]})
    python = meta["rng"]["python"]
    random.setstate((python[0], tuple(python[1]), python[2]))
    numpy = meta["rng"]["numpy"]
    np.random.set_state((numpy["kind"], tensors["rng.numpy"].numpy().view(np.uint32), numpy["pos"], numpy["has_gauss"], numpy["cached_gaussian"]))
    torch.set_rng_state(tensors["rng.torch"])
    cuda = sorted(k for k in tensors if k.startswith("rng.cuda."))
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([tensors[k] for k in cuda])
    for i, generator in enumerate(generators):
        if f"rng.gen.{i}" in tensors:
            generator.set_state(tensors[f"rng.gen.{i}"])
    return Restored(step=int(meta["step"]), loader_state=dict(meta.get("loader") or {}), path=path)


def sha256_of(path: Path) -> str:
    """The bare hex SHA-256 of a checkpoint file (the chain links hold bare hex)."""
    return bare(sha256_file(path))


# -- comparing a replayed end state with the stored one ---------------------------------------------
@dataclass
class Comparison:
    identical: bool  # every tensor and every saved value bit for bit
    model_diff: Any  # judge.result.WeightDiff of the model's tensors
    state_equal: bool  # optimizer, generators, loader position (bit for bit)
    differs: list[str]


def _bitwise_equal(a: Any, b: Any) -> bool:
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.numel():
        return True
    return bool(torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8)))


def compare_checkpoints(stored: Path, replayed: Path, scratch: Path) -> Comparison:
    """Whether ``replayed`` holds ``stored``'s state: bitwise for all of it, with distances for the model's tensors."""
    from safetensors.torch import save_file

    from auditor.judge.weights import diff_safetensors

    a, meta_a = read(stored)
    b, meta_b = read(replayed)
    differs = sorted(k for k in set(a) | set(b) if k not in a or k not in b or not _bitwise_equal(a[k], b[k]))
    meta_same = meta_a == meta_b
    if not meta_same:
        differs.append("metadata (" + ", ".join(sorted(k for k in set(meta_a) | set(meta_b) if meta_a.get(k) != meta_b.get(k))) + ")")
    scratch.mkdir(parents=True, exist_ok=True)
    pa, pb = scratch / "stored-model.safetensors", scratch / "replayed-model.safetensors"
    save_file({k: v for k, v in a.items() if k.startswith("model.")}, str(pa))
    save_file({k: v for k, v in b.items() if k.startswith("model.")}, str(pb))
    model_diff = diff_safetensors(pa, pb)
    state_equal = not any(not k.startswith("model.") for k in differs)
    return Comparison(identical=not differs, model_diff=model_diff, state_equal=state_equal, differs=differs)


def model_weights_equal(checkpoint: Path, weights: Path) -> bool:
    """Whether a checkpoint's model tensors are bit for bit the weights file's (links the chain to the artifact)."""
    from safetensors.torch import load_file

    tensors, _ = read(checkpoint)
    model = {k[len("model.") :]: v for k, v in tensors.items() if k.startswith("model.")}
    registered = load_file(str(weights))
    return set(model) == set(registered) and all(_bitwise_equal(model[k], registered[k]) for k in model)


# -- judging a segment audit ----------------------------------------------------------------------
def judge_segment(seg: Segment, comparison: Comparison, *, deterministic: bool, floor: Any, wall_s: float | None,
                  replayed_digest: str | None, why: str = "the recipe is deterministic") -> Any:
    """A ``SegmentCheck``: bit for bit passes; otherwise only a recipe whose record explains its noise
    (``deterministic`` False: ``expected.spread_is_execution_noise``; ``why`` says why not) within its same-seed floor does."""
    from auditor.judge.floors import check_floor
    from auditor.judge.result import SegmentCheck

    diff = comparison.model_diff
    common = {"index": seg.index, "start_step": seg.start, "end_step": seg.end, "identical": comparison.identical,
              "max_abs": diff.max_abs, "rel_l2": diff.rel_l2, "replayed_digest": replayed_digest, "wall_s": wall_s}
    if comparison.identical:
        return SegmentCheck(status="pass", summary=f"{seg.steps}: the replayed end state is the stored checkpoint, bit for bit", **common)
    what = ", ".join(comparison.differs[:6]) + (" …" if len(comparison.differs) > 6 else "")
    from auditor.judge.floors import structure_problems

    other = structure_problems(diff)
    if other:  # another set of tensors, or another shape or dtype: another model, which no floor allows
        return SegmentCheck(status="fail", summary=f"{seg.steps}: the replay is another model than the stored checkpoint: {'; '.join(other[:3])}", **common)
    if deterministic:
        return SegmentCheck(status="fail", summary=(f"{seg.steps}: the replay differs from the stored checkpoint ({what}) although "
                                                    f"{why}: an input no record pins"), **common)
    if floor is None:
        return SegmentCheck(status="fail", summary=f"{seg.steps}: the replay differs ({what}) and no same-seed floor was measured to allow it", **common)
    loader_moved = any(d.startswith("metadata") and "loader" in d for d in comparison.differs)
    ok, why = check_floor(diff, floor)
    if ok and not loader_moved:
        return SegmentCheck(status="pass", summary=f"{seg.steps}: {why}", **common)
    return SegmentCheck(status="fail", summary=f"{seg.steps}: {why if not ok else 'the data loader position differs'}", **common)


def segment_verdict(replay: Any, verdict: Any, tiers: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """A failing segment makes a reproduced verdict OUT_OF_TOLERANCE, naming its step range; the tiers say so."""
    from auditor.judge.result import TierResult, Verdict

    failed = replay.failed
    replayed = ", ".join(c.steps for c in replay.checks)
    tiers = dict(tiers)
    if not failed:
        if replay.checks:
            tier = tiers.get("bitwise") or TierResult(name="bitwise", status="skipped", summary="")
            tiers["bitwise"] = tier.model_copy(update={"details": [*tier.details, f"segment replay: {len(replay.checks)} of {replay.total} segments passed ({replayed})",
                                                                   f"segments chosen by {replay.basis}"]})
        return verdict, tiers
    names = "; ".join(c.steps for c in failed)
    for name in ("statistical", "bitwise"):
        tier = tiers.get(name)
        if tier is None:
            continue
        update: dict[str, Any] = {"details": [*tier.details, f"segment replay diverged: {names}", *(c.summary for c in failed),
                                              f"segments chosen by {replay.basis}"]}
        if tier.status in ("pass", "skipped"):
            update.update(status="fail", summary=f"segment replay diverged: {names}")
        tiers[name] = tier.model_copy(update=update)
    if verdict in (Verdict.REPRODUCED_BITWISE, Verdict.REPRODUCED_WITHIN_TOLERANCE):
        verdict = Verdict.OUT_OF_TOLERANCE
    return verdict, tiers
