"""The stored diff carries no line of a committed file, and a secret on a changed line is named and redacted.

Real git: a committed ``.env`` holding secrets, a neighbouring line changed (with context lines its secrets
would be copied into the diff), a secret line changed (the removed line is committed text) and one added.
The diff is stored with ``-U0``; the rebuild side restores the removed lines from the checkout and applies
it with ``--unidiff-zero``, so the rebuilt tree is the trained one, the added secret excepted: that line
holds the marker, and the gate says so naming the file and line.
"""

from __future__ import annotations

import subprocess

from auditor.lineage.gate import check
from auditor.lineage.gather import capture
from auditor.rebuild.workspace import _apply_diff
from tests.fixtures.gitrepo import git, init_repo

COMMITTED = "DEBUG=0\nPGPASSWORD=committed-pg-secret\nSECRET_KEY=committed-key-secret\nLOG_LEVEL=info\nDB_PASS=old-db-secret\n"
WORKING = "DEBUG=1\nPGPASSWORD=committed-pg-secret\nSECRET_KEY=committed-key-secret\nLOG_LEVEL=debug\nDB_PASS=new-db-secret\nNEW_API_TOKEN=added-secret\n"


def test_committed_lines_stay_out_of_the_diff_and_the_rebuilt_tree_matches_but_for_the_changed_secrets(tmp_path):
    repo = init_repo(tmp_path / "repo", {".env": COMMITTED, "train.py": "print('train')\n" * 5, "notes.txt": "a\nb\nc\n"})
    (repo / ".env").write_text(WORKING)
    (repo / "train.py").write_text("print('train')\n" * 4 + "print('changed')\n")
    (repo / "notes.txt").unlink()

    captured = capture(repo_dir=repo, config={"lr": 0.1}, env={})
    diff = captured.diff
    assert diff is not None
    for secret in ("committed-pg-secret", "committed-key-secret", "old-db-secret", "new-db-secret", "added-secret"):
        assert secret not in diff, secret
    assert "LOG_LEVEL=debug" in diff and "DEBUG=1" in diff  # the changed lines themselves are there

    findings = [f for f in check(captured.record, diff=diff) if f.code == "code.diff_secret"]
    assert sorted(f.path for f in findings) == ["code.diff:.env:5", "code.diff:.env:6"]
    assert all(f.severity == "warning" and ".env" in f.message for f in findings)

    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(repo), str(checkout)], check=True)
    git(checkout, "checkout", "-q", captured.record.code.commit)
    _apply_diff(checkout, diff, captured.record)
    rebuilt = (checkout / ".env").read_text().splitlines()
    trained = WORKING.splitlines()
    assert rebuilt[:4] == trained[:4]  # committed secrets and changed neighbours: as trained
    assert rebuilt[4].startswith("DB_PASS=<redacted:") and rebuilt[5].startswith("NEW_API_TOKEN=<redacted:")
    assert (checkout / "train.py").read_text() == (repo / "train.py").read_text()
    assert not (checkout / "notes.txt").exists()
