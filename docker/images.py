"""Build the project's images where no public image registry is reachable, cached by their recipe's digest.

    python docker/images.py [--docker-host unix:///path/docker.sock] [base|trainer|airflow|postgres|redis|s3|stack]

Two images (and, for docker/compose.host.yaml, four more: below), each tagged with the digest of its recipe so a build is skipped when the engine already
holds that tag, and saved under the cache folder (``REPRO_IMAGE_CACHE``, default
``~/.cache/repro-audit/images``) so a fresh engine loads it instead of building it again:

- **the Debian base** (``repro-audit/debian-base:<digest12>``): a minimal bookworm root filesystem
  made by ``mmdebstrap`` from Debian's own packages (python3, python3-venv, git, ca-certificates,
  tini) and imported as an image. Its recipe is ``BASE_RECIPE`` below.
- **the CPU trainer** (``repro-audit/trainer:cpu-<digest12>``): the real ``docker/Dockerfile``,
  ``--target trainer``, ``BASE_IMAGE`` = the Debian base. Its Python packages come from a
  wheelhouse (a folder of wheels, cached too) served on 127.0.0.1 for the build only, with the exact
  versions this interpreter has installed (the auditor's own environment: the torch CPU wheel
  already on this machine's disk, MLflow, …), so nothing is downloaded twice and no wheel lands in
  a layer. The slow part, the ``trainer-deps`` stage (torch and every dependency), is cached by the
  digest of the base, the Dockerfile, pyproject.toml, the extras and the wheels, and saved under the
  cache folder; the trainer's own layers (the code, the README) are built on it with ``cache_from``
  in seconds, and its tag carries the digest of every file of the build context.

For the compose stack on a host with no public registry (docker/compose.host.yaml; ``stack`` builds all
and prints the ``REPRO_*_IMAGE`` lines it reads):

- **the CPU Airflow image** (``repro-audit/airflow:cpu-<digest12>``): ``--target airflow`` on the
  trainer, with the trainer's arguments repeated (its layers come from the cache) and Airflow installed
  from a second wheelhouse (``AIRFLOW_PIP_INSTALL_OPTIONS``, ``AIRFLOW_REQUIREMENTS``: the closure of
  ``repro-audit[mlflow,s3,airflow]`` and psycopg2 at this interpreter's versions, read for bookworm's
  Python) instead of the constraints file on GitHub; cached by the trainer's recipe, the DAGs and the wheels;
- **PostgreSQL, Redis and an S3 server** (``repro-audit/{postgres,redis,s3}:debian-<digest12>``):
  ``mmdebstrap`` root filesystems of Debian's ``postgresql`` / ``redis-server`` / python3 with a venv of
  moto's server (installed from a wheelhouse on loopback in a customize hook), each with its entrypoint
  from docker/ and its image config given at import (``SERVICE_RECIPES``).

``build_base`` and ``build_trainer`` (and ``build_airflow``, ``build_service``) return an ``Built`` (tag, image id, seconds, and whether it
came from the engine, the cache folder or a build); tests/fixtures/images.py calls them.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from auditor.rebuild.venv import locked  # one builder per cache entry (shared with the venv cache)

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "docker" / "Dockerfile"
#: what the trainer's build context holds (the Dockerfile's COPY sources), as Dockerfile.dockerignore says
CONTEXT = ("pyproject.toml", "requirements/dev.lock.txt", "README.md", "auditor")

BASE_REPOSITORY = "repro-audit/debian-base"
TRAINER_REPOSITORY = "repro-audit/trainer"
BASE_RECIPE = {
    "tool": "mmdebstrap",
    "suite": "bookworm",
    "variant": "minbase",
    "mirror": "http://deb.debian.org/debian",
    "include": ["python3", "python3-venv", "git", "ca-certificates", "tini"],
    # the files' timestamps in the tarball; the packages' own versions come from the mirror
    "source_date_epoch": 1700000000,
}
TORCH_VERSION = "2.13.0"
TRAINER_EXTRAS = "mlflow"
#: build-time wheels: the build backend the project's pyproject.toml names
BUILD_WHEELS = ("setuptools",)

Progress = Callable[[str], None]


def _quiet(_message: str) -> None:
    pass


@dataclass(frozen=True)
class Built:
    tag: str
    id: str
    seconds: float
    source: str  # "engine" (already there), "cache" (loaded from the cache folder) or "build"


def cache_dir() -> Path:
    root = os.environ.get("REPRO_IMAGE_CACHE") or str(Path.home() / ".cache" / "repro-audit" / "images")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _in_engine(client, tag: str):
    import docker

    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def _load(client, tarball: Path, tag: str):
    with open(tarball, "rb") as handle:
        client.images.load(handle)
    return client.images.get(tag)


def _save(image, tarball: Path) -> None:
    """``docker save`` into the cache folder, unless ``REPRO_IMAGE_CACHE_SAVE=0`` (CI: a machine whose cache
    starts empty and is thrown away, where writing 2 GB only costs time)."""
    if os.environ.get("REPRO_IMAGE_CACHE_SAVE", "1") == "0":
        return
    partial = tarball.with_suffix(".partial")
    with open(partial, "wb") as handle:
        for chunk in image.save(named=True):
            handle.write(chunk)
    partial.rename(tarball)


# -- the Debian base ------------------------------------------------------------------------------
def _engine_cache_or_make(client, tag: str, saved: Path, make: Callable[[], str], *, start: float,
                          scratch: Path | None = None, prune: str | None = None, progress: Progress = _quiet) -> Built:
    """``tag`` from the engine, else loaded from ``saved`` (its ``docker save`` in the cache folder), else made.

    ``make()`` puts ``tag`` into the engine and returns the source to report ("build", or "cache" when it
    only imported a cached root filesystem); the image is then saved to ``saved`` and ``scratch`` (the
    root filesystem ``make`` imported) removed. ``prune``, a glob in
    the cache folder, names this image's older saves, dropped once the new one is written. One builder
    per ``saved`` at a time (a lock beside it), so two sessions never make the same image twice.
    """
    found = _in_engine(client, tag)
    if found is not None:
        return Built(tag, found.id, time.monotonic() - start, "engine")
    with locked(saved.with_suffix(".lock")):
        if saved.exists():
            progress(f"loading {tag} from {saved}")
            image = _load(client, saved, tag)
            return Built(tag, image.id, time.monotonic() - start, "cache")
        source = make()
        image = client.images.get(tag)
        progress(f"saving {tag} to {saved}")
        _save(image, saved)
        if scratch is not None:
            scratch.unlink(missing_ok=True)
        if prune:
            for old in cache_dir().glob(prune):
                if old != saved:
                    old.unlink(missing_ok=True)
    return Built(tag, image.id, time.monotonic() - start, source)


def base_digest() -> str:
    return _digest(BASE_RECIPE)


def make_rootfs(dest: Path) -> None:
    """The base's root filesystem as a tarball, from Debian's packages (needs root and the mirror)."""
    mmdebstrap = shutil.which("mmdebstrap")
    if mmdebstrap is None:
        raise RuntimeError("mmdebstrap is not installed (apt-get install mmdebstrap; .ci/sysdeps does it)")
    r = BASE_RECIPE
    partial = dest.with_suffix(".partial.tar")
    argv = [
        mmdebstrap, f"--variant={r['variant']}", "--include=" + ",".join(r["include"]),
        "--aptopt=Acquire::Retries \"3\"", "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/locale/*",
        r["suite"], str(partial), r["mirror"],
    ]
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(r["source_date_epoch"])}
    result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    partial.rename(dest)


def build_base(client, *, progress: Progress = _quiet) -> Built:
    """The Debian base image, from the engine, the cache folder, or mmdebstrap (in that order).

    The cache keeps the imported image as ``docker save`` writes it, not the root filesystem: an
    import makes a new image id every time (its config carries the import's date), a load keeps
    the id, and the trainer's layer cache and recipe digest hang on that id.
    """
    start = time.monotonic()
    digest = base_digest()
    tag = f"{BASE_REPOSITORY}:{digest[:12]}"
    rootfs = cache_dir() / f"debian-base-{digest}.tar"

    def make() -> str:
        source = "cache"
        if not rootfs.exists():
            progress(f"making the Debian base with mmdebstrap ({BASE_RECIPE['suite']}, {', '.join(BASE_RECIPE['include'])})")
            make_rootfs(rootfs)
            source = "build"
        with open(rootfs, "rb") as handle:
            client.api.import_image_from_data(handle, repository=BASE_REPOSITORY, tag=digest[:12])
        return source

    return _engine_cache_or_make(client, tag, cache_dir() / f"debian-base-image-{digest}.tar", make, start=start,
                                 scratch=rootfs, progress=progress)


# -- the wheelhouse --------------------------------------------------------------------------------
#: Debian bookworm's python3, what the images run: a marker such as ``python_full_version < "3.11.3"``
#: can ask the image for a distribution this (newer) interpreter does not need, hence lacks
TARGET_PYTHON = "3.11.2"
#: such distributions, at an exact version (none of them has dependencies of its own)
TARGET_ONLY_PINS = {"async-timeout": "5.0.1"}


def _closure(root: str, extras: set[str], *, target: str | None = None) -> dict[str, str]:
    """Every distribution ``root[extras]`` needs, at the version this interpreter has installed.

    With ``target`` (a Python version), markers are read for that Python, and what it needs but this
    interpreter lacks comes from ``TARGET_ONLY_PINS``.
    """
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    python = {} if target is None else {"python_full_version": target, "python_version": ".".join(target.split(".")[:2])}
    pins: dict[str, str] = {}
    todo: list[tuple[str, frozenset[str]]] = [(root, frozenset(extras))]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, wanted = todo.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        if target is not None and canonicalize_name(name) in TARGET_ONLY_PINS:
            try:
                metadata.distribution(name)
            except metadata.PackageNotFoundError:
                pins[canonicalize_name(name)] = TARGET_ONLY_PINS[canonicalize_name(name)]
                continue
        dist = metadata.distribution(name)
        if name != root:
            pins[canonicalize_name(name)] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            environments = [{"extra": e, **python} for e in wanted] or [{"extra": "", **python}]
            if req.marker is not None and not any(req.marker.evaluate(env) for env in environments):
                continue
            if canonicalize_name(req.name) == canonicalize_name(root):
                todo.append((root, frozenset(req.extras)))  # a self-referencing extra, e.g. [all]
                continue
            todo.append((req.name, frozenset(req.extras)))
    return pins


def wheel_pins(extras: str = TRAINER_EXTRAS) -> dict[str, str]:
    from importlib import metadata

    pins = _closure("repro-audit", set(filter(None, extras.split(","))))
    pins.update(_closure("torch", set()))  # torch's own dependencies (the CPU build names no CUDA wheels)
    pins["torch"] = TORCH_VERSION

    for name in BUILD_WHEELS:
        pins[name] = metadata.version(name)
    return dict(sorted(pins.items()))


def wheelhouse(extras: str = TRAINER_EXTRAS, *, progress: Progress = _quiet) -> Path:
    """A folder of wheels for exactly ``wheel_pins(extras)`` (pip's configured indexes, once; then cached)."""
    return _wheel_folder(wheel_pins(extras), "wheels", progress=progress)


def _wheel_folder(pins: dict[str, str], prefix: str, *, progress: Progress = _quiet) -> Path:
    """A folder of wheels for exactly ``pins``, named by their digest, downloaded once."""
    folder = cache_dir() / f"{prefix}-{_digest(pins)[:16]}"
    with locked(folder.with_suffix(".lock")):
        if (folder / ".complete").exists():
            return folder
        progress(f"collecting {len(pins)} wheels into {folder}")
        partial = folder.with_suffix(".partial")
        shutil.rmtree(partial, ignore_errors=True)
        argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                "--python-version", f"{sys.version_info.major}.{sys.version_info.minor}",
                "-d", str(partial), *(f"{n}=={v}" for n, v in pins.items())]
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"pip download of the {prefix} failed:\n{result.stderr[-3000:]}")
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
        (folder / ".complete").write_text(json.dumps(pins, indent=1))
    return folder


@contextlib.contextmanager
def serve(folder: Path, port: int = 0) -> Iterator[str]:
    """``folder`` over HTTP on 127.0.0.1 (a pip --find-links page), for the length of a build.

    ``port`` is tried first (a busy one falls back to any free port: only the layer cache suffers).
    """
    handler = functools.partial(_QuietHandler, directory=str(folder))
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *_args) -> None:
        pass


# -- the CPU trainer -------------------------------------------------------------------------------
def _context_files(names: tuple[str, ...] = CONTEXT) -> list[Path]:
    files: list[Path] = [DOCKERFILE]
    for name in names:
        path = REPO / name
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
        else:
            files.append(path)
    return files


def context_tar(names: tuple[str, ...] = CONTEXT) -> bytes:
    """The build context: the Dockerfile and what Dockerfile.dockerignore lets through (auditor/, pyproject, README)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in _context_files(names):
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(REPO)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with open(path, "rb") as handle:
                tar.addfile(info, handle)
    return buf.getvalue()


DEPS_FILES = ("docker/Dockerfile", "pyproject.toml", "requirements/dev.lock.txt")
DEPS_REPOSITORY = "repro-audit/trainer-deps"


def _file_digests(paths) -> dict[str, str]:
    return {str(p.relative_to(REPO)): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def deps_digest(base_id: str, extras: str = TRAINER_EXTRAS) -> str:
    """The ``trainer-deps`` stage: the base, the Dockerfile, pyproject.toml, the extras and the wheels."""
    files = _file_digests(REPO / name for name in DEPS_FILES)
    return _digest({"base": base_id, "files": files, "extras": extras, "wheels": wheel_pins(extras), "target": "trainer-deps"})


def trainer_digest(base_id: str, extras: str = TRAINER_EXTRAS) -> str:
    """The trainer: its deps stage and every file of the build context (the code, the README)."""
    return _digest({"deps": deps_digest(base_id, extras), "files": _file_digests(_context_files()), "target": "trainer"})


def _stable_port(key: str) -> int:
    """A port derived from the wheelhouse, so the build argument (part of the layer cache key) repeats."""
    return 20000 + int(key[:8], 16) % 20000


def _build(client, *, target: str, tag: str, args: dict[str, str], cache_from: list[str],
           context: tuple[str, ...] = CONTEXT) -> None:
    import docker

    log: list[str] = []
    try:
        for chunk in client.api.build(
            fileobj=io.BytesIO(context_tar(context)), custom_context=True, dockerfile="docker/Dockerfile",
            target=target, buildargs=args, tag=tag, network_mode="host", rm=True, forcerm=True,
            decode=True, cache_from=cache_from or None,
        ):
            if "stream" in chunk:
                log.append(chunk["stream"])
            if "error" in chunk:
                raise RuntimeError(f"docker build of {tag} failed: {chunk['error']}\n{''.join(log)[-4000:]}")
    except docker.errors.APIError as exc:
        raise RuntimeError(f"docker build of {tag} failed: {exc}\n{''.join(log)[-4000:]}") from None


def build_trainer(client, base: Built, *, extras: str = TRAINER_EXTRAS, progress: Progress = _quiet) -> Built:
    """The CPU trainer from docker/Dockerfile on ``base``.

    The ``trainer-deps`` stage (torch and every dependency: the slow part) is cached by its digest,
    in the engine and as a saved image under the cache folder; the trainer's own layers (the code)
    are built on it with ``cache_from``, in seconds. ``source`` says where the deps stage came from.
    """
    start = time.monotonic()
    digest = trainer_digest(base.id, extras)
    tag = f"{TRAINER_REPOSITORY}:cpu-{digest[:12]}"
    found = _in_engine(client, tag)
    if found is not None:
        return Built(tag, found.id, time.monotonic() - start, "engine")
    deps = deps_digest(base.id, extras)
    deps_tag = f"{DEPS_REPOSITORY}:cpu-{deps[:12]}"
    saved = cache_dir() / f"trainer-deps-cpu-{deps}.tar"
    wheels = wheelhouse(extras, progress=progress)
    source = "engine"
    with locked(saved.with_suffix(".lock")), serve(wheels, port=_stable_port(wheels.name.split("-", 1)[1])) as url:
        args = {
            "BASE_IMAGE": base.tag,
            "TRAINER_EXTRAS": extras,
            "TORCH_VERSION": TORCH_VERSION,
            "PIP_INSTALL_OPTIONS": f"--no-index --find-links {url}",
        }
        if _in_engine(client, deps_tag) is None:
            if saved.exists():
                progress(f"loading {deps_tag} from {saved}")
                _load(client, saved, deps_tag)
                source = "cache"
            else:
                progress(f"building {deps_tag} (torch and the dependencies) from docker/Dockerfile on {base.tag}")
                _build(client, target="trainer-deps", tag=deps_tag, args=args, cache_from=[])
                progress(f"saving {deps_tag} to {saved}")
                _save(client.images.get(deps_tag), saved)
                for old in cache_dir().glob("trainer-deps-cpu-*.tar"):
                    if old != saved:
                        old.unlink(missing_ok=True)  # one deps stage kept: the newest
                source = "build"
        progress(f"building {tag} (the code) on {deps_tag}")
        _build(client, target="trainer", tag=tag, args=args, cache_from=[deps_tag])
    image = client.images.get(tag)
    return Built(tag, image.id, time.monotonic() - start, source)


# -- the Airflow image (CPU), for every Airflow component and MLflow -------------------------------
AIRFLOW_REPOSITORY = "repro-audit/airflow"
#: the project's extras the Airflow image holds on top of the trainer's: Airflow 3 and its providers, boto3
AIRFLOW_EXTRAS = "mlflow,s3,airflow"
#: what the stack needs beside them: the PostgreSQL driver of Airflow's metadata and MLflow's backend
AIRFLOW_DISTRIBUTIONS = ("psycopg2-binary",)
AIRFLOW_CONTEXT = (*CONTEXT, "dags", "plugins")  # the DAGs and the webhook plugin beside them


def airflow_pins(extras: str = TRAINER_EXTRAS) -> dict[str, str]:
    """The wheels the Airflow stage adds to the trainer's: exactly the versions this interpreter has installed.

    Where the default recipe reads Airflow's constraints file from GitHub (unreachable here), this is the
    wheelhouse build: the closure of ``repro-audit[AIRFLOW_EXTRAS]`` plus ``AIRFLOW_DISTRIBUTIONS``, minus
    what the trainer already holds.
    """
    from importlib import metadata

    from packaging.utils import canonicalize_name

    pins = _closure("repro-audit", set(AIRFLOW_EXTRAS.split(",")), target=TARGET_PYTHON)
    for name in AIRFLOW_DISTRIBUTIONS:
        pins.update(_closure(name, set(), target=TARGET_PYTHON))
        pins[canonicalize_name(name)] = metadata.version(name)
    trainer = wheel_pins(extras)
    return {name: version for name, version in sorted(pins.items()) if name not in trainer}


def airflow_digest(base: Built, extras: str = TRAINER_EXTRAS) -> str:
    """The Airflow image: the trainer's recipe, the Dockerfile, the DAGs and the added wheels.

    The trainer's digest, not its image id: a fresh engine rebuilds the trainer's thin layers (a new id
    every time), while the recipe, and so the saved Airflow image, stays the same.
    """
    files = _file_digests(_context_files(AIRFLOW_CONTEXT))
    return _digest({"trainer": trainer_digest(base.id, extras), "files": files, "wheels": airflow_pins(extras),
                    "target": "airflow"})


def build_airflow(client, base: Built, trainer: Built, *, extras: str = TRAINER_EXTRAS,
                  progress: Progress = _quiet) -> Built:
    """The CPU Airflow image (``--target airflow``) on ``trainer``, Airflow installed from a wheelhouse.

    The build repeats the trainer's arguments (same wheelhouse URL, so its layers come from the cache) and
    adds ``AIRFLOW_PIP_INSTALL_OPTIONS`` (both wheelhouses, ``--no-index``) and ``AIRFLOW_REQUIREMENTS``
    (every added distribution at its exact version). Saved under the cache folder like the deps stage.
    """
    start = time.monotonic()
    digest = airflow_digest(base, extras)
    tag = f"{AIRFLOW_REPOSITORY}:cpu-{digest[:12]}"

    def make() -> str:
        pins = airflow_pins(extras)
        wheels = wheelhouse(extras, progress=progress)
        added = _wheel_folder(pins, "airflow-wheels", progress=progress)
        deps_tag = f"{DEPS_REPOSITORY}:cpu-{deps_digest(base.id, extras)[:12]}"
        with serve(wheels, port=_stable_port(wheels.name.split("-", 1)[1])) as url, \
                serve(added, port=_stable_port(added.name.split("-", 2)[2])) as added_url:
            args = {
                "BASE_IMAGE": base.tag,
                "TRAINER_EXTRAS": extras,
                "TORCH_VERSION": TORCH_VERSION,
                "PIP_INSTALL_OPTIONS": f"--no-index --find-links {url}",
                "AIRFLOW_PIP_INSTALL_OPTIONS": f"--no-index --find-links {url} --find-links {added_url}",
                "AIRFLOW_REQUIREMENTS": " ".join(f"{name}=={version}" for name, version in pins.items()),
            }
            progress(f"building {tag} (Airflow {pins.get('apache-airflow', '?')}, {len(pins)} wheels) on {trainer.tag}")
            _build(client, target="airflow", tag=tag, args=args, cache_from=[deps_tag, trainer.tag],
                   context=AIRFLOW_CONTEXT)
        return "build"

    # one Airflow image kept in the cache folder: the newest
    return _engine_cache_or_make(client, tag, cache_dir() / f"airflow-cpu-{digest}.tar", make, start=start,
                                 prune="airflow-cpu-*.tar", progress=progress)


# -- the stack's services from Debian's packages: PostgreSQL, Redis, an S3-compatible server ---------
SERVICE_REPOSITORY = "repro-audit/{name}"
_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: each image: Debian packages (mmdebstrap, like the base), an entrypoint from docker/, Python wheels for a
#: venv (exact installed versions, from a wheelhouse on loopback) and the image config (``docker import --change``)
SERVICE_RECIPES: dict[str, dict] = {
    "postgres": {
        "include": ["postgresql", "tini"],
        "entrypoint": "docker/postgres-entrypoint.sh",
        "changes": [f"ENV {_PATH}", "ENV LANG=C.UTF-8", "ENV PGDATA=/var/lib/postgresql/data",
                    'ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/repro-entrypoint"]', "CMD []"],
    },
    "redis": {
        "include": ["redis-server", "tini"],
        "entrypoint": "docker/redis-entrypoint.sh",
        "changes": [f"ENV {_PATH}", "ENV LANG=C.UTF-8", "WORKDIR /data",
                    'ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/repro-entrypoint"]',
                    'CMD ["redis-server"]'],
    },
    # moto in server mode: S3's API (versioning, Object Lock) in memory; MinIO's image is not reachable here
    "s3": {
        "include": ["python3", "python3-venv", "ca-certificates", "tini"],
        "entrypoint": "docker/s3-entrypoint.sh",
        # moto[s3] and what its server mode imports (moto[server] would add every other service's extras)
        "venv": {"root": "moto", "extras": ["s3"], "also": ["flask", "flask-cors"]},
        "changes": [f"ENV {_PATH}", "ENV LANG=C.UTF-8", "USER 65534:65534", "WORKDIR /tmp",
                    'ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/repro-entrypoint"]', "CMD []"],
    },
}


def _venv_pins(spec: dict) -> dict[str, str]:
    from importlib import metadata

    from packaging.utils import canonicalize_name

    pins = _closure(spec["root"], set(spec.get("extras", [])), target=TARGET_PYTHON)
    for name in spec.get("also", []):
        pins.update(_closure(name, set(), target=TARGET_PYTHON))
        pins[canonicalize_name(name)] = metadata.version(name)
    pins[canonicalize_name(spec["root"])] = metadata.version(spec["root"])
    return dict(sorted(pins.items()))


def service_recipe(name: str) -> dict:
    """The whole recipe of a service image, the entrypoint's bytes and the venv's wheels included."""
    r = SERVICE_RECIPES[name]
    recipe = {**{k: BASE_RECIPE[k] for k in ("tool", "suite", "variant", "mirror", "source_date_epoch")},
              "name": name, "include": r["include"], "changes": r["changes"],
              "entrypoint": hashlib.sha256((REPO / r["entrypoint"]).read_bytes()).hexdigest()}
    if "venv" in r:
        recipe["venv"] = {"spec": r["venv"], "wheels": _venv_pins(r["venv"])}
    return recipe


def _make_service_rootfs(name: str, dest: Path, *, progress: Progress) -> None:
    mmdebstrap = shutil.which("mmdebstrap")
    if mmdebstrap is None:
        raise RuntimeError("mmdebstrap is not installed (apt-get install mmdebstrap; .ci/sysdeps does it)")
    r, recipe = SERVICE_RECIPES[name], service_recipe(name)
    entry = REPO / r["entrypoint"]
    hooks = [f"--customize-hook=upload {entry} /usr/local/bin/repro-entrypoint",
             '--customize-hook=chmod 0755 "$1/usr/local/bin/repro-entrypoint"']
    with contextlib.ExitStack() as stack:
        if "venv" in recipe:
            pins = recipe["venv"]["wheels"]
            folder = _wheel_folder(pins, f"{name}-wheels", progress=progress)
            url = stack.enter_context(serve(folder))
            spec = recipe["venv"]["spec"]
            extras = ",".join(spec.get("extras", []))
            wanted = [f"{spec['root']}[{extras}]=={pins[spec['root']]}" if extras else f"{spec['root']}=={pins[spec['root']]}"]
            wanted += [f"{n}=={v}" for n, v in pins.items() if n != spec["root"]]
            hooks += ['--customize-hook=chroot "$1" python3 -m venv /opt/venv',
                      f'--customize-hook=chroot "$1" /opt/venv/bin/pip install -q --no-cache-dir --disable-pip-version-check '
                      f'--no-compile --no-index --find-links {url} ' + " ".join(f"'{w}'" for w in wanted)]
        partial = dest.with_suffix(".partial.tar")
        argv = [
            mmdebstrap, f"--variant={recipe['variant']}", "--include=" + ",".join(recipe["include"]),
            "--aptopt=Acquire::Retries \"3\"", "--dpkgopt=path-exclude=/usr/share/doc/*",
            "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/locale/*",
            *hooks, recipe["suite"], str(partial), recipe["mirror"],
        ]
        env = {**os.environ, "SOURCE_DATE_EPOCH": str(recipe["source_date_epoch"])}
        result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"mmdebstrap of the {name} image failed ({result.returncode}):\n{result.stderr[-3000:]}")
    partial.rename(dest)


def build_service(client, name: str, *, progress: Progress = _quiet) -> Built:
    """A service image (``postgres``, ``redis``, ``s3``) from Debian's packages: engine, cache folder or mmdebstrap."""
    start = time.monotonic()
    recipe = service_recipe(name)
    digest = _digest(recipe)
    repository = SERVICE_REPOSITORY.format(name=name)
    tag = f"{repository}:debian-{digest[:12]}"
    rootfs = cache_dir() / f"{name}-rootfs-{digest}.tar"

    def make() -> str:
        progress(f"making the {name} image with mmdebstrap ({', '.join(recipe['include'])})")
        _make_service_rootfs(name, rootfs, progress=progress)
        with open(rootfs, "rb") as handle:
            client.api.import_image_from_data(handle, repository=repository, tag=f"debian-{digest[:12]}",
                                              changes=recipe["changes"])
        return "build"

    return _engine_cache_or_make(client, tag, cache_dir() / f"{name}-image-{digest}.tar", make, start=start,
                                 scratch=rootfs, prune=f"{name}-image-*.tar", progress=progress)


def build_stack(client, *, progress: Progress = _quiet) -> dict[str, Built]:
    """Every image compose.host.yaml names: the Airflow image (on the base and the trainer) and the services."""
    built = {"base": build_base(client, progress=progress)}
    built["trainer"] = build_trainer(client, built["base"], progress=progress)
    built["airflow"] = build_airflow(client, built["base"], built["trainer"], progress=progress)
    for name in SERVICE_RECIPES:
        built[name] = build_service(client, name, progress=progress)
    return built


def stack_env(built: dict[str, Built]) -> dict[str, str]:
    """The image variables compose.host.yaml reads."""
    return {"REPRO_AIRFLOW_IMAGE": built["airflow"].tag, "REPRO_POSTGRES_IMAGE": built["postgres"].tag,
            "REPRO_REDIS_IMAGE": built["redis"].tag, "REPRO_S3_IMAGE": built["s3"].tag}


def _client(docker_host: str | None):
    import docker

    return docker.DockerClient(base_url=docker_host, timeout=600) if docker_host else docker.from_env(timeout=600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="?", choices=("base", "trainer", "airflow", "stack", *SERVICE_RECIPES),
                        default="trainer")
    parser.add_argument("--docker-host", default=os.environ.get("DOCKER_HOST"))
    parser.add_argument("--extras", default=TRAINER_EXTRAS)
    ns = parser.parse_args(argv)
    client = _client(ns.docker_host)
    if ns.what in SERVICE_RECIPES:
        built = build_service(client, ns.what, progress=print)
        print(f"{ns.what} {built.tag} {built.id} ({built.source}, {built.seconds:.1f}s)")
        return 0
    if ns.what == "stack":
        stack = build_stack(client, progress=print)
        for name, built in stack.items():
            print(f"{name} {built.tag} {built.id} ({built.source}, {built.seconds:.1f}s)")
        print("\n".join(f"{k}={v}" for k, v in stack_env(stack).items()))
        return 0
    base = build_base(client, progress=print)
    print(f"base {base.tag} {base.id} ({base.source}, {base.seconds:.1f}s)")
    if ns.what in ("trainer", "airflow"):
        trainer = build_trainer(client, base, extras=ns.extras, progress=print)
        print(f"trainer {trainer.tag} {trainer.id} ({trainer.source}, {trainer.seconds:.1f}s)")
    if ns.what == "airflow":
        airflow = build_airflow(client, base, trainer, extras=ns.extras, progress=print)
        print(f"airflow {airflow.tag} {airflow.id} ({airflow.source}, {airflow.seconds:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["Built", "build_airflow", "build_base", "build_service", "build_stack", "build_trainer", "stack_env"]
