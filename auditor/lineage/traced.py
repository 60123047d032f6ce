"""What was traced, judged: the gate's warnings at registration, the audit's findings after a rebuild. Pure.

``auditor.lineage.tracing`` records the inputs a training process read outside the record
(``RunRecord.traced``) and the record's environment lists the packages installed from local
folders (``environment.local_packages``). This module says what they mean:

* ``registration_findings(record)``: a warning per traced input and per local package, by name,
  with the fix (snapshot or commit the file, pass the variable through the config, publish the
  package);
* ``compare(recorded, rebuilt)``: after a rebuild, a *blocking* finding for every traced input
  that differs between training and the rebuild (content, existence, or read on one side only)
  and every local package whose content digest differs: the rebuild ran from other inputs than
  the record claims.
"""

from __future__ import annotations

import re

from auditor.lineage.findings import Finding
from auditor.lineage.record import RunRecord, TracedInputs
from auditor.lineage.redact import is_secret_key

#: the auditor's own distribution: recorded among local packages when installed editable, but never
#: a reason to block (its version is ``tool_version``; the report's drift still shows a change)
OWN_DISTRIBUTION = "repro-audit"
#: how a traced file inside the repository is named (its path relative to the repository's top)
REPO_PREFIX = "$REPO/"


# -- what the gate and the audit say -----------------------------------------------------------
def _warn(code: str, path: str, message: str, hint: str) -> Finding:
    return Finding(code=code, path=path, severity="warning", message=message, hint=hint)


def _block(code: str, path: str, message: str, hint: str) -> Finding:
    return Finding(code=code, path=path, severity="blocking", message=message, hint=hint)


def _short(digest: str | None) -> str:
    if digest is None:
        return "absent"
    return digest if digest.startswith("<redacted:") else digest[:19] + "…"


FILE_HINT = "snapshot it (and pass it in data=) or commit it"
#: the fix for a file git ignores inside the repository that was there before training began (a file the run
#: writes and reads back inside the block is its output and never traced)
CACHED_HINT = ("it existed before the run began: if an earlier run made it (a cache, a saved search or model), remove it "
               "before training or have the run write it again each time; if it is data, snapshot it (data=) or commit it")


def file_hint(path: str) -> str:
    """The fix that fits a traced file: one git ignores inside the repository is most often an earlier run's output."""
    return CACHED_HINT if path.startswith(REPO_PREFIX) else FILE_HINT
ENV_HINT = "pass it through the config (a config key, REPRO_CFG__NAME or key=value) instead of the environment"
PACKAGE_HINT = "publish it as a versioned package (pinned by version), or vendor it into the repository"


def registration_findings(record: RunRecord) -> list[Finding]:
    """The gate's warnings: every traced input and every local package, by name. Pure."""
    out: list[Finding] = []
    traced = record.traced
    if traced is not None:
        for i, entry in enumerate(traced.files):
            if entry.sha256 is None and entry.error is None:
                message = f"tried to read {entry.path}, which did not exist: whether it exists is an input the record does not pin"
            else:
                message = f"read {entry.path} outside the snapshots ({entry.size} bytes): the record does not pin it"
            out.append(_warn("traced.file", f"traced.files[{i}]", message, FILE_HINT))
        for i, variable in enumerate(traced.env):
            # a variable read while unset (a library's switch, SCIPY_ARRAY_API, say) is pinned by the record as unset:
            # a rebuild starts from a short allow-list plus the recorded pins, and one that finds it set is refused (compare)
            if variable.sha256 is not None:
                out.append(_warn("traced.env", f"traced.env[{i}]", f"read environment variable {variable.name} (set): the record does not pin its value", ENV_HINT))
    environment = record.environment
    if environment is not None:
        for name, pkg in environment.local_packages.items():
            if name == OWN_DISTRIBUTION:
                continue
            kind = "in editable mode from" if pkg.editable else "from the local folder"
            pinned = f"commit {pkg.commit[:12]}{', dirty' if pkg.dirty else ''}, " if pkg.commit else ""
            where = f"environment.local_packages.{name}"
            out.append(_warn("environment.local_package", where, f"{name} {pkg.version} is installed {kind} {pkg.path} ({pinned}content {_short(pkg.tree_digest)}): code outside the repository; the audit runs whatever that folder holds then", PACKAGE_HINT))
            if pkg.tree_digest is None:
                out.append(_warn("environment.local_package_undigested", f"{where}.tree_digest", f"{name}'s content could not be digested ({pkg.error or 'unknown reason'}): a change to it cannot be detected", PACKAGE_HINT))
    return out


def compare(recorded: RunRecord, rebuilt: RunRecord) -> list[Finding]:
    """Findings when the rebuild read other inputs than training did. Pure.

    Blocking: a traced file whose content (or existence) differs, or that only one side read; an
    environment variable whose value (or being set) differs, or that only one side read; a local
    package whose content digest differs (the auditor's own distribution excepted). A warning when
    either side was not traced, and for a secret-looking variable (a rebuild never receives the
    auditor's secrets). ``recorded`` is the registered record, ``rebuilt`` the rebuild's own
    (``REPRO_OUTPUT_DIR/run_record.json``).
    """
    out: list[Finding] = []
    if recorded.traced is None or rebuilt.traced is None:
        side = "training" if recorded.traced is None else "the rebuild"
        out.append(_warn("traced.not_traced", "traced", f"{side} was not traced: inputs read outside the record cannot be compared", "train and rebuild with an SDK that traces (auditor.track)"))
    else:
        out += _compare_files(recorded.traced, rebuilt.traced)
        out += _compare_env(recorded.traced, rebuilt.traced)
    if recorded.environment is not None and rebuilt.environment is not None:
        out += _compare_packages(recorded, rebuilt)
    return out


def _compare_files(a: TracedInputs, b: TracedInputs) -> list[Finding]:
    before, after = {f.path: f for f in a.files}, {f.path: f for f in b.files}
    out: list[Finding] = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        where = f"traced.files.{path}"
        if old is not None and new is not None:
            if (old.sha256, old.error) != (new.sha256, new.error):
                out.append(_block("traced.file_changed", where, f"file {path} read by training ({_short(old.sha256)}) differs in the rebuild ({_short(new.sha256)}): the rebuild ran from another input", file_hint(path)))
        elif old is not None:
            out.append(_block("traced.file_not_read", where, f"training read file {path} ({_short(old.sha256)}); the rebuild did not: it took another path or the file is gone", file_hint(path)))
        else:
            out.append(_block("traced.file_new", where, f"the rebuild read file {path} ({_short(new.sha256)}), which training did not read", file_hint(path)))
    return out


def _compare_env(a: TracedInputs, b: TracedInputs) -> list[Finding]:
    before, after = {v.name: v.sha256 for v in a.env}, {v.name: v.sha256 for v in b.env}
    out: list[Finding] = []
    for name in sorted(before.keys() | after.keys()):
        where = f"traced.env.{name}"
        make = _warn if is_secret_key(name) else _block
        why = " (a rebuild never receives the auditor's secrets)" if make is _warn else ""
        if name in before and name in after:
            if before[name] != after[name]:
                out.append(make("traced.env_changed", where, f"environment variable {name} was {_state(before[name])} in training and {_state(after[name])} in the rebuild{why}", ENV_HINT))
        elif name in before:
            out.append(make("traced.env_not_read", where, f"training read environment variable {name} ({_state(before[name])}); the rebuild did not{why}", ENV_HINT))
        else:
            out.append(make("traced.env_new", where, f"the rebuild read environment variable {name} ({_state(after[name])}), which training did not{why}", ENV_HINT))
    return out


def _state(digest: str | None) -> str:
    return "unset" if digest is None else f"set ({_short(digest)})"


def _compare_packages(recorded: RunRecord, rebuilt: RunRecord) -> list[Finding]:
    def normal(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    before = {normal(k): v for k, v in recorded.environment.local_packages.items()}  # type: ignore[union-attr]
    after = {normal(k): v for k, v in rebuilt.environment.local_packages.items()}  # type: ignore[union-attr]
    out: list[Finding] = []
    for name in sorted(before.keys() | after.keys()):
        if name == OWN_DISTRIBUTION:
            continue
        old, new = before.get(name), after.get(name)
        where = f"environment.local_packages.{name}"
        if old is not None and new is not None:
            if old.tree_digest is None and new.tree_digest is None:
                out.append(_warn("environment.local_package_undigested", f"{where}.tree_digest", f"local package {name} ({new.path}) could not be digested ({new.error or old.error}): whether its code changed is unknown", PACKAGE_HINT))
            elif old.tree_digest != new.tree_digest:
                commits = f"; commit {old.commit or '?'} → {new.commit or '?'}" if old.commit != new.commit else ""
                version = f" (version {old.version} both times)" if old.version == new.version else f" ({old.version} → {new.version})"
                out.append(_block("environment.local_package_changed", f"{where}.tree_digest", f"local package {name} at {new.path} holds other code than at training{version}: content {_short(old.tree_digest)} → {_short(new.tree_digest)}{commits}", PACKAGE_HINT))
        elif old is not None:
            out.append(_block("environment.local_package_changed", where, f"local package {name} ({old.path}) used in training is not installed from a local folder in the rebuild", PACKAGE_HINT))
        else:
            out.append(_block("environment.local_package_changed", where, f"the rebuild uses local package {name} ({new.path}), which training did not", PACKAGE_HINT))
    return out
