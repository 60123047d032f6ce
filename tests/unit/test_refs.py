"""Model references are parsed exactly as MLflow writes them, and every other spelling is refused by name."""

from __future__ import annotations

import pytest

from auditor.errors import BadInput
from auditor.uris import ModelRef, parse_ref


@pytest.mark.parametrize(
    ("ref", "name", "version", "alias"),
    [
        ("models:/churn/3", "churn", "3", None),
        ("models:/churn/12", "churn", "12", None),
        ("models:/churn@champion", "churn", None, "champion"),
        ("models:/churn@shadow-2024_q1", "churn", None, "shadow-2024_q1"),
        ("models:/fraud model v2/1", "fraud model v2", "1", None),  # MLflow allows spaces in names
        ("models:/a.b-c_d/7", "a.b-c_d", "7", None),
        ("models:/team@ml@prod", "team@ml", None, "prod"),  # MLflow splits on the last '@'
    ],
)
def test_valid_references_parse_to_name_and_exactly_one_of_version_or_alias(ref, name, version, alias):
    parsed = parse_ref(ref)
    assert (parsed.name, parsed.version, parsed.alias) == (name, version, alias)
    assert parsed.uri == ref


def test_a_version_with_leading_zeros_is_normalised_the_way_mlflow_reads_it():
    assert parse_ref("models:/churn/007").version == "7"


@pytest.mark.parametrize(
    ("ref", "why"),
    [
        ("runs:/abc/model", "does not start with 'models:/'"),
        ("models:/", "names no model"),
        ("models://churn/3", "does not start with 'models:/'"),
        ("models:/churn", "neither a version nor an alias"),
        ("models:/churn/latest", "'latest'"),
        ("models:/churn/Latest", "'latest'"),
        ("models:/churn/Production", "not a number"),
        ("models:/churn/0", "version 0"),
        ("models:/churn/", "empty version"),
        ("models:/churn/3/extra", "more than one '/'"),
        ("models:/churn@", "empty alias"),
        ("models:/churn@latest", "reserves"),
        ("models:/churn@v3", "reserves"),
        ("models:/churn@bad alias", "aliases are letters"),
        ("models:/@champion", "empty model name"),
        ("models:/ /3", "empty model name"),
        ("models:/a:b/3", "containing ':'"),
        ("models:/churn@x/3", "both an alias and a version"),
        ("models:/churn/3?x=1", "no query or fragment"),
        ("models:/churn/3 ", "whitespace"),
        ("models:/churn/³", "not a number"),
    ],
)
def test_bad_references_are_refused_with_bad_input_naming_the_reference(ref, why):
    with pytest.raises(BadInput) as caught:
        parse_ref(ref)
    message = str(caught.value)
    assert repr(ref) in message
    assert why in message
    assert "models:/NAME/VERSION" in message  # the hint says what to write instead
    assert caught.value.exit_code == 2


def test_a_non_string_reference_is_bad_input():
    with pytest.raises(BadInput, match="must be a string"):
        parse_ref(3)  # type: ignore[arg-type]


def test_a_model_ref_needs_exactly_one_of_version_or_alias():
    with pytest.raises(BadInput):
        ModelRef(name="x")
    with pytest.raises(BadInput):
        ModelRef(name="x", version="1", alias="a")
    assert str(ModelRef(name="x", alias="a")) == "models:/x@a"
