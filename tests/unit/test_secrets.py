"""Planted canaries never reach a serialised record."""

from auditor.lineage.gather import capture, resolve_config
from auditor.lineage.redact import redact_text

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYCANARY1KEY"
CONFIG_TOKEN = "tok-canary-2f9d8e7c6b5a"
DB_PASSWORD = "pw-canary-h7j6k5"
CLI_SECRET = "cli-canary-q1w2e3r4"


def test_planted_canaries_appear_nowhere_in_the_serialised_record(git_repo):
    config = git_repo / "config.yaml"
    config.write_text(f"lr: 0.1\napi_token: {CONFIG_TOKEN}\ndatabase_uri: postgresql://app:{DB_PASSWORD}@db.internal:5432/train\n")
    env = {
        "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
        "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
        "OMP_NUM_THREADS": "2",
        "REPRO_CFG__SERVICE__PASSWORD": "env-canary-zx81",
    }
    captured = capture(
        repo_dir=git_repo,
        config=config,
        overrides=[f"client_secret={CLI_SECRET}"],
        entrypoint=["python", "train.py", f"client_secret={CLI_SECRET}", "--api-key", "key-canary-99"],
        env=env,
    )
    text = captured.record.to_json() + (captured.diff or "")
    for canary in (AWS_SECRET, "AKIAIOSFODNN7EXAMPLE", CONFIG_TOKEN, DB_PASSWORD, CLI_SECRET, "env-canary-zx81", "key-canary-99"):
        assert canary not in text, canary
    resolved = captured.record.config.resolved
    assert resolved["database_uri"].startswith("postgresql://app:<redacted:")  # the rest of the URI survives
    assert captured.record.environment.variables == {"OMP_NUM_THREADS": "2"}  # allowlist only


def test_the_same_secret_redacts_to_the_same_marker_so_runs_still_compare():
    a = resolve_config({"token": "abc"})
    b = resolve_config({"token": "abc"})
    c = resolve_config({"token": "abd"})
    assert a.digest == b.digest != c.digest


def test_credential_shaped_values_are_redacted_in_free_text():
    text = redact_text("Authorization: Bearer eyJhbGciOi.eyJzdWIiOiIx.sig and AKIAIOSFODNN7EXAMPLE")
    assert "eyJhbGciOi" not in text and "AKIAIOSFODNN7EXAMPLE" not in text


def test_ordinary_keys_that_contain_key_are_not_redacted():
    resolved = resolve_config({"sort_key": "ts", "key_column": "id", "monkey": 1}).resolved
    assert resolved == {"sort_key": "ts", "key_column": "id", "monkey": 1}
