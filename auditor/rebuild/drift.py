"""Environment drift: how the rebuild's environment differs from the recorded one.

Package names are compared in their PEP 503 normal form (``Foo_Bar`` and
``foo-bar`` are one distribution); the drift reports them as the record spells
them. Every other fact that can change a result is compared field by field,
the thread settings key by key (FACTS.md: the thread count alone changes weights).

Packages installed from a local folder or in editable mode are compared by what pins their
content (``environment.local_packages``: source path, git commit, dirty flag, tree digest), so
a changed feature pipeline is named even when its version string did not move: as
``local_packages.<name>.<fact>`` in ``fields``, and as a changed package whose version reads
``VERSION (commit abc123 → def456)`` when the version string is the same.
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
    for name, (old, new) in local_package_drift(recorded, rebuilt).items():
        fields[name] = (old, new)
        package = name.split(".")[1]
        key = _normal(package)
        if key in before and key in after and before[key][0] not in changed and before[key][1] == after[key][1]:
            version = before[key][1]
            changed[before[key][0]] = (version, f"{version} (same version, other content: {name.rsplit('.', 1)[1]} changed)")
    return EnvDrift(added=added, removed=removed, changed=changed, fields=fields)


LOCAL_FACTS = ("path", "editable", "commit", "dirty", "tree_digest", "error")


def local_package_drift(recorded: EnvironmentInfo, rebuilt: EnvironmentInfo) -> dict[str, tuple[Any, Any]]:
    """``local_packages.<name>.<fact>`` -> (recorded, rebuilt) for every differing fact of a local package.

    A local package present on one side only is ``local_packages.<name>.tree_digest`` with ``None``
    on the other: the rebuild ran code outside the repository that training did not, or lacked some.
    """
    old = {_normal(k): v for k, v in recorded.local_packages.items()}
    new = {_normal(k): v for k, v in rebuilt.local_packages.items()}
    out: dict[str, tuple[Any, Any]] = {}
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key), new.get(key)
        if a is None or b is None:
            out[f"local_packages.{key}.tree_digest"] = (a.tree_digest if a else None, b.tree_digest if b else None)
            continue
        for fact in LOCAL_FACTS:
            if getattr(a, fact) != getattr(b, fact):
                out[f"local_packages.{key}.{fact}"] = (getattr(a, fact), getattr(b, fact))
    return out
