"""The auditor's own files: what the git capture, the local-package digest and the tracing leave out.

Under the README's defaults the auditor keeps its state inside the project it records
(``REPRO_HOME=.repro``, the SQLite registry ``.repro/mlflow.db``, MLflow's local artifact root
``./mlruns``, ``reports/``). None of it is the user's code, so a clean tree with those folders in it
is recorded clean even when the user's ``.gitignore`` does not list them. Python's ``__pycache__``
folders are derived files too and are left out for the same reason.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from auditor import settings as _settings

#: names the auditor (or MLflow on the auditor's default URIs) creates in the folder it runs from
OWN_NAMES = (".repro", "mlruns", "mlartifacts", _settings.MLFLOW_DB)
#: derived files that are never anyone's source
DERIVED_DIRS = ("__pycache__",)


def _sqlite_path(uri: str | None) -> Path | None:
    if uri and uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///") :])
    return None


def own_locations(env: Mapping[str, str] | None = None, *, cwd: Path | None = None) -> list[Path]:
    """Absolute paths the auditor writes on its own account: REPRO_HOME, its registry, reports, snapshots, mlruns.

    Relative settings are taken relative to ``cwd`` (default: the current folder), as the auditor does.
    Never raises: a malformed setting falls back to its default (capture must not fail on it).
    """
    if env is None or env is os.environ:  # this process's configuration: the environment over the configuration file
        from auditor.errors import BadInput

        try:
            env = _settings.configured()
        except BadInput:  # a broken file is said where settings are resolved; capture goes on without it
            env = os.environ
    base = (cwd or Path.cwd()).absolute()
    found: list[Path] = [base / name for name in OWN_NAMES]
    home = Path(_settings.HOME.get_or_default(env))
    found.append(home)
    for setting in (_settings.SNAPSHOT_STORE, _settings.REPORTS):
        raw = setting.raw(env)
        if raw and "://" not in raw:
            found.append(Path(raw))
    if not _settings.REPORTS.raw(env):
        found.append(Path(str(_settings.REPORTS.default)))
    for uri in (_settings.TRACKING_URI.raw(env), _settings.REGISTRY_URI.raw(env)):
        path = _sqlite_path(uri)
        if path is not None:
            found.append(path)
    out: list[Path] = []
    for path in found:
        path = path if path.is_absolute() else base / path
        path = Path(os.path.normpath(path))
        if path not in out:
            out.append(path)
    return out


def candidate_excludes(top: Path, env: Mapping[str, str] | None = None, *, cwd: Path | None = None, project: Path | None = None) -> list[str]:
    """The auditor's folders inside the repository ``top``, as repository-relative paths.

    Its default names at the root, in the project folder and in the current folder, and every
    configured location (REPRO_HOME, the snapshot store, reports, a SQLite registry) that lies inside
    the repository. The caller drops those that hold tracked files: what the user committed is code.
    """
    top = Path(os.path.normpath(top.absolute()))
    bases = [top, *(Path(os.path.normpath(p.absolute())) for p in (project, cwd) if p is not None)]
    paths = [base / name for base in bases for name in OWN_NAMES]
    for base in bases[1:] or [top]:
        paths += own_locations(env, cwd=base)
    paths += own_locations(env, cwd=cwd)
    out: list[str] = []
    for path in paths:
        try:
            rel = path.relative_to(top)
        except ValueError:
            continue  # outside the repository: git never sees it
        if rel.parts and rel.as_posix() not in out:
            out.append(rel.as_posix())
    return out


#: git pathspecs that leave every derived ``__pycache__`` folder out
DERIVED_PATHSPECS = tuple(f":(exclude,glob)**/{name}/**" for name in DERIVED_DIRS)


def is_own_relpath(rel: str) -> bool:
    """Whether a repository-relative path lies in one of the auditor's folders or a ``__pycache__``."""
    parts = Path(rel).parts
    return any(part in OWN_NAMES or part in DERIVED_DIRS for part in parts)
