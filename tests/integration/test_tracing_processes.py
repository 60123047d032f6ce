"""Tracing against real git (ignored files) and real forks."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from auditor.lineage import tracing
from auditor.lineage.record import CodeInfo, RunRecord
from tests.fixtures.common import sha


def test_in_the_repository_only_git_ignored_files_are_traced(tmp_path, monkeypatch):
    from tests.fixtures.gitrepo import init_repo

    repo = init_repo(tmp_path / "repo", {"train.py": "x\n", ".gitignore": "secret_data/\n", "sub/keep.py": "k\n"})
    (repo / "secret_data").mkdir()
    (repo / "secret_data" / "extra.csv").write_text("1\n")
    (repo / "untracked.py").write_text("u\n")  # untracked, not ignored: the diff pins it
    (repo / ".repro").mkdir()
    (repo / ".repro" / "cache").write_text("c")  # the auditor's own folder
    monkeypatch.chdir(repo)

    # the project folder is a subfolder: the whole repository is pinned by the commit
    tracer = tracing.start(RunRecord(code=CodeInfo(subdir="sub")), repo_dir=repo / "sub", env={})
    try:
        for name in ("train.py", "sub/keep.py", "secret_data/extra.csv", "untracked.py", ".repro/cache"):
            Path(name).read_text()
    finally:
        traced = tracer.stop()
    assert [(f.path, f.sha256) for f in traced.files] == [("$REPO/secret_data/extra.csv", sha(b"1\n"))]


def test_forked_children_do_not_report_into_a_dead_tracer_and_the_fork_is_noted(outside):
    script = textwrap.dedent(f"""
        import os, sys, tempfile
        tempfile.tempdir = {str(outside.parent / 'tmp')!r}
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from auditor.lineage import tracing
        from auditor.lineage.record import RunRecord
        t = tracing.start(RunRecord(), repo_dir=None, env={{}})
        pid = os.fork()
        if pid == 0:
            open({str(outside / 'child.txt')!r}, 'w').write('c'); open({str(outside / 'child.txt')!r}).read(); os._exit(0)
        os.waitpid(pid, 0)
        traced = t.stop()
        print(len(traced.files), any('forked' in n for n in traced.notes))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "True"]

