"""The model artifact of any flavour compared with its rebuild: the flavour's normalised comparison, in the
judge's terms (``WeightDiff``), so the existing tiers and both noise floors apply unchanged.

PyTorch weights go through the streamed safetensors diff (``auditor.judge.weights``). Every other flavour
is read by ``auditor.flavors`` without executing code (skops only through its allow-list) and compared by
its ladder (``auditor.flavors.base.diff_normals``): what differs structurally (parameters, tree count,
topology, split features, thresholds, array shapes) is listed as ``mismatched`` (another model: never a
reproduction), leaf values and fitted arrays are measured (max |Δ|, relative L2) for the same-seed floor.
"""

from __future__ import annotations

import os
from typing import Any

from auditor.judge.result import TensorDiff, WeightDiff


def canonical_sha256(path: str | os.PathLike, flavor: str | None) -> str:
    """``sha256:`` of the normalised model (PyTorch: of the file itself)."""
    if not flavor or flavor == "torch":
        from auditor.judge.weights import sha256_file

        return sha256_file(path)
    from auditor.flavors import module

    return module(flavor).normal(path).digest()


def model_diff(a: str | os.PathLike, b: str | os.PathLike, flavor: str | None) -> tuple[WeightDiff, dict[str, str]]:
    """Registered ``a`` against rebuilt ``b``: the judge's diff, and evidence lines (what was set aside, the
    first divergence) for the report."""
    if not flavor or flavor == "torch":
        from auditor.judge.weights import diff_safetensors

        return diff_safetensors(a, b), {}
    from auditor.flavors import module
    from auditor.flavors.base import diff_normals

    flavour = module(flavor)
    return as_weight_diff(diff_normals(flavour.normal(a), flavour.normal(b)), flavor)


def as_weight_diff(diff: Any, flavor: str) -> tuple[WeightDiff, dict[str, str]]:
    """A ``flavors.base.StructuralDiff`` as the judge's ``WeightDiff`` plus its evidence lines."""
    worst = [TensorDiff(name=e.name, identical=False, max_abs=e.max_abs, rel_l2=e.rel_l2, note=e.note) for e in diff.entries]
    if diff.first:
        first = next((t for t in worst if diff.first.startswith(f"{t.name}: ")), None)
        if first is not None:
            worst = [first, *[t for t in worst if t is not first]]
    evidence = {"model.flavor": flavor, "model.comparison": "normalised " + flavor + " model"}
    if diff.set_aside:
        evidence["model.set_aside"] = "; ".join(diff.set_aside)
    if diff.first:
        evidence["model.first_divergence"] = diff.first
    result = WeightDiff(identical=diff.identical, tensors=diff.compared, differing=diff.differing, max_abs=diff.max_abs,
                        rel_l2=diff.rel_l2, only_in_a=list(diff.only_in_a), only_in_b=list(diff.only_in_b),
                        mismatched=list(diff.structural), worst=worst)
    return result, evidence
