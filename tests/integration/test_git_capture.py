"""The recorded diff, applied to a fresh checkout of the recorded commit, rebuilds the working tree byte for byte."""

import hashlib
import subprocess
from pathlib import Path

from auditor.lineage.gather import git_info
from tests.fixtures.gitrepo import git, init_repo


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts and not p.name.endswith(".log")
    }


def test_staged_unstaged_and_untracked_changes_are_all_in_the_diff(git_repo, tmp_path):
    (git_repo / "src/model.py").write_text("A = 1\nB = 3\n")  # unstaged
    (git_repo / "config.yaml").write_text("lr: 0.2\n")
    git(git_repo, "add", "config.yaml")  # staged
    (git_repo / "config.yaml").write_text("lr: 0.3\nepochs: 2\n")  # staged then edited again
    (git_repo / "new_feature.py").write_text("def f():\n    return 42\n")  # untracked text
    (git_repo / "data/weights.bin").parent.mkdir()
    (git_repo / "data/weights.bin").write_bytes(bytes(range(256)) * 4)  # untracked binary
    git(git_repo, "rm", "-q", "train.py")  # staged deletion
    (git_repo / "debug.log").write_text("ignored by .gitignore\n")
    index_before = (git_repo / ".git/index").read_bytes()

    code, diff = git_info(git_repo)

    assert code.dirty is True and code.commit == git(git_repo, "rev-parse", "HEAD").strip()
    assert [b.path for b in code.untracked_binary] == ["data/weights.bin"]
    assert (git_repo / ".git/index").read_bytes() == index_before  # the user's index is untouched
    checkout = tmp_path / "fresh"
    subprocess.run(["git", "clone", "-q", str(git_repo), str(checkout)], check=True)
    git(checkout, "checkout", "-q", code.commit)
    patch = tmp_path / "diff.patch"
    patch.write_text(diff, encoding="utf-8")
    git(checkout, "apply", "--binary", str(patch))
    assert _tree(checkout) == _tree(git_repo)


def test_a_clean_tree_has_no_diff(git_repo):
    code, diff = git_info(git_repo)
    assert code.dirty is False and diff is None and code.diff_digest is None


def test_no_git_repository_is_recorded_as_data_not_raised(tmp_path):
    code, diff = git_info(tmp_path)
    assert code.commit is None and "not a git repository" in code.git_error and diff is None


def test_a_repository_without_commits_is_recorded_as_data(tmp_path):
    repo = tmp_path / "empty"
    repo.mkdir()
    git(repo, "init", "-q")
    code, _ = git_info(repo)
    assert code.commit is None and "no commit" in code.git_error


def test_a_project_in_a_subfolder_records_its_subdir(tmp_path):
    repo = init_repo(tmp_path / "mono", {"models/churn/train.py": "x = 1\n"})
    code, _ = git_info(repo / "models/churn")
    assert code.subdir == "models/churn"
