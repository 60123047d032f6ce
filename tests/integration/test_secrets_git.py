"""Planted canaries never reach a record captured from a real git repository."""

from auditor.lineage.gather import capture
from tests.unit.test_secrets import AWS_SECRET, CLI_SECRET, CONFIG_TOKEN, DB_PASSWORD


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


def test_a_repository_url_is_recorded_without_its_password(git_repo):
    from auditor.lineage.gather import git_info
    from tests.fixtures.gitrepo import git

    git(git_repo, "remote", "add", "origin", "https://bob:pw-canary-77@git.example.com/team/model.git")
    code, _ = git_info(git_repo)
    assert code.repo_url == "https://git.example.com/team/model.git"

