"""Reconstructed environments: the recorded package set, recreated in a virtual environment with uv.

When a record names no image, the process runner rebuilds in a virtual environment holding the
exact versions the record lists (``environment.packages``), instead of the auditor's own: a model
trained six months ago under other package versions is then rebuilt under those versions, not
today's. Packages installed from a local folder (``environment.local_packages``) are installed
from their recorded path again (editable when they were).

The environment is cached by the digest of what it is made from (interpreter version and package
set: :func:`lock_digest`) under ``REPRO_VENV_CACHE``; a second rebuild of a version trained in the
same environment reuses it. uv installs with ``--no-deps`` (the set is already complete) and
hard-links files from its own cache, so a cached wheel costs no copy; the wheels come from
``REPRO_FIND_LINKS`` (folders of wheels or pages of links, e.g. the torch CPU wheel already on the
machine) and ``REPRO_INDEX_URL`` when set, else from uv's default index.

What cannot be recreated is never papered over: a package no index holds is left out (the rebuild's
own record then lacks it, so the drift table lists it under *removed*), and an interpreter version
uv cannot find is replaced by the auditor's own (the drift table shows ``python``). Each is also
written at the top of the rebuild's log. uv is never allowed to download an interpreter.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from auditor.digests import sha256_hex
from auditor.errors import InfrastructureError
from auditor.settings import REBUILD_ENV

if TYPE_CHECKING:
    from auditor.lineage.record import EnvironmentInfo

#: bumped when the layout of a cached environment changes
LAYOUT = 1
_UV_TIMEOUT_S = 1800


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _python_version(text: str | None) -> str | None:
    """``3.11.7`` from what the SDK recorded (``3.11.7`` or ``3.11.7 (main, …) [GCC …]``)."""
    if not text:
        return None
    match = re.match(r"\s*(\d+\.\d+(?:\.\d+)?)", text)
    return match.group(1) if match else None


def lock_digest(env: EnvironmentInfo) -> str:
    """The digest a reconstructed environment is cached under: interpreter version and package set."""
    local = {
        _normal(name): {"path": p.path, "editable": p.editable, "tree_digest": p.tree_digest}
        for name, p in sorted(env.local_packages.items())
    }
    body = {
        "layout": LAYOUT,
        "python": _python_version(env.python),
        "packages": {_normal(k): v for k, v in sorted(env.packages.items())},
        "local": local,
    }
    return sha256_hex(json.dumps(body, sort_keys=True).encode())


@dataclass(frozen=True)
class Reconstructed:
    """A recreated environment: its interpreter, and what could not be recreated (name -> why)."""

    python: Path
    digest: str
    missing: dict[str, str] = field(default_factory=dict)
    interpreter_note: str | None = None
    seconds: float = 0.0
    cached: bool = False

    def notes(self) -> list[str]:
        lines = [f"reconstructed environment {self.digest[:12]} ({'cached' if self.cached else 'built'}, {self.seconds:.1f}s): {self.python}"]
        if self.interpreter_note:
            lines.append(f"not recreated: {self.interpreter_note}")
        lines += [f"not recreated: {name}: {why}" for name, why in sorted(self.missing.items())]
        return lines


def pip_find_links(env: dict[str, str] | None = None) -> list[str]:
    """The wheel folders pip is configured with (``PIP_FIND_LINKS``, then pip.conf's ``find-links``).

    uv does not read pip's configuration; a machine that keeps its wheels (the torch CPU build, say)
    in a folder pip is pointed at gets the same folder for reconstructed environments, unless
    ``REPRO_FIND_LINKS`` says otherwise.
    """
    import configparser

    env = dict(os.environ) if env is None else env
    links: list[str] = []
    links += (env.get("PIP_FIND_LINKS") or "").split()
    files = [Path("/etc/pip.conf"), Path("/etc/xdg/pip/pip.conf"), Path.home() / ".config" / "pip" / "pip.conf",
             Path.home() / ".pip" / "pip.conf"]
    for path in files:
        parser = configparser.ConfigParser()
        try:
            parser.read(path)
        except (configparser.Error, OSError):
            continue
        for section in ("global", "install"):
            if parser.has_option(section, "find-links"):
                links += parser.get(section, "find-links").split()
    return list(dict.fromkeys(link for link in links if link))


def find_uv() -> str:
    """uv next to this interpreter (installed with the project), else the uv package's binary, else on PATH."""
    beside = Path(sys.executable).with_name("uv")
    if beside.exists():
        return str(beside)
    try:  # the uv distribution knows where its binary is, wherever its scripts went
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("uv")
    if found is None:
        raise InfrastructureError(
            "uv is needed to reconstruct the recorded environment and is not installed",
            hint=f"pip install uv, or set {REBUILD_ENV.name}=auditor to rebuild in the auditor's environment",
        )
    return found


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """One builder per cache entry at a time, across processes (an exclusive ``flock`` on ``path``)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Reconstructor:
    """Makes (or finds) the environment a record lists, under ``cache``."""

    def __init__(self, cache: Path, *, find_links: Sequence[str] = (), index_url: str | None = None, uv: str | None = None) -> None:
        self.cache = Path(cache)
        self.find_links = [f for f in find_links if f]
        self.index_url = index_url
        self._uv = uv

    @property
    def uv(self) -> str:
        if self._uv is None:
            self._uv = find_uv()
        return self._uv

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "VIRTUAL_ENV", "PYTHONPATH"))}
        env["UV_PYTHON_DOWNLOADS"] = "never"  # an interpreter uv cannot find is drift, never a download
        env["UV_NO_PROGRESS"] = "1"
        return env

    def _sources(self) -> list[str]:
        args: list[str] = []
        for link in self.find_links:
            args += ["--find-links", link]
        if self.index_url:
            args += ["--index-url", self.index_url]
        return args

    def reconstruct(self, env: EnvironmentInfo) -> Reconstructed:
        digest = lock_digest(env)
        folder = self.cache / digest[:32]
        start = time.monotonic()
        with locked(self.cache / f"{digest[:32]}.lock"):
            manifest = folder / "repro-reconstructed.json"
            if manifest.exists():
                facts = json.loads(manifest.read_text())
                return Reconstructed(python=folder / "bin" / "python", digest=digest, missing=facts["missing"],
                                     interpreter_note=facts.get("interpreter_note"), seconds=time.monotonic() - start, cached=True)
            # built in place (a venv's scripts name their folder); the manifest, written last, marks it complete
            shutil.rmtree(folder, ignore_errors=True)
            note = self._venv(folder, _python_version(env.python))
            missing = self._install(folder, env)
            partial = manifest.with_suffix(".partial")
            partial.write_text(json.dumps({"missing": missing, "interpreter_note": note}, indent=1))
            partial.rename(manifest)
        return Reconstructed(python=folder / "bin" / "python", digest=digest, missing=missing, interpreter_note=note,
                             seconds=time.monotonic() - start)

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(argv, env=self._env(), capture_output=True, text=True, timeout=_UV_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InfrastructureError(f"{' '.join(argv[:3])} … failed: {exc}") from None

    def _venv(self, folder: Path, version: str | None) -> str | None:
        """Make the venv with the recorded interpreter version; the auditor's own when uv finds none."""
        note = None
        if version:
            result = self._run([self.uv, "venv", "-q", "--python", version, str(folder)])
            if result.returncode == 0:
                return None
            note = f"python {version}: no such interpreter on this machine (used {sys.version.split()[0]}, the auditor's)"
        result = self._run([self.uv, "venv", "-q", "--python", sys.executable, str(folder)])
        if result.returncode != 0:
            raise InfrastructureError(f"uv venv {folder} failed: {result.stderr[-2000:]}")
        return note if version else "python: the record names no interpreter version (used the auditor's)"

    def _install(self, folder: Path, env: EnvironmentInfo) -> dict[str, str]:
        """Install the recorded set; what cannot be installed is left out and named (name -> why)."""
        python = str(folder / "bin" / "python")
        local = {_normal(name): p for name, p in env.local_packages.items()}
        pins = [f"{name}=={version}" for name, version in sorted(env.packages.items()) if _normal(name) not in local]
        missing: dict[str, str] = {}
        base = [self.uv, "pip", "install", "-q", "--python", python, "--no-deps", "--link-mode=hardlink", *self._sources()]
        if pins:
            result = self._run([*base, *pins])
            if result.returncode != 0:
                for pin in pins:  # which ones: one at a time (only on this failure path)
                    one = self._run([*base, pin])
                    if one.returncode != 0:
                        missing[pin.split("==")[0]] = _why(one.stderr, pin)
        for name, package in sorted(local.items()):
            path = Path(package.path) if package.path else None
            if path is None or not path.exists():
                missing[name] = f"installed from {package.path}, which no longer exists"
                continue
            result = self._run([*base, *(["-e"] if package.editable else []), str(path)])
            if result.returncode != 0:
                missing[name] = _why(result.stderr, str(path))
        return missing


def _why(stderr: str, what: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    detail = next((line for line in lines if "not found" in line or "No solution" in line or "error" in line.lower()), lines[-1] if lines else "")
    return f"{what} could not be installed: {detail[:300]}"
