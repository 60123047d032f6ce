"""Planted canaries never reach a serialised record."""

from auditor.lineage.gather import resolve_config
from auditor.lineage.redact import redact_text

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYCANARY1KEY"
CONFIG_TOKEN = "tok-canary-2f9d8e7c6b5a"
DB_PASSWORD = "pw-canary-h7j6k5"
CLI_SECRET = "cli-canary-q1w2e3r4"




def test_the_same_secret_redacts_to_the_same_marker_so_runs_still_compare():
    a = resolve_config({"token": "abc"})
    b = resolve_config({"token": "abc"})
    c = resolve_config({"token": "abd"})
    assert a.digest == b.digest != c.digest


def test_credential_shaped_values_are_redacted_in_free_text():
    text = redact_text("Authorization: Bearer eyJhbGciOi.eyJzdWIiOiIx.sig and AKIAIOSFODNN7EXAMPLE")
    assert "eyJhbGciOi" not in text and "AKIAIOSFODNN7EXAMPLE" not in text


def test_ordinary_settings_that_merely_contain_a_secret_word_keep_their_values():
    plain = {"sort_key": "ts", "key_column": "id", "monkey": 1, "max_tokens": 512, "tokenizer": "bpe", "num_passes": 3, "author": "ada"}
    assert resolve_config(plain).resolved == plain


def test_secret_names_in_every_spelling_are_redacted():
    names = ["password", "db.password", "apiKey", "api_key", "hf_token", "client_secret", "access_token", "session_id", "key"]
    resolved = resolve_config({name: "s3cr3t-value" for name in names}).resolved
    assert "s3cr3t-value" not in str(resolved)


def test_log_tails_and_errors_in_reports_are_redacted_with_the_same_patterns():
    from auditor.report.evidence import redact

    text = redact("cloning https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/x and hf_abcdefghijklmnopqrstuvwxyz1 X-Api-Token: eyJhbGciOiJ.eyJzdWIiOiIx.sig")
    for leaked in ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "hf_abcdefghijklmnopqrstuvwxyz1", "eyJhbGciOiJ"):
        assert leaked not in text


