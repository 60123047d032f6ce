"""``rebuild``: a registered version rebuilt from its five recorded inputs (the on-demand rebuild)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor.errors import BadInput
from auditor.judge.result import EnvDrift
from auditor.rebuild.run import RunResult, run_recipe
from auditor.steps.common import Progress, drift, require_complete_lineage

log = logging.getLogger(__name__)


@dataclass
class RebuildResult:
    """``rebuild``'s answer: the rebuilt weights and metrics, the environment drift, the run's log."""

    model_ref: str
    workspace: Path
    runs: list[RunResult] = field(default_factory=list)
    drift: EnvDrift | None = None

    @property
    def first(self) -> RunResult:
        return self.runs[0]


def rebuild(session: Any, model_ref: str, *, out_dir: Path, runner: str | None, progress: Progress) -> RebuildResult:
    """Rebuild a registered version from its five recorded inputs into ``out_dir``."""
    run_with = session.runner(runner)
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise BadInput(f"output folder {out_dir} is not empty", hint="pass a new folder")
    progress(f"resolving {model_ref}")
    log.info("rebuild %s: resolving", model_ref)
    info = session.registry.resolve(model_ref)
    record, diff = session.registry.load_record(info)
    require_complete_lineage(info.ref, record, diff)
    progress("preparing the workspace (code at the recorded commit, verified data)")
    log.info("rebuild %s: preparing the workspace", info.ref)
    workspace = session.prepare(record, diff, out_dir / "workspace")
    progress(f"running {' '.join(record.code.entrypoint or [])}")
    log.info("rebuild %s: running %s", info.ref, " ".join(record.code.entrypoint or []))
    run = run_recipe(record, workspace, run_with, out_dir / "output", timeout_s=session.settings.rebuild_timeout_s)
    log.info("rebuild %s: done in %.1f s, weights %s", info.ref, run.wall_s, run.weights_sha256)
    return RebuildResult(model_ref=info.ref, workspace=workspace.root, runs=[run], drift=drift(record, run))
