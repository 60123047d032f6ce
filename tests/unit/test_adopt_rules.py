"""The adoption rules (``auditor.adopt.rules``): each input's class from plain-MLflow metadata, and how it is fooled.

Pure: metadata as ``auditor.adopt.mlflow_reader`` hands it over (the reader itself runs against real MLflow in
tests/integration/test_adopt_registry.py and test_adopt_scale.py).
"""

from __future__ import annotations

import pytest

from auditor.adopt.assess import assessment, is_assessment
from auditor.adopt.rules import FIXES, MISSING, MUTABLE, PINNED, RULES, SECTIONS, Dataset, Metadata, Supplied, classify
from auditor.outcomes import Verdict

COMMIT = "a" * 40
GOOD_ENV = {"python_env.yaml": "python: 3.11.7\nbuild_dependencies:\n- pip==24.0\n",
            "requirements.txt": "mlflow==3.17.0\nscikit-learn==1.9.1\n"}


def meta(**kw) -> Metadata:
    base = dict(name="m", version="1", run_id="r1", run_found=True, source="/x",
                tags={"mlflow.source.git.commit": COMMIT, "mlflow.source.name": "train.py", "repro.dirty": "false"},
                params={"random_state": "42", "n_estimators": "10"},
                datasets=(Dataset(name="churn", source_type="delta_table", source={"path": "/lake/churn", "delta_table_version": 3}),),
                env_files=GOOD_ENV)
    base.update(kw)
    return Metadata(**base)


def classes(m: Metadata) -> dict[str, str]:
    out: dict[str, str] = {}
    order = (PINNED, MUTABLE, MISSING)
    for r in classify(m):
        if order.index(r.klass) >= order.index(out.get(r.section, PINNED)):
            out[r.section] = r.klass
    return out


def test_every_input_has_one_rule_and_every_non_pinned_class_one_fix():
    assert tuple(RULES) == SECTIONS
    assert set(FIXES) == {(s, k) for s in SECTIONS for k in (MUTABLE, MISSING)}
    assert all(len(fix.splitlines()) == 1 for fix in FIXES.values())


def test_a_fully_pinned_version_still_misses_its_infrastructure_and_is_never_a_pass():
    m = meta()
    assert classes(m) == {"code": PINNED, "data": PINNED, "config": PINNED, "environment": PINNED, "seeds": PINNED,
                          "infrastructure": MISSING}
    result = assessment(m, date="2026-12-02", started_at="t", finished_at="t")
    assert result.verdict is Verdict.LINEAGE_INSUFFICIENT and not result.verdict.reproduced
    assert result.audit_id == "adopt-2026-12-02" and is_assessment(result.audit_id, result.verdict.value)
    # even with every input pinned (image by digest), nothing was rebuilt: still not a pass, the tier is not "pass"
    image = {"repro.image_digest": "reg/train@sha256:" + "b" * 64}
    every = assessment(meta(tags={**m.tags, **image}), date="2026-12-02", started_at="t", finished_at="t")
    assert every.verdict is Verdict.LINEAGE_INSUFFICIENT and every.tiers["lineage"].status != "pass"


@pytest.mark.parametrize(("tags", "expected", "why"), [
    ({"mlflow.source.git.commit": COMMIT, "mlflow.source.name": "t.py"}, MUTABLE, "does not record whether the tree was clean"),
    ({"mlflow.source.git.commit": COMMIT, "mlflow.source.name": "t.py", "repro.dirty": "true"}, MUTABLE, "recorded as dirty"),
    ({"mlflow.source.git.commit": COMMIT, "repro.dirty": "false"}, MUTABLE, "no entry point"),
    ({"mlflow.source.name": "nb.ipynb"}, MUTABLE, "without a commit"),
    ({}, MISSING, "no source"),
])
def test_a_commit_is_pinned_only_on_a_tree_recorded_as_clean(tags, expected, why):
    (row,) = RULES["code"](meta(tags=tags))
    assert row.klass == expected and why in row.why


@pytest.mark.parametrize(("dataset", "expected"), [
    (Dataset(name="t", source_type="delta_table", source={"path": "/lake/t", "delta_table_version": 0}), PINNED),
    (Dataset(name="t", source_type="delta_table", source={"delta_table_name": "main.t"}), MUTABLE),  # latest
    (Dataset(name="t", source_type="s3", source={"uri": "s3://b/k.parquet"}), MUTABLE),
    (Dataset(name="t", source_type="s3", source={"uri": "s3://b/k.parquet?versionId=3HL4kqtJ"}), PINNED),
    (Dataset(name="t", source_type="local", source={"uri": "/data/train.csv"}), MUTABLE),
    (Dataset(name="t", source_type="code", source={"tags": {}}, digest="1a2b3c4d"), MUTABLE),
    (Dataset(name="t", source_type="http", source={"url": "https://x/snap@blake3:" + "c" * 64}), PINNED),
    (Dataset(name="t", source_type="local", source={"uri": "/data/latest"}), MUTABLE),
    # a content id in a name or a tag is not where the data was read from
    (Dataset(name="blake3:" + "c" * 64, source_type="local", source={"uri": "/d.csv", "note": "blake3:" + "c" * 64}), MUTABLE),
])
def test_data_is_pinned_only_by_a_version_or_a_content_id_never_by_mlflows_digest(dataset, expected):
    (row,) = RULES["data"](meta(datasets=(dataset,)))
    assert row.klass == expected, row
    if expected == MUTABLE and dataset.source_type != "delta_table":
        assert "does not pin it" in row.why


def test_the_worst_dataset_decides_the_data_class():
    pinned = Dataset(name="a", source_type="delta_table", source={"path": "/t", "delta_table_version": 2})
    loose = Dataset(name="b", source_type="local", source={"uri": "/x.csv"})
    assert classes(meta(datasets=(pinned, loose)))["data"] == MUTABLE
    assert classes(meta(datasets=()))["data"] == MISSING


@pytest.mark.parametrize(("params", "expected"), [
    ({"random_state": "42"}, PINNED),
    ({"clf__random_state": "7", "split__random_state": "7"}, PINNED),
    ({"clf__random_state": "7", "cv__random_state": "None"}, MISSING),  # one unseeded estimator is enough
    ({"random_state": "RandomState(MT19937)"}, MUTABLE),
    ({"n_estimators": "10"}, MISSING),
    ({"seed": "0"}, PINNED),
    ({"bagging_seed": "3"}, PINNED),
])
def test_seeds_are_pinned_only_when_every_logged_seed_is_an_integer(params, expected):
    (row,) = RULES["seeds"](meta(params=params))
    assert row.klass == expected


def test_a_config_file_named_by_path_is_mutable_and_no_params_is_missing():
    assert RULES["config"](meta(params={"config": "conf/train.yaml", "lr": "0.1"}))[0].klass == MUTABLE
    assert RULES["config"](meta(params={}))[0].klass == MISSING
    assert RULES["config"](meta(params={"repro.seed": "1"}))[0].klass == MISSING  # our own params are not its config


@pytest.mark.parametrize(("files", "tags", "expected"), [
    (GOOD_ENV, {}, PINNED),
    ({"requirements.txt": "mlflow==3.17.0\nnumpy>=2\n", "python_env.yaml": "python: 3.11.7\n"}, {}, MUTABLE),
    ({"requirements.txt": "mlflow==3.17.0\n"}, {}, MUTABLE),  # the Python version is not recorded
    ({"requirements.txt": "torch===2.13.0\n", "python_env.yaml": "python: 3.11\n"}, {}, PINNED),
    ({}, {}, MISSING),
    ({}, {"image": "python:3.11"}, MISSING),  # an image by tag is not an environment
    ({}, {"image": "reg/x@sha256:" + "d" * 64}, PINNED),
])
def test_the_environment_is_pinned_by_exact_requirements_or_an_image_digest(files, tags, expected):
    (row,) = RULES["environment"](meta(env_files=files, tags=tags))
    assert row.klass == expected, row


def test_infrastructure_is_pinned_only_by_an_image_digest():
    assert RULES["infrastructure"](meta(tags={"image": "python:3.11"}))[0].klass == MUTABLE
    assert RULES["infrastructure"](meta(tags={"instance_type": "m5.large"}))[0].klass == MUTABLE
    assert RULES["infrastructure"](meta(tags={}))[0].klass == MISSING


def test_a_version_with_no_run_is_missing_everything():
    m = Metadata(name="m", version="1", source=None)
    assert set(classes(m).values()) == {MISSING}


def test_what_an_owner_supplied_is_pinned_and_says_it_came_after_training():
    s = Supplied(by="Dana Risk", at="2026-12-02T10:00:00Z", data={"train": "s3://b/snaps@blake3:" + "e" * 64}, seed=5)
    rows = {r.path: r for r in classify(Metadata(name="m", version="1", supplied=s))}
    assert rows["data.train"].klass == PINNED and rows["data.train"].supplied_by == "Dana Risk"
    assert "supplied after training by Dana Risk" in rows["data.train"].why
    assert rows["seeds"].klass == PINNED and rows["code"].klass == MISSING
    result = assessment(Metadata(name="m", version="1", supplied=s), date="d", started_at="t", finished_at="t")
    assert result.verdict is Verdict.LINEAGE_INSUFFICIENT
    assert any("supplied after training" in f.message for f in result.findings)


def test_supplied_values_are_checked_at_the_door():
    from auditor.adopt import supplied
    from auditor.errors import BadInput

    good = "blake3:" + "f" * 64
    assert supplied.parse_data([f"train=s3://b/snaps@{good}"]) == {"train": f"s3://b/snaps@{good}"}
    for bad in ("train=s3://b/x@latest", "train", "=s3://b@" + good, f"train=@{good}", "train=s3://b/x@v3"):
        with pytest.raises(BadInput):
            supplied.parse_data([bad])
    with pytest.raises(BadInput, match="given twice"):
        supplied.parse_data([f"t=s@{good}", f"t=s@{good}"])
    with pytest.raises(BadInput):
        supplied.check_image("python:3.11")


def test_the_verdict_has_one_home_and_exits_1():
    from auditor.outcomes import VERDICTS

    meaning = VERDICTS[Verdict.LINEAGE_INSUFFICIENT]
    assert meaning.exit_code == 1 and not meaning.reproduced and meaning.task == "fail"


def test_a_supplied_record_is_held_to_its_anchor_and_to_its_version():
    import json

    from auditor.adopt import supplied
    from auditor.digests import sha256_digest
    from auditor.errors import Findings

    doc = supplied.document(name="m", version="3", run_id=None, data={"train": "s@blake3:" + "a" * 64}, image=None,
                            seed=None, by="Dana Risk", at="2026-12-02T10:00:00Z")
    raw = json.dumps(doc).encode()
    assert supplied.load(raw, key="k", expected_sha256=sha256_digest(raw), model=("m", "3")).by == "Dana Risk"
    with pytest.raises(Findings, match="another record"):  # a tag re-pointed at another version's record
        supplied.load(raw, key="k", expected_sha256=sha256_digest(raw), model=("m", "4"))
    with pytest.raises(Findings, match="changed after it was attached"):
        supplied.load(raw + b" ", key="k", expected_sha256=sha256_digest(raw), model=("m", "3"))
    with pytest.raises(Findings, match="no param"):
        supplied.load(raw, key="k", expected_sha256=None)
