"""Whether two runs' models consumed the same data, and where it first differed. Pure.

``auditor.sdk.consumed`` records, per kind of batch (``train``, ``eval``, ``fit``, ``predict``), a short
digest of each of the first batches, one per later block, and one over the whole stream
(``RunRecord.consumed``). Two runs consumed the same data when every stream agrees; otherwise the
first differing batch (or block) is named, 1-based, in the order the model consumed them.

The judge's rule (README, "How the judge decides"): noise that comes from the inputs is never
execution noise. Same-seed calibration reruns that consumed different data build no band; a rebuild
that consumed other data than training fails lineage, whatever the determinism flags say.
"""

from __future__ import annotations

from auditor.lineage.findings import Finding
from auditor.lineage.record import ConsumedData, ConsumedStream, RunRecord

#: what each stream's batches are, in words
KIND_WORDS = {"train": ("training batch", "training batches"), "eval": ("evaluation batch", "evaluation batches"),
              "fit": ("fit() call", "fit() calls"), "predict": ("predict() call", "predict() calls")}

HINT = ("make what the script feeds the model a function of the recorded data, seed and config alone (no clock, "
        "sort sets and directory listings, seed every shuffle), then retrain and register")


def _words(kind: str) -> tuple[str, str]:
    return KIND_WORDS.get(kind, (f"{kind} batch", f"{kind} batches"))


def first_difference(kind: str, a: ConsumedStream | None, b: ConsumedStream | None) -> str | None:
    """Where stream ``kind`` first differs between ``a`` and ``b``, in words; None when they agree."""
    a, b = a or ConsumedStream(), b or ConsumedStream()
    if a.batches == b.batches and a.digest == b.digest and a.first == b.first and a.blocks == b.blocks:
        return None
    what, whats = _words(kind)
    for i, (x, y) in enumerate(zip(a.first, b.first, strict=False)):
        if x != y:
            shapes = f" (the first was {a.shape} in one and {b.shape} in the other)" if i == 0 and a.shape != b.shape else ""
            return f"{what} {i + 1} of {a.batches}/{b.batches} (digest {x} vs {y}){shapes}"
    if len(a.first) != len(b.first):
        shorter = min(len(a.first), len(b.first))
        return f"{what} {shorter + 1}: one run consumed {a.batches} {whats}, the other {b.batches}"
    size = a.block_size or b.block_size
    for j, (x, y) in enumerate(zip(a.blocks, b.blocks, strict=False)):
        if x != y:
            start = len(a.first) + j * size + 1
            return f"{whats} {start}–{start + size - 1} (block {j + 1}, digest {x} vs {y})"
    if a.batches != b.batches:
        return f"{what} {min(a.batches, b.batches) + 1}: one run consumed {a.batches} {whats}, the other {b.batches}"
    return f"the last block of {whats} (stream digest {a.digest} vs {b.digest})"


def differences(a: ConsumedData | None, b: ConsumedData | None) -> list[str]:
    """Every stream that differs, with its first differing batch; [] when both consumed the same (or either
    was not fingerprinted: ``None`` proves nothing either way, and the caller says so)."""
    if a is None or b is None or a.scheme != b.scheme:
        return []
    kinds = set(a.streams) | set(b.streams)
    ordered = [k for k in KIND_WORDS if k in kinds] + sorted(kinds - set(KIND_WORDS))  # training's first
    return [where for kind in ordered if (where := first_difference(kind, a.streams.get(kind), b.streams.get(kind))) is not None]


def rebuild_findings(recorded: RunRecord, rebuilt: RunRecord | None) -> list[Finding]:
    """A blocking finding when a rebuild's model consumed other data than training's did; a warning when training
    recorded no fingerprint (an older record: input noise could not be checked, and the report says so). Pure."""
    if rebuilt is None:
        return []
    if recorded.consumed is None:
        return [Finding(code="consumed.unrecorded", path="consumed", severity="warning",
                        message=("training recorded no fingerprint of the data its model consumed, so whether the rebuild "
                                 "consumed the same data (input noise) could not be checked"),
                        hint="retrain with this SDK (it fingerprints what the model consumes by default), then register")]
    if rebuilt.consumed is None or rebuilt.consumed.scheme != recorded.consumed.scheme:
        why = ("recorded no fingerprint of the data its model consumed" if rebuilt.consumed is None else
               f"fingerprinted what its model consumed by scheme {rebuilt.consumed.scheme}, training by scheme {recorded.consumed.scheme}")
        # fail closed: a rebuild that cannot show what its model consumed may have run from other inputs
        return [Finding(code="consumed.unknown", path="consumed", severity="blocking",
                        message=f"the rebuild {why}, so it could not be compared with training's",
                        hint="audit in the recorded environment (the SDK version that trained the model), or retrain with this one")]
    found = differences(recorded.consumed, rebuilt.consumed)
    if not found:
        return []
    params = param_differences(recorded, rebuilt.consumed.params)
    if params:  # another seed or hyperparameter: named as one, with both values
        return [Finding(code="consumed.differs", path="consumed.params", severity="blocking",
                        message=f"the rebuild trained with other parameters than training: {params}", hint=PARAM_HINT)]
    return [Finding(
        code="consumed.differs", path="consumed", severity="blocking",
        message=("the rebuild's model consumed other data than training's did, so the rebuild ran from other inputs "
                 f"(input noise, never execution noise): first differing {'; '.join(found)}"),
        hint=HINT)]


#: the parameter names that are seeds, in the native APIs
SEED_PARAMS = frozenset({"seed", "random_state", "random_seed", "bagging_seed", "feature_fraction_seed", "data_random_seed",
                         "drop_seed", "extra_seed", "objective_seed"})
PARAM_HINT = "pass every seed and hyperparameter from the recorded config or run.seed (never the clock or the environment)"


def param_differences(recorded: RunRecord, rebuilt: dict[str, str]) -> str:
    """The native training call's parameters that differ between training and the rebuild, in words ("" when none
    or unrecorded): "seed: trained with 1; the rebuild used 0; the record's seed is 0"."""
    trained = recorded.consumed.params if recorded.consumed is not None else {}
    if not trained or not rebuilt:
        return ""
    seed = recorded.seeds.seed if recorded.seeds is not None else None
    out = []
    for name in sorted(set(trained) | set(rebuilt)):
        a, b = trained.get(name, "(absent)"), rebuilt.get(name, "(absent)")
        if a != b:
            said = f"{name}: trained with {a}; the rebuild used {b}"
            out.append(said + (f"; the record's seed is {seed}" if name in SEED_PARAMS and seed is not None else ""))
    return "; ".join(out[:5]) + (f" (and {len(out) - 5} more)" if len(out) > 5 else "")


def segment_findings(recorded: RunRecord, replays: list[tuple[int, int, RunRecord | None]], total_steps: int) -> list[Finding]:
    """What each replayed segment's model consumed in training against the batches training consumed over the same
    steps (``(start_step, end_step, replay's record)``): other data fails lineage, naming the segment and the batch.

    Training's batches are matched to steps only when they divide evenly (the same number of training batches every
    step); otherwise, or past the batches training kept one digest each for, a warning says the segment was not
    compared. Pure."""
    stream = (recorded.consumed.streams.get("train") if recorded.consumed is not None else None) or ConsumedStream()
    if not replays:
        return []
    if not stream.batches or total_steps <= 0 or stream.batches % total_steps:
        return [Finding(code="consumed.segments_unmatched", path="consumed.streams.train", severity="warning",
                        message=(f"training consumed {stream.batches} training batches over {total_steps} steps: not the same "
                                 "number every step, so the replayed segments' batches were not matched to training's"),
                        hint="the checkpoints still judge each segment")]
    per = stream.batches // total_steps
    out: list[Finding] = []
    for start, end, replay in replays:
        steps = f"steps {start}–{end}"  # as ``auditor.segments.Segment.steps`` names the segment
        got = (replay.consumed.streams.get("train") if replay is not None and replay.consumed is not None else None)
        if replay is None or replay.consumed is None or replay.consumed.scheme != recorded.consumed.scheme or got is None:
            out.append(Finding(code="consumed.segments_unmatched", path="consumed.streams.train", severity="warning",
                               message=f"the replay of {steps} left no comparable fingerprint of its training batches",
                               hint="the checkpoints still judge the segment"))
            continue
        lo, n = start * per, (end - start) * per
        expected = stream.first[lo:lo + n]
        if got.batches != n:
            out.append(Finding(code="consumed.differs", path="consumed.streams.train", severity="blocking",
                               message=(f"the replay of {steps} consumed {got.batches} training batches where training consumed "
                                        f"{n} over those steps: the segment ran from other inputs"), hint=HINT))
            continue
        for i, (x, y) in enumerate(zip(expected, got.first, strict=False)):
            if x != y:
                out.append(Finding(code="consumed.differs", path="consumed.streams.train", severity="blocking",
                                   message=(f"the replay of {steps} consumed other data than training did over those steps "
                                            f"(input noise, never execution noise): first differing training batch {lo + i + 1} "
                                            f"of training's {stream.batches} (digest {x} vs {y})"), hint=HINT))
                break
        else:
            if len(expected) < n:
                out.append(Finding(code="consumed.segments_unmatched", path="consumed.streams.train", severity="warning",
                                   message=(f"the replay of {steps}: only {len(expected)} of its {n} training batches are among "
                                            "the ones training kept a digest each for; the rest were not compared"),
                                   hint="the checkpoints still judge the segment"))
    return out


def same_seed_problems(registered: RunRecord, reruns: list[RunRecord | None]) -> list[str]:
    """Where same-seed reruns consumed other data than each other or than the registered run, in words. Pure."""
    lines: list[str] = []
    first = next((i for i, r in enumerate(reruns) if r is not None and r.consumed is not None), None)
    if first is None:
        return lines
    base = reruns[first]
    assert base is not None
    for i, rerun in enumerate(reruns):
        if i == first or rerun is None:
            continue
        found = differences(base.consumed, rerun.consumed)
        if found:
            lines.append(f"same-seed reruns {first + 1} and {i + 1} consumed different data: first differing {'; '.join(found)}")
    if not lines:
        found = differences(registered.consumed, base.consumed)
        if found:
            lines.append(f"the same-seed reruns consumed other data than the registered run: first differing {'; '.join(found)}")
    return lines


def unattributed(registered: RunRecord) -> str | None:
    """Why same-seed reruns that differ cannot be told apart from input noise (None: they can): training recorded
    no fingerprint of what its model consumed, an empty one, or one with blind spots (its notes). Pure."""
    consumed = registered.consumed
    if consumed is None:
        return "training recorded no fingerprint of the data its model consumed"
    if not any(stream.batches for stream in consumed.streams.values()):
        return "training's fingerprint of the data its model consumed is empty (no batch was seen)"
    if consumed.notes:
        more = f" (and {len(consumed.notes) - 3} more)" if len(consumed.notes) > 3 else ""
        return ("training's fingerprint could not see what the model consumed (blind spots): "
                + "; ".join(consumed.notes[:3]) + more)
    return None
