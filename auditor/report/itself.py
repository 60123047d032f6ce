"""The auditor records itself: its version and the environment it ran in, held to the committed lock.

A validator rebuilds the auditor as well as the model: every evidence file and its signed statement carry
``auditor_itself()``. The environment digest is the sha256 of the installed distributions, one
``name==version`` line each, sorted (repro-audit itself and pip left out); the lock's
digest is the same over the pins of the committed lock (``requirements/dev.lock.txt``, beside a clone's
checkout), so "matches the lock" is one comparison. An install without the lock beside it says so (None).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from auditor.digests import sha256_digest
from auditor.lineage.gather.packages import _normal_name as _normal  # the one PEP 503 normalisation the record uses

#: the committed lock of the project's own environments (make venv installs exactly it; ``make lock`` moves it)
LOCK_FILE = Path(__file__).resolve().parents[2] / "requirements" / "dev.lock.txt"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")
#: not counted: repro-audit itself (its version is its own field) and pip, which `python -m venv` seeds, not the lock
_NOT_COUNTED = frozenset({"repro-audit", "pip"})


def lock_pins(text: str) -> dict[str, str]:
    """The ``name==version`` pins of a requirements lock (hash and comment lines skipped), names normalised."""
    return dict(sorted((_normal(m.group(1)), m.group(2)) for m in map(_PIN.match, text.splitlines()) if m))


def environment_digest(packages: Mapping[str, str]) -> str:
    """sha256 of ``name==version`` lines, sorted by name, repro-audit itself and pip left out."""
    lines = "".join(f"{_normal(n)}=={v}\n" for n, v in sorted(packages.items(), key=lambda kv: _normal(kv[0])) if _normal(n) not in _NOT_COUNTED)
    return sha256_digest(lines.encode("utf-8"))


def lock_comparison(installed: Mapping[str, str], pins: Mapping[str, str]) -> list[str]:
    """How ``installed`` differs from the lock's ``pins``, one short phrase per package (empty: it matches)."""
    installed = {_normal(n): v for n, v in installed.items() if _normal(n) not in _NOT_COUNTED}
    moved = [f"{n} {installed[n]} (lock {v})" for n, v in pins.items() if n in installed and installed[n] != v]
    missing = [f"{n} missing (lock {v})" for n, v in pins.items() if n not in installed]
    extra = [f"{n} {v} (not in the lock)" for n, v in installed.items() if n not in pins]
    return moved + missing + extra


@functools.lru_cache(maxsize=1)
def auditor_itself() -> dict[str, Any]:
    """``{"version", "environment_digest", "packages", "lock"}``: what this process of the auditor ran from."""
    from auditor import __version__
    from auditor.lineage.gather.packages import installed_packages

    installed = installed_packages()
    found: dict[str, Any] = {"version": __version__, "environment_digest": environment_digest(installed),
                             "packages": sum(1 for n in installed if n not in _NOT_COUNTED)}
    if not LOCK_FILE.is_file():
        found["lock"] = None  # an install without a clone beside it: nothing to hold the environment to
        return found
    pins = lock_pins(LOCK_FILE.read_text(encoding="utf-8"))
    differs = lock_comparison(installed, pins)
    found["lock"] = {"file": "requirements/dev.lock.txt", "digest": environment_digest(pins), "matches": not differs,
                     "differs": differs[:10], "differs_count": len(differs)}
    return found


def describe_itself(record: Mapping[str, Any] | None) -> str:
    """One line for people: ``repro-audit 0.1.0, environment sha256:… (matches the committed lock)``."""
    if not record:
        return "not recorded (evidence published before the auditor recorded itself)"
    lock = record.get("lock")
    if lock is None:
        held = "no committed lock beside that install"
    elif lock.get("matches"):
        held = "matches the committed lock"
    else:
        held = f"differs from the committed lock in {lock.get('differs_count')} package(s): " + ", ".join(lock.get("differs") or [])
    return f"repro-audit {record.get('version')}, environment {record.get('environment_digest')} ({held})"


def auditor_of(evidence: bytes | None) -> str | None:
    """``describe_itself`` of the auditor an evidence file names; None when there is no file or it is no JSON object
    (a changed or missing evidence file is reported by its hash already)."""
    import json

    if evidence is None:
        return None
    try:
        doc = json.loads(evidence)
    except ValueError:
        return None
    return describe_itself(doc.get("auditor")) if isinstance(doc, dict) else None
