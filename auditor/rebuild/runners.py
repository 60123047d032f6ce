"""Runners: run a recorded entry point somewhere and say how it went.

One small interface, ``Runner.run(spec) -> RunOutcome``, two implementations:
``ProcessRunner`` here (a subprocess in the auditor's own interpreter) and
``DockerRunner`` in ``runners_docker`` (a locked-down container, image pinned by
digest). The runner owns the *path* half of the entry-point contract
(``REPRO_OUTPUT_DIR``, ``REPRO_DATA_<NAME>``, ``REPRO_CONFIG``, ``REPRO_REBUILD``)
because only it knows where those paths are as the training script sees them;
everything else (seeds, thread pins) arrives ready-made in ``spec.env``.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

from auditor import contract
from auditor.contract import LOG_FILE
from auditor.digests import SHA256_DIGEST
from auditor.errors import BadInput, InfrastructureError, InputUnrecoverable
from auditor.settings import IMAGE_DIGEST, RUNNER

if TYPE_CHECKING:
    from auditor.lineage.record import EnvironmentInfo
    from auditor.rebuild.venv import Reconstructor
    from auditor.rebuild.warm import WarmProcess

TAIL_CHARS = 8000
# Only these parent variables reach a rebuild: a training script never sees the
# auditor's cloud credentials, tracking URIs or tokens.
ENV_ALLOWLIST = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")


@dataclass(frozen=True)
class ImageRef:
    """A container image as recorded: a reference and, to be usable, its digest."""

    ref: str
    digest: str | None = None

    def pinned_digest(self) -> str:
        """The recorded ``sha256:…`` digest; ``BadInput`` when only a tag was recorded."""
        digest = self.digest
        if digest is None and "@" in self.ref:
            digest = self.ref.rsplit("@", 1)[1]
        elif digest is None and SHA256_DIGEST.fullmatch(self.ref):
            digest = self.ref  # an image id on its own is as immutable as a digest
        if digest is None:
            raise BadInput(
                f"image {self.ref!r} is recorded by tag only; a tag can move, so it cannot be rebuilt",
                hint=f"record the digest ({IMAGE_DIGEST.name}, or ref@sha256:…) at training time",
            )
        if not SHA256_DIGEST.fullmatch(digest):
            raise BadInput(f"image {self.ref!r} has digest {digest!r}, expected sha256:<64 hex>")
        return digest

    @classmethod
    def from_environment(cls, env: EnvironmentInfo) -> ImageRef | None:
        """The image named by a record's environment section, or None when it names none."""
        if not env.image_ref and not env.image_digest:
            return None
        return cls(ref=env.image_ref or env.image_digest or "", digest=env.image_digest)


@dataclass(frozen=True)
class AcceleratorRequest:
    """What the rebuild needs besides CPUs; ``count=-1`` means every visible device."""

    kind: str = "gpu"
    count: int = 1
    model: str | None = None

    @classmethod
    def from_environment(cls, env: EnvironmentInfo) -> AcceleratorRequest | None:
        """The accelerator a record's environment used, or None for a CPU run."""
        if not env.accelerator or env.accelerator_count <= 0:
            return None
        return cls(kind="gpu", count=env.accelerator_count, model=env.accelerator)


@dataclass(frozen=True)
class RunSpec:
    """Everything a runner needs; paths are host paths, the runner maps them."""

    argv: list[str]
    cwd: Path  # the project directory inside the workspace
    output_dir: Path
    env: Mapping[str, str] = field(default_factory=dict)  # REPRO_SEED, thread pins, …
    data: Mapping[str, Path] = field(default_factory=dict)  # name -> materialised, verified snapshot dir
    config_file: Path | None = None  # the resolved config as JSON
    timeout_s: float = 3600.0
    image: ImageRef | None = None  # required by the Docker runner, ignored by the process runner
    accelerator: AcceleratorRequest | None = None
    log_path: Path | None = None  # default: output_dir / rebuild.log
    environment: EnvironmentInfo | None = None  # the recorded one: what a reconstructed environment is made from
    # False: no network at all. The process runner starts the child in a network namespace of its own
    # (util-linux `unshare`; loopback down too) and refuses to run it where that cannot be made; the Docker
    # runner always runs with network_mode="none".
    network: bool = True
    # True: a fresh interpreter, never a fork of a warm worker (auditor.rebuild.warm). For the runs that measure a
    # process's own noise (same-seed reruns, the deterministic reruns that verify a noise claim): forks of one worker
    # share its heap layout, so what varies with addresses between fresh processes (the order of a set of objects,
    # an array's alignment) would agree among them and the floor would come out narrower than the training's
    fresh: bool = False

    @property
    def log_file(self) -> Path:
        return self.log_path or self.output_dir / LOG_FILE


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended. ``exit_code`` is negative when a signal ended the process."""

    exit_code: int
    wall_s: float
    log: str
    log_path: Path
    timed_out: bool = False
    accelerator_s: float | None = None  # device-seconds; None on CPU
    warm: bool = False  # forked from a warm worker (``auditor.rebuild.warm``), not started as a fresh interpreter

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def log_tail(self) -> str:
        return self.log[-TAIL_CHARS:]


class Runner(Protocol):
    """Runs one ``RunSpec``. Raises ``BadInput``/``InputUnrecoverable`` for an unusable spec and
    ``InfrastructureError`` when the machinery fails; a script that fails is an outcome, not an error."""

    name: str

    def run(self, spec: RunSpec) -> RunOutcome: ...


def contract_env(*, output_dir: str, data: Mapping[str, str], config_file: str | None) -> dict[str, str]:
    """The path variables of the entry-point contract, as the script will see them (:func:`auditor.contract.path_env`)."""
    try:
        return contract.path_env(output_dir=output_dir, data=data, config_file=config_file)
    except ValueError as exc:
        raise BadInput(str(exc), hint="rename one of them") from None


def accelerator_seconds(spec: RunSpec, wall_s: float) -> float | None:
    """Device-seconds billed to a run: wall time times devices requested (all visible counts as one)."""
    if spec.accelerator is None:
        return None
    return wall_s * max(spec.accelerator.count, 1)


def read_log(path: Path) -> str:
    """The captured log as text (undecodable bytes replaced, never raised), redacted, and the file with it:
    the log stays beside the rebuild's outputs, and user code prints whatever it holds."""
    from auditor.lineage.redact import redact_text

    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    redacted = redact_text(text)
    if redacted != text:
        path.write_text(redacted, encoding="utf-8")
    return redacted


@functools.cache
def no_network_prefix() -> tuple[str, ...] | None:
    """The argv prefix that starts a command with no network (a network namespace of its own), or None where
    this host cannot make one. Root needs only ``unshare --net``; another user maps itself to root in a user
    namespace of its own first (``--map-root-user``), where the kernel allows unprivileged user namespaces.
    Probed once per process by running ``true`` under it: a maintained tool, not hand-written clone() calls."""
    import shutil

    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    prefix = (unshare, "--net") if os.geteuid() == 0 else (unshare, "--map-root-user", "--net")
    try:
        ok = subprocess.run([*prefix, "true"], capture_output=True, timeout=10).returncode == 0  # noqa: S603
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return prefix if ok else None


class ProcessRunner:
    """A subprocess with a clean env and a hard timeout, in a reconstructed or the auditor's environment.

    With a ``reconstructor`` (``REPRO_REBUILD_ENV=recorded``) a record that names no
    image is rebuilt in a virtual environment recreated from its recorded packages
    (:mod:`auditor.rebuild.venv`); what could not be recreated is written at the top of the log
    and shows in the drift table. Without one (``REPRO_REBUILD_ENV=auditor``, the default), or when the record
    names an image (the auditor then runs inside it), ``python``/``python3`` as ``argv[0]`` means
    this interpreter (``sys.executable``), not whatever ``python`` is first on PATH. The child
    leads its own process group so that a timeout also ends DataLoader workers and other grandchildren.
    """

    name = "process"

    def __init__(self, *, kill_grace_s: float = 5.0, reconstructor: Reconstructor | None = None, warm: bool = True) -> None:
        self.kill_grace_s = kill_grace_s
        self.reconstructor = reconstructor
        self.warm = warm  # fork ``python SCRIPT`` rebuilds from a warm worker (auditor.rebuild.warm; REPRO_WARM_REBUILD)

    def interpreter(self, spec: RunSpec) -> tuple[str, list[str]]:
        """The Python the rebuild runs under, and lines about how it was chosen (for the log)."""
        env = spec.environment
        if self.reconstructor is None or spec.image is not None or env is None or not env.packages:
            return sys.executable, []
        made = self.reconstructor.reconstruct(env)
        return str(made.python), made.notes()

    def environment(self, spec: RunSpec, python: str | None = None) -> dict[str, str]:
        """The child's full environment: allowlisted parent variables, the spec's, the contract's."""
        env = {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ}
        bin_dir = str(Path(python or sys.executable).parent)
        env["PATH"] = os.pathsep.join(p for p in (bin_dir, env.get("PATH", "")) if p)
        if python is not None and python != sys.executable:
            env["VIRTUAL_ENV"] = str(Path(python).parent.parent)
        env["PYTHONUNBUFFERED"] = "1"  # the log keeps stdout/stderr order, and a killed run keeps its last lines
        env.update(spec.env)
        env.update(
            contract_env(
                output_dir=str(spec.output_dir.resolve()),
                data={name: str(Path(path).resolve()) for name, path in spec.data.items()},
                config_file=str(spec.config_file.resolve()) if spec.config_file else None,
            )
        )
        return env

    def run(self, spec: RunSpec) -> RunOutcome:
        """Run ``spec.argv`` from ``spec.cwd``; the log goes to ``spec.log_file``."""
        if not spec.argv:
            raise BadInput("the entry point is empty", hint="record code.entrypoint, e.g. ['python', 'train.py']")
        if not spec.cwd.is_dir():
            raise InputUnrecoverable(f"project directory {spec.cwd} does not exist", hint="check code.subdir in the record")
        python, notes = self.interpreter(spec)
        argv = list(spec.argv)
        if argv[0] in {"python", "python3"}:
            argv[0] = python
        prefix: tuple[str, ...] = ()
        if not spec.network:
            prefix = _no_network_or_raise(spec)
            notes = [*notes, "no network: a network namespace of its own (unshare --net)"]
        spec.output_dir.mkdir(parents=True, exist_ok=True)
        spec.log_file.parent.mkdir(parents=True, exist_ok=True)
        env = self.environment(spec, python)
        timed_out = False
        start = time.monotonic()
        with open(spec.log_file, "wb") as log:
            for line in notes:
                log.write(f"[repro-audit: {line}]\n".encode())
            log.flush()
            proc = self._start(spec, prefix, python, argv, env, log)
            follower = LogFollower(spec.log_file)
            try:
                follower.wait(proc, spec.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                self._stop_group(proc)
            finally:
                follower.emit(final=True)
                # Stragglers (workers the script forgot to join) must not outlive the run.
                _signal_group(proc.pid, signal.SIGKILL)
                if proc.returncode is None:
                    proc.wait()
        wall = time.monotonic() - start
        return RunOutcome(
            exit_code=proc.returncode,
            wall_s=wall,
            log=read_log(spec.log_file),
            log_path=spec.log_file,
            timed_out=timed_out,
            accelerator_s=accelerator_seconds(spec, wall),
            warm=not isinstance(proc, subprocess.Popen),
        )

    def _start(self, spec: RunSpec, prefix: tuple[str, ...], python: str, argv: list[str], env: dict[str, str],
               log: IO[bytes]) -> subprocess.Popen | WarmProcess:
        """The child: forked from a warm worker where it can be (``auditor.rebuild.warm``), else a fresh process."""
        if self.warm and not spec.fresh and argv[0] == python:
            from auditor.rebuild.warm import shared_pool

            local = spec.environment.local_packages if spec.environment is not None else ()
            warm = shared_pool().start(prefix, python, argv, spec.cwd, env, spec.log_file, spec.timeout_s, local)
            if warm is not None:
                return warm
        try:
            return subprocess.Popen(  # noqa: S603 - argv comes from the audited record, by design
                [*prefix, *argv],
                cwd=spec.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except (FileNotFoundError, PermissionError) as exc:
            raise InputUnrecoverable(
                f"cannot start entry point {argv[0]!r} in {spec.cwd}: {exc.strerror}",
                hint="the recorded code.entrypoint must be runnable from code.subdir",
            ) from None

    def _stop_group(self, proc: subprocess.Popen | WarmProcess) -> None:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=self.kill_grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()


def _no_network_or_raise(spec: RunSpec) -> tuple[str, ...]:
    prefix = no_network_prefix()
    if prefix is None:
        raise InfrastructureError(
            f"{' '.join(spec.argv[:2])} must run with no network, and this host cannot start a process in a "
            "network namespace of its own (util-linux `unshare`, run as root or with unprivileged user "
            "namespaces enabled)",
            hint=f"install util-linux (Debian: util-linux) or enable user namespaces, or set {RUNNER.name}=docker")
    return prefix


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


#: the trainer's own output, line by line, redacted: not under ``auditor`` so a CLI prints it only when asked
#: (``--stream-output``); an orchestrator's task log (Airflow's, at INFO) always has it
TRAINER_OUTPUT = logging.getLogger("repro.trainer")


@contextmanager
def trainer_output_to(stream: IO[str], prefix: str = "  │ ") -> Iterator[None]:
    """The trainer's lines (``TRAINER_OUTPUT``, redacted) also on ``stream`` while the block runs: the CLI's
    ``--stream-output`` (stderr) and the rebuild pod's log, which ``KubernetesPodOperator`` relays into the task log."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(f"{prefix}%(message)s"))
    before = TRAINER_OUTPUT.level
    TRAINER_OUTPUT.addHandler(handler)
    TRAINER_OUTPUT.setLevel(logging.INFO)
    try:
        yield
    finally:
        TRAINER_OUTPUT.removeHandler(handler)
        TRAINER_OUTPUT.setLevel(before)


class LogFollower:
    """Forwards the complete lines a running trainer appends to its log file to ``TRAINER_OUTPUT`` (redacted)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial = path, 0, b""

    def wait(self, proc: subprocess.Popen | WarmProcess, timeout_s: float | None) -> None:
        """``proc.wait(timeout_s)``, forwarding new lines every half second; raises ``TimeoutExpired`` as it does."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            slice_s = 0.5 if deadline is None else max(min(0.5, deadline - time.monotonic()), 0.0)
            try:
                proc.wait(timeout=slice_s)
                return
            except subprocess.TimeoutExpired:
                self.emit()
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    def emit(self, *, final: bool = False) -> None:
        if not TRAINER_OUTPUT.isEnabledFor(logging.INFO):
            return
        from auditor.lineage.redact import redact_text

        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = b"" if final else lines.pop()
        for line in lines:
            if line.strip():
                TRAINER_OUTPUT.info("%s", redact_text(line.decode("utf-8", "replace").rstrip()))
