"""What every model flavour provides, and the structural diff they share.

A flavour turns its artifact (one file, read without executing code) into a ``Normal``: the model as
data, with what is not the model set aside (parameters echoed into the file such as a thread count,
random ids) and said so. Two normals are compared by ``diff_normals``, a ladder:

1. ``meta`` (hyper-parameters, model-level values): a difference is named (another recipe);
2. trees: the same number, then per tree (in order) the same topology and split features, then the
   same thresholds: a difference is structural (another model), named by its first tree and node;
   then leaf values, compared numerically (the same-seed floor judges them);
3. arrays (coefficients, bin edges, scaler means, ...): same shape, then values, the largest named.

The digest of a normal is its canonical bytes: two models are bit-identical when their normals hash
alike. Trees are compared as arrays (``auditor.flavors.forest``): a flavour gives a ``Forest`` (or, in tests, lists
of ``Node``); nodes become Python objects only where a difference is named. Pure: numpy and the standard library only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from auditor.canonical import canonical_json
from auditor.digests import sha256_digest
from auditor.flavors.forest import Forest, Node, as_forest, differences
from auditor.flavors.keys import PACK_AT, _array_key, _jsonable, _packed  # noqa: F401 - re-exported: one way to key a value

#: how many differing items a diff lists (the most different first)
WORST = 10


@dataclass
class Normal:
    """A model as data: what a flavour's canonical form holds."""

    flavor: str
    meta: dict[str, Any] = field(default_factory=dict)
    trees: Forest | list[Any] = field(default_factory=list)  # a Forest, or lists of Node (a Forest's nodes, in tests)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    set_aside: list[str] = field(default_factory=list)  # what the file holds that is not the model, said once each
    #: fail-closed: the whole document the file holds, less only what ``set_aside`` names. The ladder explains a
    #: difference; the identity makes sure nothing the ladder does not read (a booster kind it does not know, a
    #: linear leaf, a CTR's index) can make two different models hash alike.
    identity: Any = None
    #: where ``identity`` holds only the digest of the document (the bytes a flavour read), the document itself, read
    #: again on demand: only to name where two models differ outside what the ladder reads
    document: Callable[[], Any] | None = None

    def digest(self) -> str:
        """``sha256:`` of the canonical bytes: meta, trees, arrays and the identity, floats by their exact bits.

        The identity (the whole document, trees included, when a flavour gives one) is serialised by the C JSON
        encoder (sorted keys; a float by its shortest exact repr, so bit-identical exactly when equal; -0.0 and
        NaN spelled as such), and the trees separately only when there is no identity to hold them.
        """
        h = {"flavor": self.flavor, "meta": _jsonable(self.meta),
             "trees": as_forest(self.trees).key() if self.identity is None else len(self.trees),
             "arrays": {k: _array_key(v) for k, v in sorted(self.arrays.items())}}
        try:
            identity = json.dumps(self.identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True,
                                  default=_jsonable).encode("utf-8")
        except (TypeError, ValueError):  # keys that do not sort (mixed types): the slow, general form
            identity = canonical_json(_jsonable(self.identity))
        return sha256_digest(canonical_json(h) + b"\0" + identity)


@dataclass
class Entry:
    """One differing item: a tree node, a leaf, an array or a parameter, of one ``kind`` (``KINDS``)."""

    name: str
    note: str
    max_abs: float | None = None
    rel_l2: float | None = None
    structural: bool = False
    kind: str = "values"


#: the one vocabulary of differences (issue 40): what an ``Entry`` is, in a validator's words. The flavours' normal
#: forms decide the kind; the report renders these words, it does not reword them
KINDS = {"values": "values differ", "shape": "shape or dtype differs", "structure": "tree structure differs",
         "threshold": "split threshold differs", "leaf": "leaf value differs", "parameter": "parameter differs",
         "file": "model file differs"}


@dataclass
class StructuralDiff:
    """Two normals compared: what the judge turns into its weight diff."""

    identical: bool
    compared: int = 0  # parameters + trees + arrays, each counted once
    differing: int = 0  # of those, how many differ (never more than ``compared``)
    max_abs: float | None = None
    rel_l2: float | None = None
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)
    structural: list[str] = field(default_factory=list)  # another model: named, not measured
    entries: list[Entry] = field(default_factory=list)
    first: str | None = None  # the first divergence, in model order
    cause: str | None = None  # the first parameter that differs, with both values: the input that explains the rest
    set_aside: list[str] = field(default_factory=list)
    #: the first divergent tree beside its registered twin: (tree, [(node, registered, rebuilt), ...]) in node order
    twin: tuple[int, list[tuple[int, str, str]]] | None = None




def _describe(n: Node) -> str:
    if n.leaf:
        return f"leaf {', '.join(repr(v) for v in n.value)}"
    return f"split on feature {n.feature} at {n.threshold!r}" + (f" ({n.kind})" if n.kind else "")


@dataclass
class _Distance:
    """max |a - b| and the relative L2 distance over every numeric value the ladder measured, summed part by part
    (never one concatenation of every value: that held the model twice over in float64)."""

    count: int = 0
    max_abs: float = 0.0
    sq_diff: float = 0.0
    sq_a: float = 0.0

    def same(self, a: np.ndarray) -> None:
        self.count += a.size
        self.sq_a += _squares(a)

    def differ(self, a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> None:
        """Values (already counted by ``same``) that differ."""
        fa, fb = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
        if fa.size:
            with np.errstate(all="ignore"):
                self.max_abs = max(self.max_abs, float(np.max(np.abs(fa - fb))))
                self.sq_diff += float(np.sum(np.square(fa - fb)))


def _squares(a: np.ndarray, step: int = 1 << 16) -> float:
    """sum(a**2) over the finite values, in float64, a block at a time (a float32 array is not copied whole). An
    infinite bound a loss object holds (scikit-learn's ``interval_y_pred``) made every distance NaN."""
    flat = a.reshape(-1)
    total = 0.0
    for i in range(0, flat.size, step):
        block = flat[i:i + step].astype(np.float64)
        block = block[np.isfinite(block)]
        total += float(np.einsum("i,i->", block, block))  # not BLAS: its threads' wake-up cost more than the sum
    return total


def _differ_objects(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Objects (feature names, category sets) element by element, by value as the digest keys them."""
    return np.fromiter((_jsonable(p) != _jsonable(q) for p, q in zip(x.ravel(), y.ravel(), strict=True)),
                       dtype=bool, count=x.size).reshape(x.shape)


def _forest_entries(a: Forest, b: Forest, dist: _Distance) -> list[Entry]:
    """The trees both hold, in order: each tree's first structural difference (node count, topology, split
    feature, threshold) or leaf of another width, else its differing leaves; found with numpy, named from ``Node``s
    built for the nodes named only."""
    found = differences(a, b, _differ_objects)
    sa, sb = a.sizes(), b.sizes()
    by_tree: dict[int, list[Entry]] = {i: [Entry(f"tree {i}", f"{KINDS['structure']}: {sa[i]} vs {sb[i]} nodes", structural=True,
                                                 kind="structure")] for i in found.sizes}
    for i, j, ka, kb in found.splits:
        by_tree[i] = [_split_entry(i, j, a.node(ka), b.node(kb))]
    for i, j, ka, kb in found.shapes:
        by_tree[i] = [Entry(f"tree {i} node {j}", f"{KINDS['shape']}: a leaf of {a.width(ka)} vs {b.width(kb)} values",
                            structural=True, kind="shape")]
    for i, j, ka, kb in found.leaves:
        va, vb = a.node(ka).value, b.node(kb).value
        gap = max(abs(float(x) - float(y)) for x, y in zip(va, vb, strict=True))
        by_tree.setdefault(i, []).append(Entry(f"tree {i} node {j}", f"leaf value {_fmt(va)} vs {_fmt(vb)}", max_abs=gap, kind="leaf"))
        dist.differ(va, vb)
    dist.same(found.values)  # every leaf of a tree measured (no structural difference), equal or not
    return [e for i in sorted(by_tree) for e in by_tree[i]]


def _split_entry(i: int, j: int, na: Node, nb: Node) -> Entry:
    """A node whose split differs: its topology, kind or feature (another model), else its threshold."""
    if na.leaf != nb.leaf or na.children != nb.children or na.kind != nb.kind or (
            not na.leaf and _jsonable(na.feature) != _jsonable(nb.feature)) or na.leaf:
        return Entry(f"tree {i} node {j}", f"{KINDS['structure']}: {_describe(na)} vs {_describe(nb)}", structural=True, kind="structure")
    return Entry(f"tree {i} node {j}", f"{KINDS['threshold']} on feature {na.feature}: {na.threshold!r} vs {nb.threshold!r}",
                 max_abs=_gap(na.threshold, nb.threshold), structural=True, kind="threshold")


def _gap(a: Any, b: Any) -> float | None:
    """How far a numeric threshold moved (None for a category set)."""
    try:
        return abs(float(a) - float(b))
    except (TypeError, ValueError):
        return None


def _fmt(values: Sequence[float]) -> str:
    return repr(float(values[0])) if len(values) == 1 else repr([float(v) for v in values])


def _meta_entries(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Entry]:
    keys = sorted(set(a) | set(b))
    missing = object()
    out = []
    for key in keys:
        va, vb = a.get(key, missing), b.get(key, missing)
        if va is missing or vb is missing or _jsonable(va) != _jsonable(vb):
            shown = ["(absent)" if v is missing else repr(v)[:120] for v in (va, vb)]
            out.append(Entry(f"parameter {key}", f"{shown[0]} vs {shown[1]}", structural=True, kind="parameter"))
    return out


def _array_entry(name: str, a: np.ndarray, b: np.ndarray, dist: _Distance) -> Entry | None:
    if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
        return Entry(name, f"{KINDS['shape']}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}", structural=True, kind="shape")
    if _array_key(a) == _array_key(b):
        if a.dtype.kind in "fiub":
            dist.same(a)
        return None
    if a.dtype.kind not in "fiub":
        return Entry(name, "values differ (not numeric: compared by value)", structural=True)
    fa, fb = _numeric(a), _numeric(b)
    with np.errstate(all="ignore"):
        d = np.abs(fa - fb)
        k = int(np.nanargmax(d)) if d.size and not np.all(np.isnan(d)) else 0
        norm = float(np.linalg.norm(fa))
        rel = float(np.linalg.norm(fa - fb)) / norm if norm > 0 else None
    dist.same(fa)
    dist.differ(fa, fb)
    where = np.unravel_index(k, a.shape) if a.shape else ()
    note = f"largest difference at {list(map(int, where))}: {float(fa[k])!r} vs {float(fb[k])!r}"
    return Entry(name, note, max_abs=float(d[k]) if d.size else None, rel_l2=rel)


def _numeric(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind not in "fiub":
        return np.empty(0)
    return np.asarray(a, dtype=np.float64).ravel()


def diff_normals(a: Normal, b: Normal) -> StructuralDiff:
    """Compare the registered model ``a`` with the rebuild ``b`` (see the module's ladder)."""
    out = StructuralDiff(identical=a.digest() == b.digest(), set_aside=sorted(set(a.set_aside) | set(b.set_aside)))
    out.compared = len(set(a.meta) | set(b.meta)) + max(len(a.trees), len(b.trees)) + len(set(a.arrays) | set(b.arrays))
    if out.identical:  # the same canonical bytes: nothing differs, no ladder to walk
        out.max_abs, out.rel_l2 = 0.0, 0.0
        return out
    meta = _meta_entries(a.meta, b.meta)
    ta, tb = as_forest(a.trees), as_forest(b.trees)
    out.only_in_a = [f"tree {i}" for i in range(len(tb), len(ta))][:WORST]
    out.only_in_b = [f"tree {i}" for i in range(len(ta), len(tb))][:WORST]
    if len(ta) != len(tb):
        out.structural.append(f"{len(ta)} vs {len(tb)} trees")
    dist = _Distance()
    entries = _forest_entries(ta, tb, dist)
    in_trees = bool(entries)
    for name in sorted(set(a.arrays) | set(b.arrays)):
        if name not in b.arrays or name not in a.arrays:
            (out.only_in_a if name in a.arrays else out.only_in_b).append(name)
            continue
        entry = _array_entry(name, a.arrays[name], b.arrays[name], dist)
        entries += [entry] if entry else []
    if not (entries or meta or out.only_in_a or out.only_in_b or len(ta) != len(tb)):
        where = first_difference(*(n.document() if n.document else n.identity for n in (a, b)))  # what the ladder does not read
        meta.append(Entry(f"model file at {where or '(top)'}", "differs outside the compared structure", structural=True, kind="file"))
        out.compared += 1
    _totals(out, entries + meta, dist)  # parameters last: the first divergence named is in the model
    if len(ta) != len(tb) and not in_trees:  # the trees both hold agree: the first divergence is the first tree one lacks
        k = min(len(ta), len(tb))
        out.first = f"tree {k}: only in the {'registered model' if len(ta) > len(tb) else 'rebuild'} ({len(ta)} vs {len(tb)} trees)"
    out.twin = _twin(ta, tb, entries)
    out.cause = next((f"{e.name}: {e.note}" for e in meta if e.kind == "parameter"), None)  # the input that explains it
    return out


#: how many nodes of the first divergent tree the report shows beside its twin (a depth-4 binary tree)
TWIN_NODES = 31


def _twin(ta: Forest, tb: Forest, entries: Sequence[Entry]) -> tuple[int, list[tuple[int, str, str]]] | None:
    """The first tree an entry names, both versions described node by node: its first ``TWIN_NODES // 2`` nodes and
    the fifteen around the first node that differs (so the table always shows that node)."""
    first = next((e.name for e in entries if e.name.startswith("tree ")), None)
    if first is None:
        return None
    words = first.split()
    i = int(words[1])
    j = int(words[3]) if len(words) > 3 and words[2] == "node" else 0
    if i >= len(ta) or i >= len(tb):
        return None
    sizes = [int(f.offsets[i + 1] - f.offsets[i]) for f in (ta, tb)]
    # the tree's first nodes (its top), and the nodes around the first that differs, wherever it lies in the tree
    shown = sorted(set(range(min(max(sizes), TWIN_NODES // 2))) | set(range(max(0, j - 7), min(max(sizes), j + 8))))

    def said(forest: Forest, size: int, k: int) -> str:
        return _describe(forest.node(int(forest.offsets[i]) + k)) if k < size else "—"

    return i, [(k, said(ta, sizes[0], k), said(tb, sizes[1], k)) for k in shown]


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The path of the first place two JSON-like values differ (None: they are equal), down to the element: lists are
    walked as they are (never as the digest of a long list, ``_packed``), a leaf compared as the digest keys it."""
    if type(a) is not type(b):
        return path or "(top)"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                return f"{path}.{key}".lstrip(".")
            found = first_difference(a[key], b[key], f"{path}.{key}".lstrip("."))
            if found:
                return found
        return None
    if isinstance(a, (list, tuple)):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return f"{path}[{min(len(a), len(b))}]" if len(a) != len(b) else None
    return None if _jsonable(a) == _jsonable(b) else (path or "(top)")


def _totals(out: StructuralDiff, entries: list[Entry], dist: _Distance) -> None:
    """Fill the counts, the first divergence, the worst entries and the distance over every numeric value."""
    out.structural += [f"{e.name}: {e.note}" for e in entries if e.structural]
    out.first = next((f"{e.name}: {e.note}" for e in entries), None) or (
        out.structural[0] if out.structural else (f"only in one model: {(out.only_in_a + out.only_in_b)[0]}"
                                                  if out.only_in_a or out.only_in_b else None))
    items = {e.name.split(" node ")[0] for e in entries}
    out.differing = len(items) + len(out.only_in_a) + len(out.only_in_b)
    if out.identical:
        out.structural, out.first, out.differing = [], None, 0
        out.max_abs, out.rel_l2 = 0.0, 0.0
        return
    numeric = [e for e in entries if not e.structural]
    ranked = [e for e in entries if e.structural][:WORST] + sorted(numeric, key=lambda e: e.max_abs or 0.0, reverse=True)[:WORST]
    out.entries = entries[:1] + [e for e in ranked if e is not entries[0]] if entries else []  # the first divergence first
    if dist.count:
        out.max_abs = dist.max_abs
        out.rel_l2 = math.sqrt(dist.sq_diff) / math.sqrt(dist.sq_a) if dist.sq_a > 0 else None
    elif not out.structural and not (out.only_in_a or out.only_in_b):
        out.max_abs = max((e.max_abs or 0.0 for e in numeric), default=None)
    moved = [e.max_abs for e in entries if e.kind == "threshold" and e.max_abs is not None]
    if moved:  # a split threshold that moved is a difference of that size, though every leaf may be equal
        out.max_abs = max(out.max_abs or 0.0, *moved)
