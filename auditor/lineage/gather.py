"""Small gatherers that fill the run record at training time.

Each fact has one small function (after Sacred's ``host_info``). A missing git
repository or a missing torch is recorded as data (``git_error``,
``torch_error``), never raised: the gate decides what that means.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import importlib.metadata
import importlib.util
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from auditor import settings as _settings
from auditor.canonical import digest, flatten
from auditor.contract import DIFF_FILE, ENV_CONFIG_PREFIX, ENV_TORCH_THREADS, THREAD_VARS
from auditor.errors import BadInput
from auditor.lineage.record import (
    CodeInfo,
    ConfigInfo,
    DataRef,
    EnvironmentInfo,
    Infrastructure,
    LocalPackage,
    RunRecord,
    SeedInfo,
    UntrackedBinary,
)
from auditor.lineage.redact import redact_argv, redact_diff, redact_mapping, redact_text, redact_value

# Environment variables that shape numerics or placement; everything else is ignored
# (allowlist, so a credential in the environment can never reach a record).
ENV_ALLOWLIST = (
    "PYTHONHASHSEED",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "MKL_CBWR",
    "OPENBLAS_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "NUMEXPR_NUM_THREADS",
    "CUBLAS_WORKSPACE_CONFIG",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_DETERMINISTIC",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "TZ",
    "LANG",
    "LC_ALL",
    _settings.IMAGE.name,
    _settings.IMAGE_DIGEST.name,
    _settings.INSTANCE_TYPE.name,
    ENV_TORCH_THREADS,
)
LOCK_FILES = ("uv.lock", "poetry.lock", "Pipfile.lock", "pdm.lock", "conda-lock.yml", "requirements.lock", "requirements.txt")
MAX_BINARY_IN_DIFF = 1 << 20  # untracked binaries above this are listed by hash only


@dataclass(frozen=True)
class Captured:
    """A captured record and the diff to store beside it (``diff.patch``) when the tree was dirty."""

    record: RunRecord
    diff: str | None


# -- git ---------------------------------------------------------------------
def _git(args: Sequence[str], cwd: Path, *, env: Mapping[str, str] | None = None, text: bool = True) -> Any:
    result = subprocess.run(
        ["git", "-c", "core.autocrlf=false", "-c", "core.quotepath=off", *args],
        cwd=cwd,
        capture_output=True,
        text=text,
        env={**os.environ, "LC_ALL": "C", **(env or {})},
        check=False,
    )
    if result.returncode != 0:
        stderr = result.stderr if text else result.stderr.decode("utf-8", "replace")
        raise _GitFailed(stderr.strip() or f"git {' '.join(args)} exited {result.returncode}")
    return result.stdout


class _GitFailed(Exception):
    pass


def git_info(repo_dir: Path | str = ".", *, env: Mapping[str, str] | None = None) -> tuple[CodeInfo, str | None]:
    """Commit, dirty flag and a diff covering staged, unstaged and untracked files.

    The auditor's own folders (``.repro``, ``mlruns``, ``mlartifacts``, ``mlflow.db``, a configured
    REPRO_HOME, snapshot store or reports folder inside the repository: ``auditor.lineage.own``) and
    every ``__pycache__`` are left out, whatever the user's ``.gitignore`` says, unless the user
    committed files there: the auditor never dirties the tree it records.

    The diff is taken against HEAD through a *temporary* index (a copy of the real
    one, so git's stat cache keeps it fast) into which every untracked,
    non-ignored file is added: applying it to a clean checkout of the commit
    reproduces the working tree byte for byte. The user's own index is untouched.
    """
    repo_dir = Path(repo_dir).resolve()
    if shutil.which("git") is None:
        return CodeInfo(git_error="git is not installed"), None
    try:
        top = Path(_git(["rev-parse", "--show-toplevel"], repo_dir).strip())
    except (_GitFailed, OSError) as exc:
        return CodeInfo(git_error=f"not a git repository: {repo_dir} ({exc})"), None
    subdir = "" if top == repo_dir else repo_dir.relative_to(top).as_posix()
    try:
        commit = _git(["rev-parse", "--verify", "HEAD^{commit}"], top).strip()
    except _GitFailed:
        return CodeInfo(subdir=subdir, git_error=f"repository {top} has no commit yet"), None
    try:
        url = _absolute_remote(_git(["remote", "get-url", "origin"], top).strip(), top)
    except _GitFailed:
        url = top.as_uri()
    excludes = own_excludes(top, repo_dir, env)
    status = _git(["status", "--porcelain", "--untracked-files=all", "--", ".", *excludes], top)
    dirty = bool(status.strip())
    code = CodeInfo(repo_url=_without_password(url), commit=commit, dirty=dirty, subdir=subdir)
    if not dirty:
        return code, None

    diff_bytes, binaries = _diff_against_head(top, excludes)
    diff, redactions = redact_diff(diff_bytes.decode("utf-8", "replace"))
    code = code.model_copy(
        update={
            "diff_redactions": redactions,
            "diff_digest": "sha256:" + hashlib.sha256(diff.encode("utf-8")).hexdigest(),
            "diff_file": DIFF_FILE,
            "untracked_binary": binaries,
        }
    )
    return code, diff


def own_excludes(top: Path, repo_dir: Path, env: Mapping[str, str] | None = None) -> list[str]:
    """Pathspecs leaving the auditor's own folders out of the capture (those holding no tracked file)."""
    from auditor.lineage.own import DERIVED_PATHSPECS, candidate_excludes

    candidates = candidate_excludes(top, env, cwd=Path.cwd(), project=repo_dir)
    tracked: list[str] = []
    if candidates:
        listed = _git(["ls-files", "-z", "--", *[f":(literal){c}" for c in candidates]], top)
        tracked = [p for p in listed.split("\0") if p]
    kept = [c for c in candidates if not any(t == c or t.startswith(c + "/") for t in tracked)]
    if kept:
        # git add refuses a pathspec naming an ignored path, even an exclude (README's .gitignore holds .repro/);
        # an ignored folder without tracked files needs no exclude: neither ls-files --others nor add -A sees it
        ignored = subprocess.run(["git", "check-ignore", "-z", "--stdin"], cwd=top, input="\0".join(kept) + "\0",
                                 capture_output=True, text=True, check=False).stdout
        kept = [c for c in kept if c not in set(ignored.split("\0"))]
    return [*(f":(exclude,literal){c}" for c in kept), *DERIVED_PATHSPECS]


def _absolute_remote(url: str, top: Path) -> str:
    """A remote given as a relative path (``../upstream.git``) made absolute: the audit clones from elsewhere."""
    if url and "://" not in url and not Path(url).is_absolute() and not re.match(r"^[^/]+@[^/:]+:", url) and ":" not in url.split("/")[0]:
        return (top / url).resolve().as_uri()
    return url


def _without_password(url: str) -> str:
    """The URL with any ``user:password@`` removed: the auditor clones with its own credentials."""
    return redact_text(re.sub(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+:[^/@\s]*@", r"\1", url))


def _diff_against_head(top: Path, excludes: Sequence[str] = ()) -> tuple[bytes, list[UntrackedBinary]]:
    import tempfile

    real_index = Path(_git(["rev-parse", "--git-path", "index"], top).strip())
    if not real_index.is_absolute():
        real_index = top / real_index
    with tempfile.TemporaryDirectory(prefix="repro-index-") as tmp:
        index = Path(tmp) / "index"
        if real_index.exists():
            shutil.copyfile(real_index, index)
        env = {"GIT_INDEX_FILE": str(index)}
        scope = ["--", ".", *excludes]
        untracked = [p for p in _git(["ls-files", "--others", "--exclude-standard", "-z", *scope], top).split("\0") if p]
        _git(["add", "-A", *scope], top, env=env)
        binaries: list[UntrackedBinary] = []
        excluded: list[str] = []
        numstat = _git(["diff", "--cached", "--numstat", "-z", "HEAD", *scope], top, env=env)
        binary_paths = {entry.split("\t", 2)[2] for entry in numstat.split("\0") if entry.startswith("-\t-\t")}
        for path in untracked:
            if path in binary_paths:
                data = (top / path).read_bytes()
                binaries.append(UntrackedBinary(path=path, sha256=hashlib.sha256(data).hexdigest(), size=len(data)))
                if len(data) > MAX_BINARY_IN_DIFF:
                    excluded.append(path)
        pathspec = [*scope, *[f":(exclude,literal){p}" for p in excluded]]
        # -U0: no context lines, so no line of a committed file (a committed .env) is copied into the diff
        diff = _git(["diff", "--cached", "--binary", "--full-index", "-U0", "HEAD", *pathspec], top, env=env, text=False)
    return diff, binaries


# -- config --------------------------------------------------------------------
def _load_config_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text) if path.suffix.lower() in {".yaml", ".yml"} else __import__("json").loads(text)
    except (yaml.YAMLError, ValueError) as exc:
        raise BadInput(f"config file {path} does not parse: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BadInput(f"config file {path} must hold a mapping at the top level, not {type(data).__name__}")
    return data


def _set_path(target: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = target
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def _parse_scalar(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def resolve_config(
    source: Path | str | Mapping[str, Any] | argparse.ArgumentParser | argparse.Namespace | None = None,
    overrides: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    *,
    argv: Sequence[str] | None = None,
    parser: argparse.ArgumentParser | None = None,
) -> ConfigInfo:
    """Merge file (or dict, or argparse), ``REPRO_CFG__a__b=v`` environment variables and ``a.b=v`` CLI overrides.

    Later sources win; each flattened key remembers where its value came from.
    Credential-shaped values are redacted before the digest is taken. An
    ``ArgumentParser`` is parsed against ``argv`` (default ``sys.argv[1:]``); a
    parsed ``Namespace`` is taken as it is, with ``parser`` (when known) telling
    defaults from command-line values: see ``argparse_config``.
    """
    env = os.environ if env is None else env
    resolved: dict[str, Any] = {}
    sources: dict[str, str] = {}
    file_name: str | None = None
    origins: dict[str, str] = {}
    if isinstance(source, ArgparseSource):
        source, argv, parser = source.source, source.argv, source.parser
    if isinstance(source, (argparse.ArgumentParser, argparse.Namespace)):
        if overrides:
            raise BadInput(
                "config overrides (key=value) were passed beside an argparse config",
                hint="with config=parser or config=args the command line is read through argparse; drop overrides=",
            )
        base, origins = argparse_config(source, argv=argv, env=env, parser=parser)
        origin = "default"
    elif isinstance(source, Mapping):
        base, origin = dict(source), "default"
    elif source is not None:
        path = Path(source)
        base, origin, file_name = _load_config_file(path), "file", path.name
    else:
        base, origin = {}, "default"
    for key, value in flatten(base).items():
        if key:
            _set_path(resolved, key, value)
            sources[key] = origins.get(key, origin)
    for name in sorted(env):
        if name.startswith(ENV_CONFIG_PREFIX):
            key = name[len(ENV_CONFIG_PREFIX) :].lower().replace("__", ".")
            _set_path(resolved, key, _parse_scalar(env[name]))
            sources[key] = "env"
    for item in overrides:
        if "=" not in item or item.startswith("="):
            raise BadInput(f"config override {item!r} is not key=value", hint="write e.g. lr=0.01 or model.hidden=64")
        key, _, raw = item.partition("=")
        key = key.strip().lstrip("-")
        _set_path(resolved, key, _parse_scalar(raw))
        sources[key] = "cli"
    # a key overridden as a whole mapping drops its children's stale sources
    flat = flatten(resolved)
    sources = {k: v for k, v in sources.items() if k in flat or any(f.startswith(k + ".") for f in flat)}
    redacted = redact_mapping(resolved)
    return ConfigInfo(resolved=redacted, digest=digest(redacted), sources=sources, file=file_name)


# -- argparse ------------------------------------------------------------------------
@dataclass(frozen=True)
class ArgparseSource:
    """An argparse config as ``track`` holds it: the parser or namespace, the parser when known, the command line."""

    source: argparse.ArgumentParser | argparse.Namespace
    parser: argparse.ArgumentParser | None
    argv: tuple[str, ...]

    def parse(self) -> argparse.Namespace:
        """The namespace: the one given, or the parser's reading of ``argv``."""
        if isinstance(self.source, argparse.Namespace):
            return self.source
        namespace, _ = _parse_quietly(self.source, list(self.argv))
        if namespace is None:
            raise BadInput(f"the command line {' '.join(self.argv)!r} does not parse with the script's ArgumentParser")
        return namespace

    def given(self) -> set[str]:
        """The dests the command line sets."""
        if self.parser is None:
            return _spelled_in_argv(vars(self.parse()), list(self.argv))
        return _given_on_command_line(self.parser, list(self.argv))

    def action(self, dest: str) -> argparse.Action | None:
        for each in _all_parsers(self.parser) if self.parser is not None else []:
            for action in each._actions:
                if action.dest == dest:
                    return action
        return None


def argparse_config(
    source: argparse.ArgumentParser | argparse.Namespace,
    *,
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    parser: argparse.ArgumentParser | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """The values of an argparse config as JSON-able data, and where each came from.

    ``source`` is a parser (parsed here against ``argv``, default ``sys.argv[1:]``)
    or a parsed namespace (its values as they are). Each value's source is

    - ``"cli"`` when ``argv`` gives it: ``argv`` is parsed again by the parser with
      every default suppressed, so only what the command line set comes back
      (abbreviated options and ``--opt=value`` included, as argparse reads them);
    - ``"env"`` when it was not on the command line and an environment variable
      named after the option (``LR`` or ``MY_LR`` for ``--lr``) holds exactly the
      default: the usual ``default=os.environ.get("LR", 0.1)``. argparse keeps no
      trace of where a default came from, so this is by name and value;
    - ``"default"`` otherwise.

    For a namespace without its parser, ``"cli"`` falls back to looking for the
    option's spelling (``--batch-size``, ``--batch_size``) in ``argv``; a value given
    positionally then reads ``"default"``. Values that are not JSON are recorded by
    a stable text: a path as its string, a function as ``module.qualname``, a file as its name.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if env is None else env
    if isinstance(source, argparse.ArgumentParser):
        parser = source
        namespace, _unknown = _parse_quietly(parser, argv)
        if namespace is None:
            raise BadInput(
                f"the command line {' '.join(argv)!r} does not parse with the script's ArgumentParser",
                hint="run the script with arguments its parser accepts",
            )
    else:
        namespace = source
    values = {key: argparse_jsonable(value) for key, value in vars(namespace).items()}
    given = _given_on_command_line(parser, argv) if parser is not None else _spelled_in_argv(values, argv)
    defaults = _argparse_defaults(parser) if parser is not None else {}
    sources: dict[str, str] = {}
    for key, value in values.items():
        if key in given:
            sources[key] = "cli"
        elif _default_from_env(key, value, defaults, env):
            sources[key] = "env"
        else:
            sources[key] = "default"
    return values, sources


def argparse_jsonable(value: Any) -> Any:
    """An argparse value as JSON data with a stable spelling (no memory addresses)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [argparse_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): argparse_jsonable(v) for k, v in value.items()}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "read") or hasattr(value, "write"):  # argparse.FileType
        return str(getattr(value, "name", type(value).__name__))
    if callable(value):  # set_defaults(func=train)
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', type(value).__name__)}"
    import enum

    if isinstance(value, enum.Enum):
        return argparse_jsonable(value.value)
    return str(value)


def _parse_quietly(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[argparse.Namespace | None, list[str]]:
    """``parse_known_args`` without printing usage or exiting on a bad command line."""
    import contextlib
    import io

    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            return parser.parse_known_args(argv)
    except SystemExit:
        return None, []


def _all_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += _all_parsers(child)
    return found


def _argparse_defaults(parser: argparse.ArgumentParser) -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    for each in _all_parsers(parser):
        for action in each._actions:
            if action.dest is not argparse.SUPPRESS and action.default is not argparse.SUPPRESS:
                defaults.setdefault(action.dest, argparse_jsonable(action.default))
        defaults.update({k: argparse_jsonable(v) for k, v in each._defaults.items()})
    return defaults


def _given_on_command_line(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The dests ``argv`` sets: parsed with every default suppressed (restored after), so only given ones appear."""
    saved: list[tuple[Any, str, Any]] = []
    try:
        for each in _all_parsers(parser):
            for action in each._actions:
                saved.append((action, "default", action.default))
                action.default = argparse.SUPPRESS
            saved.append((each, "_defaults", each._defaults))
            each._defaults = {}
            saved.append((each, "argument_default", each.argument_default))
            each.argument_default = argparse.SUPPRESS
        namespace, _ = _parse_quietly(parser, argv)
    finally:
        for owner, attribute, value in reversed(saved):
            setattr(owner, attribute, value)
    return set(vars(namespace)) if namespace is not None else set()


def _spelled_in_argv(values: Mapping[str, Any], argv: list[str]) -> set[str]:
    given: set[str] = set()
    tokens = {token.split("=", 1)[0] for token in argv if token.startswith("-")}
    for key in values:
        spellings = {f"--{key}", f"--{key.replace('_', '-')}"}
        if tokens & spellings:
            given.add(key)
    return given


def _default_from_env(key: str, value: Any, defaults: Mapping[str, Any], env: Mapping[str, str]) -> bool:
    if key in defaults and defaults[key] != value:
        return False
    name = re.sub(r"[^A-Za-z0-9]", "_", key).upper()
    for var, raw in env.items():
        if var == name or var.endswith("_" + name):
            parsed = _parse_scalar(raw)
            if raw == value or (
                not isinstance(value, str) and value is not None and parsed == value and isinstance(parsed, bool) == isinstance(value, bool)
            ):
                return True
    return False


# -- environment -----------------------------------------------------------------
def installed_packages() -> dict[str, str]:
    """Every installed distribution as normalised name -> exact version (importlib.metadata).

    Name and version come from the ``name-version.dist-info`` folder when there
    is one (what pip and uv write), which skips parsing 300 METADATA files.
    """
    packages: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        folder = getattr(dist, "_path", None)
        stem = folder.name[: -len(".dist-info")] if folder is not None and folder.name.endswith(".dist-info") else ""
        name, _, version = stem.partition("-")
        if not (name and version and "-" not in version):
            name, version = dist.metadata.get("Name") or "", dist.version
        if name:
            packages[re.sub(r"[-_.]+", "-", name).lower()] = version
    return dict(sorted(packages.items()))


#: a local package's source tree larger than this is recorded without a digest (and says why)
MAX_TREE_FILES = 20_000
MAX_TREE_BYTES = 1 << 30
_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".tox", ".nox", "node_modules",
                        ".mypy_cache", ".pytest_cache", ".ruff_cache", *("mlruns", "mlartifacts", ".repro")})


def _normal_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def local_packages(env: Mapping[str, str] | None = None) -> dict[str, LocalPackage]:
    """Distributions installed from a local folder (``direct_url.json`` with a ``file://`` URL), pinned by content.

    An editable install serves whatever its source folder holds, so that folder is digested (its git
    commit and dirty flag too, when it is in a repository). A local install copied into
    site-packages is digested by its installed files (the hashes in its ``RECORD``); the source
    folder's commit is noted when it still exists. Failures are recorded as data, never raised.
    """
    import json
    from urllib.parse import unquote, urlparse

    found: dict[str, LocalPackage] = {}
    for dist in importlib.metadata.distributions():
        folder = getattr(dist, "_path", None)
        if folder is None:
            continue
        direct = Path(folder) / "direct_url.json"
        try:
            info = json.loads(direct.read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue  # installed from an index: its version names it
        except (OSError, ValueError):
            continue
        url = info.get("url", "") if isinstance(info, dict) else ""
        if not url.startswith("file://"):
            continue  # VCS and remote archive URLs carry their own immutable ids
        name = _normal_name(dist.metadata.get("Name") or Path(folder).name.split("-")[0])
        source = Path(unquote(urlparse(url).path))
        editable = bool((info.get("dir_info") or {}).get("editable"))
        found[name] = _local_package(dist, source, editable, env)
    return dict(sorted(found.items()))


def _local_package(dist: Any, source: Path, editable: bool, env: Mapping[str, str] | None) -> LocalPackage:
    facts: dict[str, Any] = {"version": dist.version or "", "path": redact_text(str(source)), "editable": editable}
    errors: list[str] = []
    commit, dirty, git_files = _source_git(source, env)
    facts["commit"], facts["dirty"] = commit, dirty
    try:
        if editable:  # what runs is the source folder, as it is now
            if not source.is_dir():
                raise OSError(f"source folder {source} does not exist")
            files = git_files if git_files is not None else _walk(source)
            facts["tree_digest"], facts["files"] = _tree_digest(source, files)
        else:  # what runs is the copy in site-packages
            facts["tree_digest"], facts["files"] = _installed_digest(dist)
    except (OSError, ValueError) as exc:
        errors.append(str(exc))
    if errors:
        facts["error"] = redact_text("; ".join(errors))
    return LocalPackage(**facts)


def _source_git(source: Path, env: Mapping[str, str] | None) -> tuple[str | None, bool | None, list[str] | None]:
    """HEAD, dirty flag and the non-ignored files under ``source`` when it lies in a git work tree."""
    if not source.is_dir() or shutil.which("git") is None:
        return None, None, None
    try:
        top = Path(_git(["rev-parse", "--show-toplevel"], source).strip())
        commit = _git(["rev-parse", "--verify", "HEAD^{commit}"], top).strip()
    except (_GitFailed, OSError):
        return None, None, None
    excludes = own_excludes(top, source, env)
    status = _git(["status", "--porcelain", "--untracked-files=all", "--", ".", *excludes], source)
    listed = _git(["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".", *excludes], source)
    files = sorted({p for p in listed.split("\0") if p and (source / p).is_file()})
    return commit, bool(status.strip()), files


def _walk(source: Path) -> list[str]:
    files: list[str] = []
    for root, dirs, names in os.walk(source):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
        for name in names:
            if not name.endswith((".pyc", ".pyo")):
                files.append(Path(root, name).relative_to(source).as_posix())
        if len(files) > MAX_TREE_FILES:
            break
    return sorted(files)


def _tree_digest(source: Path, files: Sequence[str]) -> tuple[str, int]:
    if len(files) > MAX_TREE_FILES:
        raise ValueError(f"{source} holds more than {MAX_TREE_FILES} files: not digested")
    total = hashlib.sha256()
    size = 0
    for rel in files:
        data = (source / rel).read_bytes()
        size += len(data)
        if size > MAX_TREE_BYTES:
            raise ValueError(f"{source} holds more than {MAX_TREE_BYTES >> 20} MiB: not digested")
        total.update(f"{rel}\0{hashlib.sha256(data).hexdigest()}\n".encode("utf-8", "surrogateescape"))
    return "sha256:" + total.hexdigest(), len(files)


def _installed_digest(dist: Any) -> tuple[str, int]:
    """A local non-editable install: the installed files as its RECORD hashes them."""
    entries = sorted(f"{f.as_posix()}\0{f.hash.value}" for f in (dist.files or []) if f.hash is not None)
    if not entries:
        raise ValueError("its RECORD lists no hashed files")
    return "sha256:" + hashlib.sha256("\n".join(entries).encode("utf-8", "surrogateescape")).hexdigest(), len(entries)


def _lock_file(search: Sequence[Path]) -> tuple[str | None, str | None]:
    for folder in search:
        for name in LOCK_FILES:
            path = folder / name
            if path.is_file():
                if name == "requirements.txt" and not _fully_pinned(path):
                    continue  # unpinned requirements are a wish, not a lock
                return name, "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    return None, None


def _fully_pinned(path: Path) -> bool:
    lines = [ln.split("#")[0].strip() for ln in path.read_text(errors="replace").splitlines()]
    reqs = [ln for ln in lines if ln and not ln.startswith("-")]
    return bool(reqs) and all("==" in ln for ln in reqs)


def _cpu() -> tuple[str | None, str | None]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or None, None
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
    flags_digest = None
    if flags:
        flags_digest = "sha256:" + hashlib.sha256(" ".join(sorted(flags.group(1).split())).encode()).hexdigest()
    return (model.group(1).strip() if model else None), flags_digest


def _torch_facts() -> dict[str, Any]:
    if importlib.util.find_spec("torch") is None:
        return {"torch_error": "torch is not installed"}
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - a broken torch is a fact to record
        return {"torch_error": f"torch failed to import: {exc}"}
    facts: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        facts["cudnn"] = str(cudnn) if cudnn else None
        if torch.cuda.is_available():
            count = torch.cuda.device_count()
            facts["accelerator"] = torch.cuda.get_device_name(0)
            facts["accelerator_count"] = count
            facts["driver"] = _nvidia_driver()
    except Exception as exc:  # noqa: BLE001
        facts["torch_error"] = f"could not query CUDA: {exc}"
    return facts


def _nvidia_driver() -> str | None:
    path = Path("/proc/driver/nvidia/version")
    if path.exists():
        match = re.search(r"Kernel Module\s+([\d.]+)", path.read_text())
        if match:
            return match.group(1)
    return None


def _threads(env: Mapping[str, str]) -> dict[str, Any]:
    threads: dict[str, Any] = {"cpu_count": os.cpu_count()}
    for name in THREAD_VARS:
        threads[name] = env.get(name)
    if "torch" in sys.modules:  # only read it when training already imported torch
        threads["torch_intra_op"] = sys.modules["torch"].get_num_threads()
    return threads


def _image(env: Mapping[str, str]) -> tuple[str | None, str | None]:
    ref = env.get(_settings.IMAGE.name) or None
    image_digest = env.get(_settings.IMAGE_DIGEST.name) or None
    if ref and "@sha256:" in ref and not image_digest:
        image_digest = ref.split("@", 1)[1]
    return ref, image_digest


def environment_info(env: Mapping[str, str] | None = None, *, search: Sequence[Path] = (Path("."),)) -> EnvironmentInfo:
    """Interpreter, platform, packages, lock file, image, accelerator and threads of *this* process."""
    env = os.environ if env is None else env
    lock_file, lock_digest = _lock_file(search)
    cpu_model, cpu_flags = _cpu()
    image_ref, image_digest = _image(env)
    variables = {k: redact_value(k, env[k]) for k in ENV_ALLOWLIST if k in env}
    return EnvironmentInfo(
        python=platform.python_version(),
        implementation=platform.python_implementation(),
        platform=platform.platform(),
        machine=platform.machine(),
        packages=installed_packages(),
        lock_file=lock_file,
        lock_digest=lock_digest,
        image_ref=image_ref,
        image_digest=image_digest,
        cpu_model=cpu_model,
        cpu_flags_digest=cpu_flags,
        threads=_threads(env),
        variables=variables,
        local_packages=local_packages(env),
        **_torch_facts(),
    )


def infrastructure_info(env: Mapping[str, str] | None = None) -> Infrastructure:
    env = os.environ if env is None else env
    try:
        world = int(env.get("WORLD_SIZE", "1"))
    except ValueError:
        world = 1
    return Infrastructure(
        world_size=world,
        hostname=socket.gethostname(),
        instance_type=env.get(_settings.INSTANCE_TYPE.name) or None,
    )


# -- data ------------------------------------------------------------------------
def parse_data_ref(spec: str) -> tuple[str, DataRef]:
    """``NAME=URI@VERSION`` -> (name, DataRef). A snapshot id (``blake3:…``) makes a snapshot ref."""
    name, sep, rest = spec.partition("=")
    if not sep or not name or not rest:
        raise BadInput(f"data ref {spec!r} is not NAME=URI@VERSION", hint="e.g. train=.repro/snapshots@blake3:…")
    uri, at, version = rest.rpartition("@")
    if not at:
        uri, version = rest, None
    elif "://" in version or "/" in version:  # the @ was part of the URI (user@host), not a version
        uri, version = rest, None
    return name.strip(), _data_ref(uri, version)


def _data_ref(uri: str, version: str | None) -> DataRef:
    if version and re.fullmatch(r"(blake3|sha256):[0-9a-f]{64}", version):
        return DataRef(kind="snapshot", uri=uri, version=version)
    if uri.startswith("delta+") or uri.endswith("_delta_log"):
        return DataRef(kind="delta", uri=uri, version=version)
    if uri.startswith("s3://") and version:
        return DataRef(kind="s3-versioned", uri=uri, version=version)
    if "://" not in uri and not uri.startswith((".", "/")) and "/" not in uri:
        return DataRef(kind="table", uri=uri, version=version)
    return DataRef(kind="path", uri=uri, version=version)


def _as_ref(value: str | DataRef | Mapping[str, Any]) -> DataRef:
    if isinstance(value, DataRef):
        return value
    if isinstance(value, Mapping):
        return DataRef.model_validate(dict(value))
    return parse_data_ref(f"x={value}")[1]


# -- the whole record ----------------------------------------------------------------
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
