"""The audit session: opened once per entry point, it holds what every step needs.

An entry point (a CLI command, a DAG task, the rebuild pod, the demo) resolves the settings once and
opens one ``Session`` from them. The session opens the registry, the reports store, the runners and
the signer the first time a step asks, and never again; every verb is a method that makes one call
into its step module (``auditor.steps.rebuild``, ``calibrate``, ``audit``, ``publish``, ``nightly``,
``coverage``). Below the session nothing reads settings from the environment.

Tests and benchmarks inject what they stand in for through the constructor (``runner=``,
``registry=``, ``store=``, ``prepare=``), never by patching a step's private function.

One door audits a version: ``Session.audit(ref, AuditOptions(...))``. It serves the CLI, the DAGs and
the pod alike and returns one shape, ``AuditOutcome``: the verdict, where it was published, and, when
publishing failed, the failure beside the verdict (never an exception carrying the verdict).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditor.errors import InfrastructureError, ReproError
from auditor.steps.common import Progress, quiet, resolving
from auditor.steps.options import AuditOptions, AuditOutcome

if TYPE_CHECKING:
    from auditor.settings import Settings
    from auditor.steps.mapped import CalibrationPlan, PlannedRerun
    from auditor.storage import BlobStore

_UNSET: Any = object()


class Session:
    """Everything one entry point's steps share, each opened once, when first needed."""

    def __init__(self, settings: Settings, *, registry: Any = None, store: BlobStore | None = None, runner: Any = None,
                 prepare: Any = None, signer: Any = _UNSET) -> None:
        self.settings = settings
        self._registry = registry
        self._store = store
        self._runner = runner  # one runner for every name (a test's stand-in), else one per name, made once
        self._runners: dict[str, Any] = {}
        self._prepare = prepare
        self._signer = signer

    # -- what the session opens once ----------------------------------------------------------
    @property
    def registry(self) -> Any:
        """The model registry (MLflow, or the in-memory twin) at the settings' tracking and registry URIs."""
        if self._registry is None:
            from auditor.registry import open_registry

            self._registry = open_registry(self.settings.tracking_uri, self.settings.registry_uri, settings=self.settings)
        return self._registry

    @property
    def store(self) -> BlobStore:
        """The reports store (``REPRO_REPORTS``)."""
        if self._store is None:
            from auditor.storage import open_store

            self._store = open_store(self.settings.reports)
        return self._store

    def runner(self, name: str | None = None) -> Any:
        """The runner called ``name`` (default: the settings' runner); an unknown name is ``BadInput``."""
        if self._runner is not None:
            return self._runner
        name = name or self.settings.runner
        if name not in self._runners:
            from auditor.rebuild.run import make_runner

            self._runners[name] = make_runner(name, self.settings)
        return self._runners[name]

    @property
    def signer(self) -> Any:
        """The configured signing key (``REPRO_SIGNING_KEY``), or None when reports are published unsigned."""
        if self._signer is _UNSET:
            from auditor.report.publish import signing_key

            self._signer = signing_key(self.settings)
        return self._signer

    def prepare(self, record: Any, diff: str | None, dest: Path) -> Any:
        """A workspace for a rebuild: the code at the recorded commit, the data verified."""
        if self._prepare is not None:
            return self._prepare(record, diff, dest, self.settings)
        from auditor.rebuild.workspace import prepare_workspace

        return prepare_workspace(record, diff, dest=dest, git_cache=self.settings.git_cache)

    def scratch(self, prefix: str) -> Path:
        """A fresh folder under the settings' work dir (the caller removes it)."""
        self.settings.work_dir.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.settings.work_dir))

    # -- the verbs: one call into a step each ----------------------------------------------------
    def audit(self, ref: str, options: AuditOptions | None = None, *, progress: Progress = quiet) -> AuditOutcome:
        """Audit one version (and publish it unless ``options.publish`` is False): the one door."""
        from auditor.steps import audit as audit_step
        from auditor.steps import publish

        options = options or AuditOptions()
        self.runner(options.runner)  # an unknown runner is the caller's error, said before anything else
        try:
            info = resolving(self, ref, progress)  # pinned: an alias may move while we work
        except InfrastructureError:
            raise
        except ReproError as exc:
            if not options.task:
                raise
            return AuditOutcome(ref=ref, result=None, error=str(exc))
        if not options.task:
            publish.preflight(self, info, publishing=options.publish)
        rebuild_step = None
        if options.replays_segments:
            from auditor.steps.segments import segment_step

            rebuild_step = segment_step(self, info, options)
        if not options.publish:
            return AuditOutcome(ref=info.ref, result=audit_step.audit_version(self, info, options, progress, rebuild_step))
        outcome = publish.publish_version(self, info, options, progress, rebuild_step)
        if outcome.publish_failure is not None and options.task:
            raise outcome.publish_failure
        return outcome

    def rebuild(self, ref: str, *, out_dir: Path, runner: str | None = None, progress: Progress = quiet) -> Any:
        from auditor.steps.rebuild import rebuild

        return rebuild(self, ref, out_dir=out_dir, runner=runner, progress=progress)

    def calibrate(self, ref: str, *, reruns: int = 5, same_seed: int = 2, runner: str | None = None, replace: bool = False,
                  progress: Progress = quiet) -> Any:
        from auditor.steps.calibrate import calibrate

        return calibrate(self, ref, reruns=reruns, same_seed=same_seed, runner=runner, replace=replace, progress=progress)

    # a calibration spread over workers (``auditor.steps.mapped``): a DAG's tasks, one door each
    def calibrate_plan(self, ref: str, *, reruns: int = 5, same_seed: int = 2, runner: str | None = None,
                       replace: bool = False, progress: Progress = quiet) -> CalibrationPlan:
        from auditor.steps.mapped import plan

        return plan(self, ref, reruns=reruns, same_seed=same_seed, runner=runner, replace=replace, progress=progress)

    def calibrate_plan_missing(self, refs: list[str], *, reruns: int = 5, same_seed: int = 2,
                               progress: Progress = quiet) -> list[CalibrationPlan]:
        """A plan for each version of ``refs`` with no stored calibration (a promotion gate's, before it compares)."""
        from auditor.steps.mapped import plan_missing

        return plan_missing(self, refs, reruns=reruns, same_seed=same_seed, progress=progress)

    def calibrate_rerun(self, planned: CalibrationPlan, item: PlannedRerun, *, progress: Progress = quiet) -> dict[str, Any]:
        from auditor.steps.mapped import rerun

        return rerun(self, planned, item, progress)

    def calibrate_check(self, planned: CalibrationPlan | list[CalibrationPlan], *, progress: Progress = quiet) -> Any:
        """Each plan's same-seed reruns judged and its floor stored; a list of plans gives the seed-varied reruns'
        tickets of them all (what a DAG maps its next reruns over)."""
        from auditor.steps.mapped import check

        if not isinstance(planned, list):
            return check(self, planned, progress)
        for each in planned:
            check(self, each, progress)
        return [ticket for each in planned for ticket in each.tickets("varied")]

    def calibrate_reduce(self, planned: CalibrationPlan | list[CalibrationPlan], *, progress: Progress = quiet) -> Any:
        """The plan's calibration stored (its bands returned); for a list of plans, ``{ref: bands}`` of each."""
        from auditor.steps.mapped import reduce

        if isinstance(planned, list):
            return {p.ref: reduce(self, p, progress) for p in planned}
        return reduce(self, planned, progress)

    def compare(self, candidate: str, incumbent: str, *, reruns: int = 5, metrics: list[str] | None = None,
                runner: str | None = None, calibrate_missing: bool = True, publish: bool = True,
                progress: Progress = quiet) -> Any:
        """Is ``candidate`` better than ``incumbent`` beyond seed noise? (``auditor.steps.compare``)"""
        from auditor.steps.compare import compare

        return compare(self, candidate, incumbent, reruns=reruns, metrics=metrics, runner=runner,
                       calibrate_missing=calibrate_missing, publish=publish, progress=progress)

    def adopt(self, ref: str, *, date: str | None = None, publish: bool = True, progress: Progress = quiet) -> Any:
        """A lineage assessment of a version trained without the SDK, published like an audit (``auditor.steps.adopt``)."""
        from auditor.steps.adopt import assess

        return assess(self, ref, date=date, publish=publish, progress=progress)

    def adopt_rebuild(self, ref: str, *, date: str | None = None, publish: bool = True, progress: Progress = quiet) -> Any:
        """Rebuild a plain-MLflow version whose lineage MLflow pinned, in the sandboxed runner (``repro-audit adopt --rebuild``)."""
        from auditor.steps.adopt import rebuild

        return rebuild(self, ref, date=date, publish=publish, progress=progress)

    def adopt_all(self, *, models: str | None = None, progress: Progress = quiet) -> Any:
        """Every version's lineage assessment, nothing rebuilt or written (``repro-audit adopt --assess-only``)."""
        from auditor.steps.adopt import assess_all

        return assess_all(self, models=models, progress=progress)

    def adopt_attach(self, ref: str, *, data: list[str], image: str | None = None, seed: int | None = None) -> dict[str, Any]:
        """Store and sign what an owner supplies after training (``repro-audit adopt REF --data ...``)."""
        from auditor.steps.adopt import attach

        return attach(self, ref, data=data, image=image, seed=seed)

    def sample(self, date: str, *, models: str | None = None) -> dict[str, Any]:
        from auditor.steps.nightly import sample

        return sample(self, date, models=models)

    def publish_summary(self, date: str, sample: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
        from auditor.steps.nightly import publish_summary

        return publish_summary(self, date, sample, results)

    def nightly(self, date: str, *, audit_run: str | None = None, progress: Progress = quiet) -> dict[str, Any]:
        from auditor.steps.nightly import nightly

        return nightly(self, date, audit_run=audit_run, progress=progress)

    def publish_night(self, date: str, sample: dict[str, Any] | None, results: list[dict[str, Any]], failure: str | None) -> dict[str, Any]:
        """The night's summary, or, when there is no ``sample`` (it failed with ``failure``), pages that say the night
        failed before auditing (``auditor.steps.nightly.publish_night``)."""
        from auditor.steps.nightly import publish_night

        return publish_night(self, date, sample, results, failure)

    def coverage(self, *, now: Any = None, write: bool = False) -> tuple[list[dict[str, Any]], str]:
        from auditor.steps.coverage import coverage

        return coverage(self, now=now, write=write)

    def production(self) -> list[dict[str, Any]]:
        """Does what serves under each production alias hash to the audited artifact? (``auditor.steps.production``)"""
        from auditor.steps.production import production_check

        return production_check(self)

    def retention(self, *, years: int | None = None, now: Any = None) -> dict[str, Any]:
        """What of each production or audited version will stop being reproducible, and when (``auditor.steps.retention``)."""
        from auditor.steps.retention import retention_check

        return retention_check(self, years=years, now=now)

    def ledger_anchors(self, location: str) -> list[Any]:
        from auditor.steps.publish import ledger_anchors

        return ledger_anchors(self, location)

    def preflight_store(self) -> None:
        from auditor.steps.publish import preflight_store

        preflight_store(self)
