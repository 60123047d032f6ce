"""Small gatherers that fill the run record at training time, and ``capture``, the whole record.

Each fact has one small function (after Sacred's ``host_info``), one module per section:

- ``code``: commit, dirty flag and diff (git, through ``auditor.git``);
- ``config`` and ``argparse_source``: the resolved config and where each value came from;
- ``packages``: installed and local packages, the lock file;
- ``host``: interpreter, platform, CPU, torch and CUDA, threads, image, the host;
- ``data``: data references.

A missing git repository or a missing torch is recorded as data (``git_error``,
``torch_error``), never raised: the gate decides what that means. The names below are
importable from ``auditor.lineage.gather`` itself (the CLI, the SDK and the tracer use them).
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.lineage.gather.argparse_source import (
    ArgparseSource,
    _all_parsers,
    argparse_config,
    argparse_jsonable,
    parse_scalar,
)
from auditor.lineage.gather.code import MAX_BINARY_IN_DIFF, git_info, own_excludes
from auditor.lineage.gather.config import resolve_config
from auditor.lineage.gather.data import _as_ref, parse_data_ref
from auditor.lineage.gather.host import ENV_ALLOWLIST, environment_info, infrastructure_info
from auditor.lineage.gather.packages import (
    LOCK_FILES,
    MAX_TREE_BYTES,
    MAX_TREE_FILES,
    installed_packages,
    local_packages,
)
from auditor.lineage.record import DataRef, RunRecord, SeedInfo
from auditor.lineage.redact import redact_argv

__all__ = [
    "ENV_ALLOWLIST",
    "LOCK_FILES",
    "MAX_BINARY_IN_DIFF",
    "MAX_TREE_BYTES",
    "MAX_TREE_FILES",
    "ArgparseSource",
    "Captured",
    "_all_parsers",
    "argparse_config",
    "argparse_jsonable",
    "capture",
    "environment_info",
    "git_info",
    "infrastructure_info",
    "installed_packages",
    "local_packages",
    "own_excludes",
    "parse_data_ref",
    "parse_scalar",
    "resolve_config",
]


@dataclass(frozen=True)
class Captured:
    """A captured record and the diff to store beside it (``diff.patch``) when the tree was dirty."""

    record: RunRecord
    diff: str | None


def capture(
    *,
    repo_dir: Path | str = ".",
    config: Path | str | Mapping[str, Any] | None = None,
    overrides: Sequence[str] = (),
    data: Mapping[str, str | DataRef | Mapping[str, Any]] | None = None,
    seeds: SeedInfo | None = None,
    entrypoint: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Captured:
    """Gather every section of a run record for the current process and repository."""
    from auditor import __version__

    env = os.environ if env is None else env
    repo_dir = Path(repo_dir)
    code, diff = git_info(repo_dir, env=env)
    if entrypoint is None:
        entrypoint = ["python", *sys.argv] if sys.argv and sys.argv[0] else None
    if entrypoint is not None:
        code = code.model_copy(update={"entrypoint": redact_argv(list(entrypoint))})
    record = RunRecord(
        created_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        tool_version=__version__,
        code=code,
        data={name: _as_ref(ref) for name, ref in (data or {}).items()},
        config=resolve_config(config, overrides, env),
        environment=environment_info(env, search=(repo_dir, repo_dir.resolve().parent)),
        seeds=seeds,
        infrastructure=infrastructure_info(env),
    )
    return Captured(record=record, diff=diff)
