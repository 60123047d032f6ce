"""Every gate rule, one case each: the finding's code, field path and severity."""

import pytest

from auditor.lineage.gate import GatePolicy, blocking, check
from auditor.lineage.record import DataRef
from tests.fixtures.records import complete_record


def _codes(record, **kw):
    return {(f.code, f.path, f.severity) for f in check(record, **kw)}


def test_a_complete_record_has_no_blocking_finding():
    assert blocking(check(complete_record())) == []


def _without(section):
    return complete_record(**{section: None})


def _edit(fn):
    record = complete_record().model_copy(deep=True)
    fn(record)
    return record


BLOCKING_CASES = [
    ("code.missing", "code", _without("code")),
    ("code.commit_missing", "code.commit", _edit(lambda r: setattr(r.code, "commit", None))),
    ("code.commit_malformed", "code.commit", _edit(lambda r: setattr(r.code, "commit", "main"))),
    ("code.repo_missing", "code.repo_url", _edit(lambda r: setattr(r.code, "repo_url", None))),
    ("code.dirty_unknown", "code.dirty", _edit(lambda r: setattr(r.code, "dirty", None))),
    ("code.dirty_without_diff", "code.diff_digest", _edit(lambda r: setattr(r.code, "dirty", True))),
    ("code.entrypoint_missing", "code.entrypoint", _edit(lambda r: setattr(r.code, "entrypoint", None))),
    ("data.missing", "data", complete_record(data={})),
    ("data.mutable_version", "data.train.version", _edit(lambda r: setattr(r.data["train"], "version", "latest"))),
    ("data.mutable_version", "data.train.version", _edit(lambda r: setattr(r.data["train"], "version", None))),
    ("data.snapshot_id_malformed", "data.train.version", _edit(lambda r: setattr(r.data["train"], "version", "v3"))),
    ("data.unhashed", "data.raw.content_hash", complete_record(data={"raw": DataRef(kind="table", uri="customers", version="2026-01-01", split={})})),
    ("config.missing", "config", _without("config")),
    ("config.digest_missing", "config.digest", _edit(lambda r: setattr(r.config, "digest", None))),
    ("config.digest_mismatch", "config.digest", _edit(lambda r: r.config.resolved.update(lr=1.0))),
    ("environment.missing", "environment", _without("environment")),
    ("environment.python_missing", "environment.python", _edit(lambda r: setattr(r.environment, "python", None))),
    ("environment.image_tag_only", "environment.image_digest", _edit(lambda r: (setattr(r.environment, "image_digest", None), setattr(r.environment, "image_ref", "trainer:latest")))),
    ("environment.image_digest_malformed", "environment.image_digest", _edit(lambda r: setattr(r.environment, "image_digest", "latest"))),
    ("environment.packages_missing", "environment.packages", _edit(lambda r: (setattr(r.environment, "packages", {}), setattr(r.environment, "image_digest", None), setattr(r.environment, "image_ref", None)))),
    ("seeds.missing", "seeds", _without("seeds")),
    ("seeds.none", "seeds.generators", _edit(lambda r: (setattr(r.seeds, "seed", None), setattr(r.seeds, "generators", {}), setattr(r.seeds, "used", [])))),
    ("seeds.generator_unseeded", "seeds.generators.dataloader", _edit(lambda r: r.seeds.generators.pop("dataloader"))),
]


@pytest.mark.parametrize("code,path,record", BLOCKING_CASES, ids=[f"{c[0]}:{i}" for i, c in enumerate(BLOCKING_CASES)])
def test_each_blocking_rule_names_its_field(code, path, record):
    assert (code, path, "blocking") in _codes(record)


def test_a_missing_image_blocks_only_when_the_policy_requires_one():
    record = _edit(lambda r: (setattr(r.environment, "image_digest", None), setattr(r.environment, "image_ref", None)))
    assert ("environment.no_image", "environment.image_digest", "warning") in _codes(record)
    assert ("environment.image_missing", "environment.image_digest", "blocking") in _codes(record, policy=GatePolicy(require_image=True))


def test_a_diff_altered_after_training_blocks():
    record = _edit(lambda r: (setattr(r.code, "dirty", True), setattr(r.code, "diff_digest", "sha256:" + "0" * 64)))
    assert ("code.dirty", "code.dirty", "warning") in _codes(record)
    assert ("code.diff_mismatch", "code.diff_digest", "blocking") in _codes(record, diff="edited\n")


WARNING_CASES = [
    ("seeds.nondeterministic", "seeds.deterministic", _edit(lambda r: setattr(r.seeds, "deterministic", False))),
    ("seeds.hashseed_random", "seeds.pythonhashseed", _edit(lambda r: setattr(r.seeds, "pythonhashseed", "unset"))),
    ("data.split_missing", "data.train.split", _edit(lambda r: setattr(r.data["train"], "split", None))),
    ("infrastructure.missing", "infrastructure", _without("infrastructure")),
    ("outputs.no_metrics", "outputs.metrics", _edit(lambda r: setattr(r.outputs, "metrics", {}))),
    ("outputs.no_artifacts", "outputs.artifacts", _edit(lambda r: setattr(r.outputs, "artifacts", []))),
]


@pytest.mark.parametrize("code,path,record", WARNING_CASES, ids=[c[0] for c in WARNING_CASES])
def test_each_warning_rule_warns_without_blocking(code, path, record):
    assert (code, path, "warning") in _codes(record)
    assert blocking(check(record)) == []
