"""One rule for model names, where they enter (issue 42, build point 9).

A name is registered only when the audit would accept a reference to it: a bidi control (U+202E) or any other
character the screen does not show as itself is refused at registration, naming the code point and the fix, and
nothing is registered; a name is registered in Unicode's composed form (NFC); a registered name that looks like it
(another Unicode form, another case, fullwidth letters) is a look-alike, warned about.
"""

from __future__ import annotations

import unicodedata

import pytest

from auditor.errors import BadInput
from auditor.uris import look_alikes, model_uri, name_skeleton, parse_ref, registrable_name

HIDDEN = ["\u202e", "\u202a", "\u202b", "\u202c", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f",
          "\u061c", "\u200b", "\ufeff", "\x1b", "\u2028", "\u200d", "\x00"]

NFC = "caf\u00e9-scorer"
NFD = unicodedata.normalize("NFD", NFC)


def test_a_right_to_left_override_is_refused_at_registration_naming_the_code_point_and_the_fix():
    with pytest.raises(BadInput) as refused:
        registrable_name("ev\u202elive")
    message = str(refused.value)
    assert "U+202E" in message and "RIGHT-TO-LEFT OVERRIDE" in message, message
    assert "\u202e" not in message and "ev<U+202E>live" in message  # shown, never applied
    assert "nothing was registered" in message
    assert refused.value.hint and "register it as 'evlive'" in refused.value.hint and "never be audited" in refused.value.hint
    assert refused.value.exit_code == 2


@pytest.mark.parametrize("char", HIDDEN, ids=[f"U+{ord(c):04X}" for c in HIDDEN])
def test_registration_refuses_every_character_the_audit_refuses(char):
    name = f"ev{char}il"
    with pytest.raises(BadInput) as at_the_audit:
        parse_ref(model_uri(name, 1))
    with pytest.raises(BadInput) as at_registration:
        registrable_name(name)
    spelled = f"U+{ord(char):04X}"
    assert spelled in str(at_the_audit.value) and spelled in str(at_registration.value)
    assert char not in str(at_registration.value)


@pytest.mark.parametrize(("name", "why"), [
    ("", "empty"), ("   ", "empty"), ("a:b", "':'"), ("a/b", "'/'"), ("team@ml", "'@'"), ("a?b", "'?'"), ("a#b", "'#'"),
])
def test_a_name_whose_version_reference_the_audit_refuses_is_refused(name, why):
    with pytest.raises(BadInput) as refused:
        registrable_name(name)
    assert why in str(refused.value) and "nothing was registered" in str(refused.value)


def test_a_non_string_name_is_bad_input():
    with pytest.raises(BadInput, match="must be a string"):
        registrable_name(3)  # type: ignore[arg-type]


def test_the_decomposed_spelling_is_registered_in_the_composed_form():
    assert NFD != NFC and len(NFD) == len(NFC) + 1
    assert registrable_name(NFD) == NFC
    assert registrable_name(NFC) == NFC
    assert unicodedata.is_normalized("NFC", registrable_name(NFD))


@pytest.mark.parametrize("name", ["churn", "fraud model v2", "a.b-c_d", NFC, "\u4fe1\u7528\u8bc4\u5206", "Churn"])
def test_every_registrable_name_is_one_the_audit_accepts(name):
    registered = registrable_name(name)
    assert parse_ref(model_uri(registered, 3)).name == registered


@pytest.mark.parametrize("other", [NFD, "CAF\u00c9-SCORER", "Caf\u00e9-Scorer", "\uff43\uff41\uff46\u00e9-scorer",
                                   "caf\u00e9-scorer "])
def test_a_look_alike_is_found_another_form_another_case_fullwidth_letters(other):
    assert name_skeleton(other) == name_skeleton(NFC)
    assert look_alikes(NFC, ["churn", other, NFC, "cafe-scorer"]) == [other]


def test_the_same_name_and_names_that_read_differently_are_no_look_alikes():
    assert look_alikes("churn", ["churn", "churn-v2", "chum", "churn_model"]) == []
    assert look_alikes(NFC, []) == []


def test_register_model_refuses_the_name_before_any_registry_is_opened(tmp_path):
    import auditor

    db = tmp_path / "mlflow.db"
    with pytest.raises(BadInput) as refused:
        auditor.register_model("0123456789abcdef", "ev\u202elive", tracking_uri=f"sqlite:///{db}")
    assert "U+202E" in str(refused.value)
    assert not db.exists()
