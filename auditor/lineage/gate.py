"""The lineage gate: is every input of a run named by an immutable identifier?

``check(record)`` returns findings; a *blocking* finding means the run cannot be
reproduced as recorded (refuse to register it; an audit judges it
NOT_REPRODUCIBLE); a *warning* means it can, with a caveat worth reading.
Pure: no I/O. Every rule has a stable code, a field path and a fix hint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from auditor.canonical import digest as canonical_digest
from auditor.canonical import flatten
from auditor.digests import DATA_VERSION_ID, SHA256_DIGEST, sha256_digest
from auditor.lineage.findings import Finding
from auditor.lineage.record import RunRecord
from auditor.lineage.redact import is_redacted, redacted_diff_lines
from auditor.lineage.traced import registration_findings
from auditor.settings import IMAGE, IMAGE_DIGEST

MUTABLE_VERSIONS = {"", "latest", "head", "current", "main", "master", "live", "prod", "production", "newest", "tip"}
_COMMIT = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


@dataclass(frozen=True)
class GatePolicy:
    """What the organisation demands beyond the defaults."""

    require_image: bool = False  # True in production: every run must name a container image by digest


def _block(code: str, path: str, message: str, hint: str) -> Finding:
    return Finding(code=code, path=path, severity="blocking", message=message, hint=hint)


def _warn(code: str, path: str, message: str, hint: str) -> Finding:
    return Finding(code=code, path=path, severity="warning", message=message, hint=hint)


def check(record: RunRecord, *, diff: str | None = None, policy: GatePolicy = GatePolicy()) -> list[Finding]:
    """Every finding on ``record``; pass the stored ``diff`` to have its digest checked."""
    findings: list[Finding] = []
    findings += _code(record, diff)
    findings += _data(record)
    findings += _config(record)
    findings += _environment(record, policy)
    findings += _seeds(record)
    findings += _infrastructure(record)
    findings += _outputs(record)
    findings += registration_findings(record)  # traced inputs and local packages, by name (warnings)
    return findings


def blocking(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.blocking]


def _code(record: RunRecord, diff: str | None) -> list[Finding]:
    code = record.code
    if code is None:
        return [_block("code.missing", "code", "no code section", "capture the run with auditor.track or lineage capture")]
    out: list[Finding] = []
    why = f" ({code.git_error})" if code.git_error else ""
    if not code.commit:
        out.append(_block("code.commit_missing", "code.commit", f"no commit recorded{why}", "train from a git repository with at least one commit"))
    elif not _COMMIT.fullmatch(code.commit):
        out.append(_block("code.commit_malformed", "code.commit", f"{code.commit!r} is not a full commit id", "record the full 40-hex id from git rev-parse HEAD"))
    if not code.repo_url:
        out.append(_block("code.repo_missing", "code.repo_url", "no repository URL recorded", "set a git remote 'origin' the audit can clone"))
    if code.dirty is None:
        out.append(_block("code.dirty_unknown", "code.dirty", "whether the tree was clean is unknown", "capture with git available"))
    elif code.dirty:
        if not code.diff_digest:
            out.append(_block("code.dirty_without_diff", "code.diff_digest", "the tree was dirty and no diff was stored", "commit your changes, or capture with the SDK so the diff is stored"))
        else:
            out.append(_warn("code.dirty", "code.dirty", "trained from uncommitted changes (the diff is stored and will be applied)", "commit before training"))
            where = redacted_diff_lines(diff) if diff is not None else []
            for place in where:
                # the rebuild still runs: the file holds the marker where the secret was (README: secrets in the diff)
                out.append(_warn("code.diff_secret", f"code.diff:{place}", f"a changed line of {place} held a secret; it is stored redacted, and the rebuild sees the marker there", "keep secrets out of source files: read them from the environment at run time"))
            if code.diff_redactions and not where:
                out.append(_warn("code.diff_redacted", "code.diff_digest", f"{code.diff_redactions} added line(s) of the diff held secrets and were redacted; the rebuild sees markers there", "keep secrets out of source files"))
            if diff is not None and sha256_digest(diff) != code.diff_digest:
                out.append(_block("code.diff_mismatch", "code.diff_digest", "the stored diff does not match its recorded digest", "the diff was altered after training; re-train"))
    if not code.entrypoint:
        out.append(_block("code.entrypoint_missing", "code.entrypoint", "no entrypoint command recorded", "record the argv that trains the model"))
    return out


def _data(record: RunRecord) -> list[Finding]:
    if not record.data:
        return [_block("data.missing", "data", "no data input recorded", "pass data={'train': '<store>@<snapshot id>'} to track()")]
    out: list[Finding] = []
    for name, ref in record.data.items():
        path = f"data.{name}"
        version = (ref.version or "").strip()
        if version.lower() in MUTABLE_VERSIONS:
            shown = "no version" if not version else f"the mutable version {version!r}"
            out.append(_block("data.mutable_version", f"{path}.version", f"{ref.uri!r} is named by {shown}", "snapshot it (repro-audit snapshot create) and record the snapshot id"))
        elif ref.kind == "snapshot" and not DATA_VERSION_ID.fullmatch(version):
            out.append(_block("data.snapshot_id_malformed", f"{path}.version", f"{version!r} is not a snapshot id", "use the blake3:<hex> id printed by snapshot create"))
        elif ref.kind != "snapshot" and not ref.content_hash:
            out.append(_block("data.unhashed", f"{path}.content_hash", f"{ref.kind} {ref.uri!r} has a version label but no content hash", "snapshot it so its bytes are hashed"))
        if ref.split is None:
            out.append(_warn("data.split_missing", f"{path}.split", "how the data was split is not recorded",
                            f"record it after the split: run.record_split({name!r}, \"random 80/20 by row\", seed=run.seed)"))
    return out


def _config(record: RunRecord) -> list[Finding]:
    config = record.config
    if config is None:
        return [_block("config.missing", "config", "no configuration recorded", "pass config= to track()")]
    out: list[Finding] = []
    if not config.digest:
        out.append(_block("config.digest_missing", "config.digest", "the resolved config has no digest", "capture the config with resolve_config()"))
    elif config.digest != canonical_digest(config.resolved):
        out.append(_block("config.digest_mismatch", "config.digest", "the resolved config does not match its digest", "the record was edited; re-capture it"))
    redacted = sorted(k for k, v in flatten(config.resolved).items() if is_redacted(v))
    for key in redacted:
        out.append(_warn("config.redacted", f"config.resolved.{key}", "a secret-looking value was redacted; a rebuild sees the marker", "read secrets from the environment at run time, not from the config"))
    return out


def _environment(record: RunRecord, policy: GatePolicy) -> list[Finding]:
    env = record.environment
    if env is None:
        return [_block("environment.missing", "environment", "no environment recorded", "capture with the SDK")]
    out: list[Finding] = []
    if not env.python:
        out.append(_block("environment.python_missing", "environment.python", "no interpreter version", "capture with the SDK"))
    if not env.packages and not env.lock_digest and not env.image_digest:
        out.append(_block("environment.packages_missing", "environment.packages", "no package list, lock file or image digest", "capture with the SDK (it lists every installed distribution)"))
    if env.image_ref and not env.image_digest:
        out.append(_block("environment.image_tag_only", "environment.image_digest", f"image {env.image_ref!r} is named by tag only", f"pass {IMAGE_DIGEST.name}=sha256:… (the digest the orchestrator pulled)"))
    elif env.image_digest and not SHA256_DIGEST.fullmatch(env.image_digest):
        out.append(_block("environment.image_digest_malformed", "environment.image_digest", f"{env.image_digest!r} is not sha256:<64 hex>", "record the image's content digest"))
    elif not env.image_ref and not env.image_digest:
        if policy.require_image:
            out.append(_block("environment.image_missing", "environment.image_digest", "no container image recorded", f"train in an image and pass {IMAGE.name} and {IMAGE_DIGEST.name}"))
        else:
            out.append(_warn("environment.no_image", "environment.image_digest", "no container image: the rebuild runs in whatever environment the auditor has; drift is reported", "train in an image pinned by digest"))
    return out


def _seeds(record: RunRecord) -> list[Finding]:
    seeds = record.seeds
    if seeds is None:
        return [_block("seeds.missing", "seeds", "no seeds recorded", "call seed_everything(seed) (track(seed=…) does)")]
    out: list[Finding] = []
    if seeds.seed is None and not seeds.generators:
        out.append(_block("seeds.none", "seeds.generators", "no generator has a recorded seed", "call seed_everything(seed)"))
    for name in seeds.used:
        if name not in seeds.generators:
            out.append(_block("seeds.generator_unseeded", f"seeds.generators.{name}", f"generator {name!r} is used but has no recorded seed", "seed it through seed_everything / dataloader_kwargs"))
    if seeds.deterministic is False or seeds.flags.get("use_deterministic_algorithms") is False:
        out.append(_warn("seeds.nondeterministic", "seeds.deterministic", "deterministic algorithms were off: on a GPU a rerun may then match only statistically (the report's expected tier says what this run should reach)", "seed_everything(seed, deterministic=True)"))
    if seeds.pythonhashseed in (None, "unset", "random"):
        out.append(_warn("seeds.hashseed_random", "seeds.pythonhashseed", "PYTHONHASHSEED was not set, so Python salted str hashes at random: iterating a set of strings can give another order in a rebuild",
                         "launch training as `PYTHONHASHSEED=0 python train.py` (it acts only at interpreter start)"))
    return out


def _infrastructure(record: RunRecord) -> list[Finding]:
    if record.infrastructure is None:
        return [_warn("infrastructure.missing", "infrastructure", "world size and host not recorded", "capture with the SDK")]
    return []


def _outputs(record: RunRecord) -> list[Finding]:
    out: list[Finding] = []
    if not record.outputs.metrics:
        out.append(_warn("outputs.no_metrics", "outputs.metrics", "no metrics recorded: nothing for a rebuild to be compared with", "log evaluation metrics"))
    if not record.outputs.artifacts:
        out.append(_warn("outputs.no_artifacts", "outputs.artifacts", "no artifact recorded: artifact recovery cannot be checked", "save weights with run.save_weights"))
    return out
