"""Nothing in docker/ holds a secret, and every image reference is pinned.

Pinned means by digest (``@sha256:`` and 64 hex digits) or by an exact version:
three numeric components (``7.4.2``), a date-stamped release
(``RELEASE.2025-09-07T16-13-09Z``), or PostgreSQL's own two-component releases
(``16.8``). ``latest``, a bare major (``16``) or a minor line (``7.4``) float,
and so does a placeholder such as ``@sha256:<digest>``. The checks run on the
raw files (an ``ARG`` default or a ``${VAR:-default}`` counts), and each is
shown to catch a planted offender so that it can fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

DOCKER = Path(__file__).resolve().parents[2] / "docker"

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
EXACT_TAG = re.compile(r"^v?\d+\.\d+\.\d+([.+-].*)?$|^RELEASE\.\d{4}-\d{2}-\d{2}T[\d-]+Z(-.+)?$")
POSTGRES_TAG = re.compile(r"^(1\d|[2-9]\d)\.\d+(-.+)?$")  # PostgreSQL >= 10 numbers releases MAJOR.MINOR

SECRET_KEY = re.compile(r"(PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|ACCESS_KEY|FERNET|PRIVATE_KEY|CREDENTIAL)", re.I)
SECRET_SHAPES = [
    (re.compile(r"AKIA[0-9A-Z]{16}"), "an AWS access key id"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a private key"),
    (re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{30,}|xox[abpr]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9]{20,})"), "an API token"),
    # user:password@host in a URL, unless the password is an interpolation ($VAR, ${VAR}, $$VAR)
    (re.compile(r"[a-z][a-z0-9+.-]*://[^\s:/@'\"]*:(?!\$)[^\s@/'\"$]+@"), "credentials inside a URL"),
]
# KEY=value, KEY: value, ENV KEY value, --key value: the forms a secret takes in these files
ASSIGNMENT = re.compile(r"""^\s*(?:-\s*)?(?:ENV\s+|ARG\s+|export\s+)?["']?([A-Za-z_][A-Za-z0-9_.-]*)["']?\s*[:=]\s*(.*?)\s*$""")
LEGACY_ENV = re.compile(r"^\s*ENV\s+([A-Za-z_][A-Za-z0-9_]*)\s+([^=\s].*?)\s*$")  # Dockerfile's ENV KEY value


def _is_reference(value: str) -> bool:
    """Empty, an interpolation, a YAML alias, or a documented placeholder: not a value."""
    value = value.strip().strip("\"'")
    return value == "" or value.startswith(("$", "*", "<")) or value in {"null", "~"}


def secret_problems(text: str, where: str) -> list[str]:
    """What in ``text`` looks like a secret value."""
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for shape, what in SECRET_SHAPES:
            if shape.search(line):
                problems.append(f"{where}:{number}: {what}: {line.strip()}")
        match = ASSIGNMENT.match(line) or LEGACY_ENV.match(line)
        if match and SECRET_KEY.search(match.group(1)) and not _is_reference(match.group(2)):
            value = match.group(2).strip().strip("\"'")
            if not value.startswith(("{", "[", "&")):  # a mapping/sequence/anchor opens here; its items are checked
                problems.append(f"{where}:{number}: {match.group(1)} has a literal value")
    return problems


def image_problem(reference: str) -> str | None:
    """Why ``reference`` is not pinned, or None when it is."""
    if DIGEST.search(reference):
        return None
    if "@" in reference:
        return "has a digest that is not sha256 and 64 hex digits"
    name, _, tag = reference.rpartition(":") if ":" in reference.rsplit("/", 1)[-1] else (reference, "", "")
    if not tag:
        return "has neither a tag nor a digest (it means :latest)"
    if EXACT_TAG.match(tag) or (name.rsplit("/", 1)[-1] == "postgres" and POSTGRES_TAG.match(tag)):
        return None
    return f"tag {tag!r} is not an exact version"


def _default(expression: str) -> str | None:
    """The default of ``${VAR:-default}`` / ``${VAR-default}``; None for a bare ``${VAR}`` or ``${VAR:?}``."""
    match = re.fullmatch(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-(.+)\}", expression)
    return match.group(1) if match else None


def dockerfile_images(text: str) -> list[str]:
    """Every image a Dockerfile builds FROM or names in an ARG used by a FROM (stage names excluded)."""
    args = dict(re.findall(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)", text, re.M))
    stages = set(re.findall(r"^\s*FROM\s+\S+(?:\s+--\S+)*\s+AS\s+(\S+)", text, re.M | re.I))
    images = []
    for line in re.findall(r"^\s*FROM\s+(.+)$", text, re.M | re.I):
        words = [w for w in line.split() if not w.startswith("--")]
        source = words[0]
        variable = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", source)
        if variable:
            if variable.group(1) not in args:
                images.append(f"<ARG {variable.group(1)} without a default>")
                continue
            source = args[variable.group(1)]
        if source not in stages and source != "scratch":
            images.append(source)
    return images


def compose_images(text: str) -> list[str]:
    """Every ``image:`` of a compose file, with ``${VAR:-default}`` replaced by its default."""
    images = []
    for service in (yaml.safe_load(text).get("services") or {}).values():
        reference = service.get("image")
        if reference is None:
            images.append("<a service without image:>")
            continue
        if reference.startswith("${"):
            reference = _default(reference) or f"<{reference} has no pinned default>"
        images.append(reference)
    return images


def docker_files() -> list[Path]:
    """What git would commit under docker/ (tracked, or untracked and not ignored); every file outside a checkout.

    A local ``docker/.env`` holding the real values is fine once git ignores it, and caught while it does not.
    """
    import subprocess

    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "."],
                            cwd=DOCKER, capture_output=True, check=False)
    if listed.returncode == 0:
        names = [n for n in listed.stdout.decode().split("\0") if n]
        return sorted(DOCKER / n for n in names if (DOCKER / n).is_file() and "__pycache__" not in Path(n).parts)
    return sorted(p for p in DOCKER.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def test_docker_folder_holds_the_images_and_the_stack():
    names = {p.name for p in docker_files()}
    assert {"Dockerfile", "compose.yaml", "README.md", ".env.example"} <= names


@pytest.mark.parametrize("path", docker_files(), ids=lambda p: str(p.relative_to(DOCKER)))
def test_no_file_in_docker_holds_a_secret(path):
    assert secret_problems(path.read_text(errors="replace"), path.name) == []


def test_no_env_file_with_values_would_be_committed():
    for path in docker_files():
        if path.name.startswith(".env") and path.name != ".env.example":
            pytest.fail(f"{path} would be committed: add it to .gitignore (it holds the stack's secrets)")


def test_every_image_in_the_compose_file_is_pinned():
    images = compose_images((DOCKER / "compose.yaml").read_text())
    assert images
    assert {ref: image_problem(ref) for ref in images if image_problem(ref)} == {}


def test_every_base_image_in_the_dockerfiles_is_pinned():
    for path in DOCKER.glob("*Dockerfile"):
        images = dockerfile_images(path.read_text())
        assert images, path
        assert {ref: image_problem(ref) for ref in images if image_problem(ref)} == {}, path


def test_the_trainer_base_is_a_cuda_image_pinned_by_digest():
    images = dockerfile_images((DOCKER / "Dockerfile").read_text())
    cuda = [ref for ref in images if ref.startswith(("nvidia/cuda:", "nvcr.io/nvidia/cuda:"))]
    assert cuda and all(DIGEST.search(ref) for ref in cuda), images


def test_the_images_run_as_a_non_root_user():
    text = (DOCKER / "Dockerfile").read_text()
    users = re.findall(r"^\s*USER\s+(\S+)", text, re.M)
    assert users and users[-1].split(":")[0] not in {"root", "0"}
    # each final stage (trainer, airflow) ends as the unprivileged user
    for stage in re.split(r"^\s*FROM\s", text, flags=re.M)[1:]:
        stage_users = re.findall(r"^\s*USER\s+(\S+)", stage, re.M)
        if stage_users:
            assert stage_users[-1].split(":")[0] not in {"root", "0"}, stage.splitlines()[0]


@pytest.mark.parametrize(("reference", "pinned"), [
    ("postgres:16.8-bookworm", True),
    ("redis:7.4.2-bookworm", True),
    ("quay.io/minio/minio:RELEASE.2025-09-07T16-13-09Z", True),
    ("nvidia/cuda:12.8.1-runtime-ubuntu24.04@sha256:" + "0" * 64, True),
    ("registry.local:5000/repro/trainer@sha256:" + "a" * 64, True),
    ("postgres:16", False),
    ("postgres:latest", False),
    ("redis:7.4", False),
    ("redis", False),
    ("registry.local:5000/repro/trainer", False),
    ("nvidia/cuda:12.8.1-runtime-ubuntu24.04@sha256:<digest>", False),
    ("nvidia/cuda@sha256:abc", False),
])
def test_the_pin_check_tells_pinned_from_floating_references(reference, pinned):
    assert (image_problem(reference) is None) is pinned


def test_the_checks_catch_planted_offenders():
    planted = "\n".join([
        "POSTGRES_PASSWORD=hunter2hunter2",
        "      AWS_SECRET_ACCESS_KEY: wJalrXUtnFEMIK7MDENGbPxRfiCY",
        "ENV AIRFLOW__CORE__FERNET_KEY abcdefghijklmnop",
        "  AIRFLOW__CELERY__BROKER_URL: redis://:s3cr3t@redis:6379/0",
        "key = AKIAABCDEFGHIJKLMNOP",
    ])
    for line in planted.splitlines():
        assert secret_problems(line, "planted"), f"not caught: {line}"
    clean = "\n".join([
        "POSTGRES_PASSWORD=",
        "  POSTGRES_PASSWORD: *pg-password",
        "  AIRFLOW__CELERY__BROKER_URL: redis://:${REDIS_PASSWORD}@redis:6379/0",
        '  --backend-store-uri "postgresql+psycopg2://repro:$$POSTGRES_PASSWORD@postgres:5432/mlflow"',
    ])
    assert secret_problems(clean, "clean") == []
    assert dockerfile_images("ARG BASE=python:3\nFROM ${BASE} AS b\nFROM b\n") == ["python:3"]
    assert compose_images("services:\n  a:\n    image: ${IMG:-redis:7}\n  b:\n    build: .\n") == \
        ["redis:7", "<a service without image:>"]
