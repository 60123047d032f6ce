"""Trees as arrays: a forest's normal form, one flat numpy array per field of every node, and where two differ.

Why arrays: a 2,000-tree model holds some 10^5 nodes, and one Python object per node made comparing two models
20-50x slower than loading them (bench/results/tree_diff.txt). Here each field (split feature, threshold, child
slots, kind, leaf values) is one array over all trees, ``offsets`` saying where each tree starts; two forests are
compared with numpy (``differences``), and a node becomes a ``Node`` only where a difference is named or the report
shows it (``Forest.node``). Pure: numpy and the standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from auditor.flavors.keys import _array_key

#: a child slot a node does not use (a leaf, or a node with fewer children than the forest's widest)
PAD = np.iinfo(np.int64).min


@dataclass(frozen=True)
class Node:
    """One node of a tree: a split (``feature``, ``threshold``, children) or a leaf (``value``)."""

    feature: Any = None  # a split's feature (index or name); None on a leaf
    threshold: Any = None  # a split's threshold or category set; None on a leaf
    children: tuple[int, ...] = ()
    kind: str = ""  # decision type, default direction, ...: part of the topology
    value: tuple[float, ...] = ()  # a leaf's value(s)

    @property
    def leaf(self) -> bool:
        return self.feature is None


@dataclass(eq=False)
class Forest:
    """Every node of every tree, field by field. ``feature``, ``threshold``, ``children`` and ``kind`` are read on
    splits only and ``values`` on leaves only (what a flavour stores there otherwise is still part of the digest)."""

    offsets: np.ndarray  # [trees + 1]: tree i is nodes offsets[i]:offsets[i + 1]
    leaf: np.ndarray  # [nodes] bool
    feature: np.ndarray  # [nodes] ints, or objects (a feature name, None)
    threshold: np.ndarray  # [nodes] floats, or objects (a category set or list)
    children: tuple[np.ndarray, ...]  # one [nodes] array per child slot: tree-local indices, PAD where unused
    kind: np.ndarray  # [nodes] codes into ``kinds``
    kinds: tuple[str, ...]
    values: np.ndarray  # [nodes, width] floats: a leaf's values
    widths: np.ndarray | None = None  # [nodes] values per leaf where leaves differ in that (None: all ``width``)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> list[Node]:
        return self.nodes(i)

    def __iter__(self) -> Iterator[list[Node]]:
        return (self.nodes(i) for i in range(len(self)))

    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    def width(self, k: int) -> int:
        return int(self.widths[k]) if self.widths is not None else self.values.shape[1]

    def node(self, k: int) -> Node:
        """Node ``k`` (counted over all trees) as the ladder names it: Python numbers, a float32 by its shortest
        repr (what the model's JSON prints), child slots that are used."""
        if self.leaf[k]:
            return Node(value=tuple(_py(v) for v in self.values[k, :self.width(k)]))
        return Node(feature=_py(self.feature[k]), threshold=_py(self.threshold[k]),
                    children=tuple(int(c[k]) for c in self.children if c[k] != PAD), kind=self.kinds[int(self.kind[k])])

    def nodes(self, i: int, stop: int | None = None) -> list[Node]:
        start, end = int(self.offsets[i]), int(self.offsets[i + 1])
        return [self.node(k) for k in range(start, end if stop is None else min(end, start + stop))]

    def key(self) -> list[Any]:
        """What the digest reads: every array by dtype, shape and exact bits (objects by value), the kinds by name."""
        arrays = [self.offsets, self.leaf, self.feature, self.threshold, *self.children, self.kind, self.values]
        return [list(self.kinds), [_array_key(a) for a in arrays], None if self.widths is None else _array_key(self.widths)]

    @classmethod
    def empty(cls) -> Forest:
        return cls.build([], [], [], [], [], [], [])

    @classmethod
    def build(cls, sizes: Sequence[int], leaf: Sequence[bool], feature: Sequence[Any], threshold: Sequence[Any],
              children: Sequence[tuple[int, ...]], kind: Sequence[str], values: Sequence[tuple[float, ...]]) -> Forest:
        """From flat per-node lists (all trees in order): a general form for flavours whose nodes are read one by one
        from a parsed document (CatBoost) and for trees given as ``Node`` lists."""
        n = len(leaf)
        slots = max((len(c) for c in children), default=0)
        kids = tuple(np.fromiter((c[s] if s < len(c) else PAD for c in children), dtype=np.int64, count=n) for s in range(slots))
        vocabulary: dict[str, int] = {"": 0}
        codes = np.fromiter((vocabulary.setdefault(k, len(vocabulary)) for k in kind), dtype=np.int32, count=n)
        width = max((len(v) for v in values), default=0)
        table = np.full((n, width), np.nan)
        for k, v in enumerate(values):
            table[k, :len(v)] = v
        counts = np.fromiter(map(len, values), dtype=np.int64, count=n)
        ragged = bool(np.any(counts[np.asarray(leaf, dtype=bool)] != width))
        return cls(offsets=np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64),
                   leaf=np.asarray(leaf, dtype=bool).reshape(n), feature=_column(feature), threshold=_column(threshold),
                   children=kids, kind=codes, kinds=tuple(vocabulary), values=table, widths=counts if ragged else None)

    @classmethod
    def from_nodes(cls, trees: Sequence[Sequence[Node]]) -> Forest:
        nodes = [n for tree in trees for n in tree]
        return cls.build([len(t) for t in trees], [n.leaf for n in nodes], [0 if n.leaf else n.feature for n in nodes],
                         [np.nan if n.leaf else n.threshold for n in nodes], [n.children for n in nodes],
                         [n.kind for n in nodes], [n.value for n in nodes])

    @classmethod
    def join(cls, forests: Sequence[Forest]) -> Forest:
        """Several forests as one (a pipeline's or an ensemble's trees, in order)."""
        if len(forests) == 1:
            return forests[0]
        if not forests:
            return cls.empty()
        vocabulary: dict[str, int] = {}
        kinds = [np.array([vocabulary.setdefault(k, len(vocabulary)) for k in f.kinds], dtype=np.int32)[f.kind] for f in forests]
        slots = max(len(f.children) for f in forests)
        width = max(f.values.shape[1] for f in forests)
        ragged = any(f.widths is not None or f.values.shape[1] != width for f in forests)
        starts = np.cumsum([0] + [len(f.leaf) for f in forests])
        return cls(offsets=np.concatenate([[0]] + [f.offsets[1:] + s for f, s in zip(forests, starts, strict=False)]).astype(np.int64),
                   leaf=np.concatenate([f.leaf for f in forests]), feature=_joined([f.feature for f in forests]),
                   threshold=_joined([f.threshold for f in forests]),
                   children=tuple(np.concatenate([f.children[s] if s < len(f.children) else np.full(len(f.leaf), PAD)
                                                  for f in forests]) for s in range(slots)),
                   kind=np.concatenate(kinds), kinds=tuple(vocabulary),
                   values=np.concatenate([np.pad(f.values.astype(np.float64), ((0, 0), (0, width - f.values.shape[1])),
                                                 constant_values=np.nan) for f in forests]) if ragged else np.concatenate([f.values for f in forests]),
                   widths=np.concatenate([_widths(f) for f in forests]) if ragged else None)


def as_forest(trees: Forest | Sequence[Any]) -> Forest:
    """``trees`` as one ``Forest``: itself, forests joined, or a list of ``Node`` lists."""
    if isinstance(trees, Forest):
        return trees
    if trees and all(isinstance(t, Forest) for t in trees):
        return Forest.join(list(trees))
    return Forest.from_nodes(trees)


def _widths(f: Forest) -> np.ndarray:
    return f.widths if f.widths is not None else np.where(f.leaf, f.values.shape[1], 0)


def _py(value: Any) -> Any:
    """A numpy scalar as Python's: a float32 by the double of its shortest repr (what XGBoost's JSON prints)."""
    if isinstance(value, np.floating) and value.dtype.itemsize < 8:
        return float(str(value))
    return value.item() if isinstance(value, np.generic) else value


def _column(items: Sequence[Any]) -> np.ndarray:
    """Ints as int64, floats as float64, anything else (names, category sets, None) as objects, by value."""
    kinds = set(map(type, items))
    if kinds <= {int} and items:
        return np.array(items, dtype=np.int64)
    if kinds <= {float}:
        return np.array(items, dtype=np.float64)
    return np.fromiter(items, dtype=object, count=len(items))


def _joined(columns: Sequence[np.ndarray]) -> np.ndarray:
    if any(c.dtype == object for c in columns):
        return np.concatenate([c.astype(object) for c in columns])
    return np.concatenate(columns)


@dataclass
class Differences:
    """Where two forests differ, tree by tree, as a tree ladder reads them (``base._forest_entries`` names them)."""

    sizes: list[int]  # trees (in both) whose node counts differ
    splits: list[tuple[int, int, int, int]]  # (tree, node, a's node, b's node): each tree's first split that differs
    shapes: list[tuple[int, int, int, int]]  # the same, for each other tree's first leaf of another width
    leaves: list[tuple[int, int, int, int]]  # every differing leaf of the remaining trees, in order
    values: np.ndarray  # a's leaf values in the remaining trees (the distance's denominator)


def differences(a: Forest, b: Forest, differ: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Differences:
    """``a`` against ``b``; ``differ`` compares two columns of objects element by element."""
    common = min(len(a), len(b))
    sa, sb = a.sizes()[:common], b.sizes()[:common]
    same = np.flatnonzero(sa == sb)
    starts = np.concatenate([[0], np.cumsum(sa[same])]).astype(np.int64)  # of the aligned trees, in aligned order
    if len(same) == common and np.array_equal(a.offsets[:common + 1], b.offsets[:common + 1]):
        ia = ib = slice(0, int(a.offsets[common]))  # one layout: views, no copies
    else:
        ia, ib = _gather(a.offsets, same, sa[same]), _gather(b.offsets, same, sa[same])
    la, lb = a.leaf[ia], b.leaf[ib]
    split = ~la & ~lb
    structure = la != lb
    for slot in range(max(len(a.children), len(b.children))):
        structure |= split & (_slot(a, slot)[ia] != _slot(b, slot)[ib])
    structure |= split & (a.kind[ia] != _codes(b, a.kinds)[b.kind[ib]])
    structure |= split & _differ(a.feature[ia], b.feature[ib], differ)
    flagged = structure | (split & _differ(a.threshold[ia], b.threshold[ib], differ))
    splits, bad = _firsts(np.flatnonzero(flagged), starts, same, ia, ib)
    leaves = la & lb & ~np.repeat(bad, np.diff(starts))
    wa, wb = _leaf_widths(a, ia), _leaf_widths(b, ib)
    shapes, shaped = _firsts(np.flatnonzero(leaves & (wa != wb)), starts, same, ia, ib)
    leaves &= ~np.repeat(shaped, np.diff(starts))
    width = max(a.values.shape[1], b.values.shape[1])
    va, vb = _padded(a.values[ia], width), _padded(b.values[ib], width)
    changed = np.flatnonzero(leaves & _differ(va, vb, differ).reshape(len(leaves), width).any(axis=1)) if width else np.empty(0, int)
    found = [_where(p, starts, same, ia, ib) for p in changed.tolist()]
    measured = va[leaves]
    return Differences(sizes=np.flatnonzero(sa != sb).tolist(), splits=splits, shapes=shapes, leaves=found,
                       values=measured[~np.isnan(measured)] if (a.widths is not None or b.widths is not None or
                                                                a.values.shape[1] != b.values.shape[1]) else measured.reshape(-1))


def _gather(offsets: np.ndarray, trees: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The node indices of ``trees`` (of ``sizes`` nodes each), end to end."""
    first = np.cumsum(sizes) - sizes
    return np.repeat(offsets[trees] - first, sizes) + np.arange(int(sizes.sum()), dtype=np.int64)


def _slot(f: Forest, slot: int) -> np.ndarray:
    return f.children[slot] if slot < len(f.children) else np.full(len(f.leaf), PAD)


def _codes(b: Forest, kinds: tuple[str, ...]) -> np.ndarray:
    """``b``'s kind codes in ``kinds``' numbering (a kind only ``b`` has: a code ``kinds`` does not use)."""
    known = {k: i for i, k in enumerate(kinds)}
    return np.array([known.get(k, len(kinds) + i) for i, k in enumerate(b.kinds)], dtype=np.int64)


def _differ(x: np.ndarray, y: np.ndarray, differ: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """Element by element: floats by their bits (-0.0 is not 0.0) with NaN equal to NaN, ints by value, objects by
    ``differ``."""
    if x.dtype == object or y.dtype == object:
        return differ(x.astype(object), y.astype(object))
    if x.dtype.kind == "f" or y.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            same = ((x == y) & (np.signbit(x) == np.signbit(y))) | (np.isnan(x) & np.isnan(y))
        return ~same
    return x != y


def _firsts(positions: np.ndarray, starts: np.ndarray, same: np.ndarray, ia: Any, ib: Any) -> tuple[list[tuple[int, int, int, int]], np.ndarray]:
    """Each aligned tree's first of ``positions`` (aligned node positions, ascending), and which trees have one."""
    trees = np.searchsorted(starts, positions, side="right") - 1
    _, first = np.unique(trees, return_index=True)
    hit = np.zeros(len(same), dtype=bool)
    hit[trees] = True
    return [_where(int(p), starts, same, ia, ib) for p in positions[first]], hit


def _where(p: int, starts: np.ndarray, same: np.ndarray, ia: Any, ib: Any) -> tuple[int, int, int, int]:
    """Aligned position ``p`` as (tree, node in it, a's node, b's node)."""
    t = int(np.searchsorted(starts, p, side="right")) - 1
    ka = p if isinstance(ia, slice) else int(ia[p])
    kb = p if isinstance(ib, slice) else int(ib[p])
    return int(same[t]), p - int(starts[t]), ka, kb


def _leaf_widths(f: Forest, index: Any) -> np.ndarray | int:
    return f.widths[index] if f.widths is not None else f.values.shape[1]


def _padded(values: np.ndarray, width: int) -> np.ndarray:
    if values.shape[1] == width:
        return values
    return np.pad(values.astype(np.float64), ((0, 0), (0, width - values.shape[1])), constant_values=np.nan)
