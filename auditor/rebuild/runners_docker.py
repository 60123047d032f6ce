"""The Docker runner: the recorded image, pinned by digest, in a locked-down container.

Locked down means: no network (``network_mode="none"``; Podman's Docker API
ignores ``network_disabled``, see FACTS.md), a read-only root filesystem with a
tmpfs ``/tmp``, a non-root user, every capability dropped, no-new-privileges,
memory and pids limits. Code, data and config are mounted read-only, only the
output directory is writable. The container is removed whatever happens.

Inside the container the paths are fixed: ``/workspace`` (the project
directory, also the working directory), ``/output``, ``/data/<name>`` and
``/config/config.json`` (and ``/evaluate/<file>`` for registered weights to re-evaluate); the
contract variables point there.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from auditor.contract import ENV_EVALUATE_WEIGHTS
from auditor.digests import SHA256
from auditor.errors import BadInput, InfrastructureError, InputUnrecoverable, NotFound
from auditor.rebuild.runners import (
    ImageRef,
    RunOutcome,
    RunSpec,
    accelerator_seconds,
    contract_env,
    read_log,
)
from auditor.settings import IMAGE, IMAGE_DIGEST

WORKSPACE = "/workspace"
OUTPUT = "/output"
CONFIG = "/config/config.json"
EVALUATE_DIR = "/evaluate"
NOBODY = "65534:65534"
LABEL = "repro-audit.role"


def _split_repository(ref: str) -> str:
    """``registry:5000/team/trainer:1.2@sha256:…`` -> ``registry:5000/team/trainer``."""
    name = ref.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    return name


def _registry_refused(exc: Exception) -> bool:
    """The registry answered and does not hold the manifest (as opposed to: it could not be reached)."""
    import docker

    text = str(exc).lower()
    if isinstance(exc, docker.errors.NotFound) or "manifest unknown" in text:
        return "connection refused" not in text and "no such host" not in text and "timeout" not in text
    return False


def _matches(image: Any, digest: str) -> bool:
    repo_digests = image.attrs.get("RepoDigests") or []
    return image.id == digest or any(rd.rsplit("@", 1)[-1] == digest for rd in repo_digests)


class DockerRunner:
    """Runs a ``RunSpec`` in a container through the Docker Engine API (docker SDK, imported lazily)."""

    name = "docker"

    def __init__(
        self,
        *,
        client: Any = None,
        base_url: str | None = None,
        mem_limit: str = "8g",
        pids_limit: int = 1024,
        shm_size: str = "1g",
        tmpfs_size: str = "2g",
        user: str | None = None,
        pull: bool = True,
    ) -> None:
        self._client = client
        self.base_url = base_url
        self.mem_limit = mem_limit
        self.pids_limit = pids_limit
        self.shm_size = shm_size  # DataLoader workers pass batches through /dev/shm
        self.tmpfs_size = tmpfs_size
        self.user = user
        self.pull = pull

    # -- engine -------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            import docker

            try:
                self._client = docker.DockerClient(base_url=self.base_url) if self.base_url else docker.from_env()
                self._client.ping()
            except docker.errors.DockerException as exc:
                where = self.base_url or os.environ.get("DOCKER_HOST") or "the default socket"
                raise InfrastructureError(
                    f"cannot reach the Docker engine at {where}: {exc}",
                    hint="start dockerd or set DOCKER_HOST",
                ) from None
        return self._client

    def resolve_image(self, image: ImageRef | None) -> Any:
        """The local image whose id or repo digest equals the recorded digest, pulled by digest when absent.

        Refused (``BadInput``) before any container exists when the record has only a tag. A tag
        that has moved (locally or in the registry) changes nothing: the image is looked up, and
        pulled, by the recorded digest only. When it cannot be pulled: the registry unreachable is
        ``InfrastructureError`` (retryable); the registry answering that it does not hold the digest
        is ``InputUnrecoverable`` naming it; a local tag that now names another image, with no pull
        possible, is ``BadInput`` naming both.
        """
        import docker

        if image is None:
            raise BadInput(
                "the Docker runner needs an image, the record names none",
                hint=f"record {IMAGE.name} and {IMAGE_DIGEST.name}",
            )
        digest = image.pinned_digest()
        repository = _split_repository(image.ref)
        pullable = bool(repository) and not repository.startswith("sha256")
        candidates = [digest] + ([f"{repository}@{digest}"] if pullable else [])
        for candidate in candidates:
            try:
                found = self.client.images.get(candidate)
            except docker.errors.ImageNotFound:
                continue
            except docker.errors.APIError as exc:
                raise InfrastructureError(f"Docker engine failed looking up image {image.ref}: {exc}") from None
            if _matches(found, digest):
                return found
        moved = self._moved_reference(image, digest)
        if self.pull and pullable:
            return self._pull(image, repository, digest, moved)
        if moved:
            raise BadInput(moved, hint="the tag has moved; load the recorded image instead of retagging")
        raise NotFound(
            f"image {image.ref} with digest {digest} is not present in the Docker engine",
            hint="docker load the recorded image; a rebuild never substitutes another one",
        )

    def _pull(self, image: ImageRef, repository: str, digest: str, moved: str | None) -> Any:
        import docker

        reference = f"{repository}@{digest}"
        try:
            pulled = self.client.images.pull(reference)
        except docker.errors.DockerException as exc:
            text = str(exc)
            if _registry_refused(exc) and moved:
                raise BadInput(f"{moved}; pulling {reference} failed: {text}",
                               hint="the tag has moved; load the recorded image instead of retagging") from None
            if _registry_refused(exc):
                raise InputUnrecoverable(
                    f"image {digest} is gone: the registry of {repository} does not hold it ({text})",
                    hint="the recorded image was deleted from its registry; restore it from a backup, "
                    "the rebuild never substitutes another one",
                ) from None
            raise InfrastructureError(
                f"image {image.ref} ({digest}) is not present locally and pulling {reference} failed: {text}",
                hint="make its registry reachable (a retry may succeed), or docker load the recorded image",
            ) from None
        if not _matches(pulled, digest):
            raise InfrastructureError(f"pulling {reference} gave image {pulled.id}, which does not carry digest {digest}")
        return pulled

    def _moved_reference(self, image: ImageRef, digest: str) -> str | None:
        """Why the local image under the recorded name is not the recorded one, or None when there is none."""
        import docker

        named = image.ref.split("@", 1)[0]
        if not named or named.startswith(SHA256):
            return None
        try:
            local = self.client.images.get(named)
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError as exc:
            raise InfrastructureError(f"Docker engine failed looking up image {image.ref}: {exc}") from None
        return (
            f"local image {named} is {local.id} (repo digests: {local.attrs.get('RepoDigests') or 'none'}), "
            f"but the record says {digest}"
        )

    # -- run ----------------------------------------------------------------
    def run(self, spec: RunSpec) -> RunOutcome:
        """Run ``spec`` in a fresh container; streamed logs land in ``spec.log_file``."""
        import requests

        import docker

        image = self.resolve_image(spec.image)  # refusals happen before any container exists
        if not spec.argv:
            raise BadInput("the entry point is empty", hint="record code.entrypoint, e.g. ['python', 'train.py']")
        spec.output_dir.mkdir(parents=True, exist_ok=True)
        spec.log_file.parent.mkdir(parents=True, exist_ok=True)
        user = self._user_for(spec.output_dir)
        name = spec.image.ref if spec.image else image.id
        container = None
        timed_out = False
        start = time.monotonic()
        try:
            container = self.client.containers.create(image.id, command=list(spec.argv), **self._options(spec, user))
            container.start()
            streamer = threading.Thread(target=self._stream_logs, args=(container, spec.log_file), daemon=True)
            streamer.start()
            try:
                status = container.wait(timeout=spec.timeout_s)
                exit_code = int(status.get("StatusCode", -1))
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                timed_out = True
                container.kill()
                exit_code = int(container.wait(timeout=60).get("StatusCode", -9))
            streamer.join(timeout=30)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise InfrastructureError(f"Docker engine failed running image {name} ({image.id}): {exc}") from None
        finally:
            if container is not None:
                try:
                    container.remove(force=True)
                except docker.errors.NotFound:
                    pass
                except docker.errors.APIError as exc:
                    raise InfrastructureError(f"could not remove the container of image {name}: {exc}") from None
        wall = time.monotonic() - start
        return RunOutcome(
            exit_code=exit_code,
            wall_s=wall,
            log=read_log(spec.log_file),
            log_path=spec.log_file,
            timed_out=timed_out,
            accelerator_s=accelerator_seconds(spec, wall),
        )

    def _user_for(self, output_dir: Path) -> str:
        """Never root in the container: the caller's uid, or nobody (owning the output dir) when that is root."""
        if self.user is not None:
            return self.user
        uid, gid = os.getuid(), os.getgid()
        if uid != 0:
            return f"{uid}:{gid}"
        os.chown(output_dir, 65534, 65534)
        return NOBODY

    def _options(self, spec: RunSpec, user: str) -> dict[str, Any]:
        from docker.types import DeviceRequest, Mount

        mounts = [
            Mount(WORKSPACE, str(spec.cwd.resolve()), type="bind", read_only=True),
            Mount(OUTPUT, str(spec.output_dir.resolve()), type="bind", read_only=False),
        ]
        data_paths: dict[str, str] = {}
        for name, path in spec.data.items():
            inside = "/data/" + re.sub(r"[^A-Za-z0-9_.-]", "_", name)
            data_paths[name] = inside
            mounts.append(Mount(inside, str(Path(path).resolve()), type="bind", read_only=True))
        if spec.config_file is not None:
            mounts.append(Mount(CONFIG, str(spec.config_file.resolve()), type="bind", read_only=True))
        environment = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", **spec.env}
        weights = spec.env.get(ENV_EVALUATE_WEIGHTS)
        if weights:  # the registered weights to re-evaluate: a host file, mounted read-only where the script looks
            inside = f"{EVALUATE_DIR}/{Path(weights).name}"
            source = Path(weights).resolve()
            # The container's user owns none of the host's files: an MLflow download is 0600, which it cannot read
            # (safetensors then says "No such file or directory"). The audit's own copy is made readable to all.
            source.chmod(source.stat().st_mode | 0o444)
            mounts.append(Mount(inside, str(source), type="bind", read_only=True))
            environment[ENV_EVALUATE_WEIGHTS] = inside
        environment["HOME"] = "/tmp"  # a host path (the workspace's home) means nothing inside the container
        if spec.image is not None:  # the rebuild's own record names the image it ran in, as training's did
            digest = spec.image.pinned_digest()
            if spec.image.ref != digest:
                environment[IMAGE.name] = spec.image.ref
            environment[IMAGE_DIGEST.name] = digest
        environment.update(
            contract_env(output_dir=OUTPUT, data=data_paths, config_file=CONFIG if spec.config_file else None)
        )
        options: dict[str, Any] = {
            "environment": environment,
            "working_dir": WORKSPACE,
            "user": user,
            "network_mode": "none",
            "read_only": True,
            # Docker copies the image's /tmp into the tmpfs, mode included (no notmpcopyup before
            # Docker 25): images must ship /tmp as 1777, as Debian-based ones do; mode= covers images without one.
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,exec,size={self.tmpfs_size},mode=1777"},
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "mem_limit": self.mem_limit,
            "pids_limit": self.pids_limit,
            "shm_size": self.shm_size,
            "mounts": mounts,
            "labels": {LABEL: "rebuild"},
            "stdin_open": False,
            "tty": False,
        }
        if spec.accelerator is not None:
            options["device_requests"] = [DeviceRequest(count=spec.accelerator.count, capabilities=[["gpu"]])]
        return options

    @staticmethod
    def _stream_logs(container: Any, path: Path) -> None:
        with open(path, "wb") as log:
            try:
                for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=True):
                    log.write(chunk)
                    log.flush()
            except Exception as exc:  # noqa: BLE001 - a broken stream must not hide the run's outcome
                log.write(f"\n[repro-audit: log stream ended early: {exc}]\n".encode())
