"""Environment drift: how the rebuild's environment differs from the recorded one.

Package names are compared in their PEP 503 normal form (``Foo_Bar`` and
``foo-bar`` are one distribution); the drift reports them as the record spells
them. Every other fact that can change a result is compared field by field,
the thread settings key by key (FACTS.md: the thread count alone changes weights).
"""

from __future__ import annotations

import re
from typing import Any

from auditor.judge.result import EnvDrift
from auditor.lineage.record import EnvironmentInfo

# The facts besides packages that can change a rebuild's numbers, in report order.
FIELDS = (
    "python",
    "implementation",
    "platform",
    "machine",
    "torch",
    "cuda",
    "cudnn",
    "driver",
    "accelerator",
    "accelerator_count",
    "cpu_model",
    "cpu_flags_digest",
    "image_ref",
    "image_digest",
    "lock_digest",
)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def environment_drift(recorded: EnvironmentInfo, rebuilt: EnvironmentInfo) -> EnvDrift:
    """Packages added, removed and changed, then every other differing fact as (recorded, rebuilt)."""
    before = {_normal(name): (name, version) for name, version in recorded.packages.items()}
    after = {_normal(name): (name, version) for name, version in rebuilt.packages.items()}
    added = {after[key][0]: after[key][1] for key in sorted(after.keys() - before.keys())}
    removed = {before[key][0]: before[key][1] for key in sorted(before.keys() - after.keys())}
    changed = {
        before[key][0]: (before[key][1], after[key][1])
        for key in sorted(before.keys() & after.keys())
        if before[key][1] != after[key][1]
    }
    fields: dict[str, tuple[Any, Any]] = {}
    for name in FIELDS:
        old, new = getattr(recorded, name), getattr(rebuilt, name)
        if old != new:
            fields[name] = (old, new)
    for key in sorted(recorded.threads.keys() | rebuilt.threads.keys()):
        old, new = recorded.threads.get(key), rebuilt.threads.get(key)
        if old != new:
            fields[f"threads.{key}"] = (old, new)
    return EnvDrift(added=added, removed=removed, changed=changed, fields=fields)
