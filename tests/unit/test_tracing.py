"""Input tracing: the audit hook and the environment view record what the record does not pin (real files, real env)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from auditor.lineage import tracing
from auditor.lineage.gate import check
from auditor.lineage.record import EnvironmentInfo, LocalPackage, RunRecord, TracedFile, TracedInputs, TracedVariable
from auditor.lineage.traced import compare, registration_findings
from tests.fixtures.common import sha


def test_files_read_outside_are_recorded_by_digest_and_writes_reads_of_excluded_roots_are_not(outside, tmp_path, monkeypatch):
    monkeypatch.delenv("MY_LR", raising=False)
    feature = outside / "features.csv"
    feature.write_bytes(b"a,b\n1,2\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.npy").write_bytes(b"data")
    written = outside / "out.txt"
    tracer = tracing.start(RunRecord(), repo_dir=None, env={"REPRO_DATA_TRAIN": str(data)}, exclude=[])
    try:
        feature.read_text()
        feature.read_text()  # once only
        open(os.path.relpath(feature)).close()  # a relative spelling is the same file
        (data / "x.npy").read_bytes()  # the data folder is pinned by the snapshot
        written.write_text("w")  # a write reads nothing
        with open(tmp_path / "tmp" / "scratch", "w+") as handle:  # the temp dir is excluded
            handle.write("x")
        fd = os.open(outside / "features.csv", os.O_RDONLY)  # os.open is seen too, but deduped
        os.close(fd)
        with pytest.raises(FileNotFoundError):
            open(outside / "override.json")  # trying to read a missing file is an input too
        open(sys.executable, "rb").close()  # the Python installation is excluded
        Path("/proc/self/status").read_text()
    finally:
        traced = tracer.stop()
    assert [(f.path, f.size, f.sha256) for f in traced.files] == [
        (str(feature), 8, sha(b"a,b\n1,2\n")),
        (str(outside / "override.json"), None, None),
    ]
    # after stop the hook is a no-op
    (outside / "later.txt").write_text("x")
    (outside / "later.txt").read_text()
    assert tracer.stop().files == traced.files


def test_environment_reads_are_recorded_by_name_and_digest_never_the_value(monkeypatch):
    monkeypatch.setenv("MY_LR", "0.3")
    monkeypatch.setenv("DB_PASSWORD", "hunter2")
    monkeypatch.delenv("MY_FLAG", raising=False)
    tracer = tracing.start(RunRecord(), repo_dir=None, env={})
    try:
        from os import environ  # a module that imported environ before tracing began is traced too

        assert type(os.environ) is not os._Environ
        assert os.getenv("MY_LR") == "0.3"
        assert environ.get("MY_LR") == "0.3"
        assert "MY_FLAG" not in os.environ
        os.environ.get("DB_PASSWORD")
        os.environ.get("PATH"), os.environ.get("OMP_NUM_THREADS"), os.environ.get("REPRO_SEED")  # ignored / pinned elsewhere
        os.environ.get("MLFLOW_TRACKING_URI"), os.environ.get("LC_ALL"), os.environ.get("PYTHONHASHSEED")
        everything = dict(os.environ)  # a bulk read is noted, not recorded variable by variable
        copied = os.environ.copy()
        assert everything == copied
    finally:
        traced = tracer.stop()
    assert type(os.environ) is os._Environ  # its own class back
    variables = {v.name: v.sha256 for v in traced.env}
    assert variables == {"MY_LR": sha(b"0.3"), "MY_FLAG": None, "DB_PASSWORD": variables["DB_PASSWORD"]}
    assert variables["DB_PASSWORD"].startswith("<redacted:")
    assert "hunter2" not in traced.model_dump_json() and "0.3" not in traced.model_dump_json()
    assert any("in bulk 2 time(s)" in note for note in traced.notes)


def test_reads_the_sdk_makes_on_its_own_behalf_are_not_traced(outside):
    target = outside / "sdk.bin"
    target.write_bytes(b"x")
    tracer = tracing.start(RunRecord(), repo_dir=None, env={})

    @tracing.untraced
    def sdk_read() -> bytes:
        return target.read_bytes()

    try:
        sdk_read()
    finally:
        traced = tracer.stop()
    assert traced.files == []




def test_a_record_without_a_traced_section_keeps_its_digest_and_an_old_record_still_parses():
    record = RunRecord(environment=EnvironmentInfo(python="3.11"))
    data = record.to_dict()
    assert "traced" not in data and "local_packages" not in data["environment"]
    assert RunRecord.from_dict(data).digest() == record.digest()
    traced = record.model_copy(update={"traced": TracedInputs()})
    assert traced.digest() != record.digest() and traced.to_dict()["traced"] == {"files": [], "env": [], "notes": []}


def _rec(files=(), env=(), packages=None) -> RunRecord:
    return RunRecord(
        traced=TracedInputs(files=list(files), env=list(env)),
        environment=EnvironmentInfo(python="3.11", local_packages=packages or {}),
    )


def test_the_gate_warns_by_name_for_each_traced_input_and_local_package():
    record = _rec(
        files=[TracedFile(path="/shared/features.csv", size=8, sha256=sha(b"x"))],
        env=[TracedVariable(name="MY_LR", sha256=sha(b"0.3"))],
        packages={"featurepipe": LocalPackage(version="1.0", path="/src/featurepipe", editable=True, commit="a" * 40, tree_digest=sha(b"t"))},
    )
    found = {f.code: f for f in check(record) if f.code.startswith(("traced", "environment.local"))}
    assert set(found) == {"traced.file", "traced.env", "environment.local_package"}
    assert all(f.severity == "warning" for f in found.values())
    assert "read /shared/features.csv outside the snapshots" in found["traced.file"].message
    assert "snapshot it" in found["traced.file"].hint and "commit it" in found["traced.file"].hint
    assert "read environment variable MY_LR" in found["traced.env"].message and "config" in found["traced.env"].hint
    assert "featurepipe 1.0" in found["environment.local_package"].message
    # the auditor's own editable install is no finding
    own = _rec(packages={"repro-audit": LocalPackage(version="0.1.0", path="/work/main", editable=True, tree_digest=sha(b"t"))})
    assert registration_findings(own) == []


def test_compare_blocks_on_every_difference_naming_the_input():
    a = _rec(
        files=[TracedFile(path="/shared/f.csv", size=1, sha256=sha(b"1")), TracedFile(path="/shared/only_training", size=1, sha256=sha(b"o"))],
        env=[TracedVariable(name="MY_LR", sha256=sha(b"0.3")), TracedVariable(name="API_TOKEN", sha256="<redacted:aaaaaaaa>")],
        packages={"featurepipe": LocalPackage(version="1.0", path="/src/fp", editable=True, commit="a" * 40, tree_digest=sha(b"t1"))},
    )
    b = _rec(
        files=[TracedFile(path="/shared/f.csv", size=1, sha256=sha(b"2")), TracedFile(path="/shared/only_rebuild", size=None, sha256=None)],
        env=[TracedVariable(name="MY_LR", sha256=None), TracedVariable(name="API_TOKEN", sha256=None)],
        packages={"featurepipe": LocalPackage(version="1.0", path="/src/fp", editable=True, commit="b" * 40, tree_digest=sha(b"t2"))},
    )
    found = compare(a, b)
    blocking = {f.path: f for f in found if f.blocking}
    assert set(blocking) == {
        "traced.files./shared/f.csv", "traced.files./shared/only_training", "traced.files./shared/only_rebuild",
        "traced.env.MY_LR", "environment.local_packages.featurepipe.tree_digest",
    }
    assert "MY_LR was set" in blocking["traced.env.MY_LR"].message and "unset in the rebuild" in blocking["traced.env.MY_LR"].message
    assert "version 1.0 both times" in blocking["environment.local_packages.featurepipe.tree_digest"].message
    [secret] = [f for f in found if not f.blocking]
    assert secret.path == "traced.env.API_TOKEN"
    # the same inputs: nothing
    assert compare(a, a) == []
    # an untraced side is said, not guessed
    assert [f.code for f in compare(RunRecord(), a)] == ["traced.not_traced"]




def test_reads_by_threads_running_before_the_block_are_not_the_scripts_inputs(tmp_path):
    """A library thread started before track() (MLflow's telemetry, say) reads what the rebuild may never read."""
    import threading

    from auditor.lineage.tracing import Tracer

    go, done = threading.Event(), threading.Event()

    def library_thread():
        go.wait(5)
        os.environ.get("REPRO_TEST_LIBRARY_THREAD_VAR")
        done.set()

    before = threading.Thread(target=library_thread, daemon=True)
    before.start()
    tracer = Tracer(repo_top=None).start()
    try:
        go.set()
        done.wait(5)
        inside = threading.Thread(target=lambda: os.environ.get("REPRO_TEST_SCRIPT_THREAD_VAR"))
        inside.start()
        inside.join()
    finally:
        traced = tracer.stop()
    names = {e.name for e in traced.env}
    assert "REPRO_TEST_SCRIPT_THREAD_VAR" in names and "REPRO_TEST_LIBRARY_THREAD_VAR" not in names
    # what was left out is said, not hidden: the record's notes count those reads
    assert any("threads already running when track() was entered were not traced" in n for n in traced.notes), traced.notes


def test_an_editable_installs_path_hook_entry_is_import_machinery_not_an_input():
    from auditor.lineage.tracing import _import_machinery

    assert _import_machinery("/work/project/__editable__.repro_audit-0.1.0.finder.__path_hook__")
    assert not _import_machinery("/work/project/data/__editable__.csv")
    assert not _import_machinery("/work/project/train.py")


def test_a_real_file_named_like_a_path_hook_is_still_an_input(tmp_path):
    from auditor.lineage.tracing import _import_machinery

    hidden = tmp_path / "__editable__.side-1.0.finder.__path_hook__"
    hidden.write_text("learning_rate=0.2")
    assert not _import_machinery(str(hidden))


def test_what_the_run_writes_and_reads_back_inside_the_repository_is_its_output_not_an_input(tmp_path):
    """Issue 39, build 2: an upstream XGBoost example pickles its fitted search into the project folder and loads it
    back. Files the run made inside the block are outputs wherever they lie, the repository included; a file that was
    there before the block began (an earlier run's cache) is still read as an input."""
    import pickle

    repo = tmp_path / "project"
    (repo / "cache").mkdir(parents=True)
    earlier = repo / "cache" / "earlier.pkl"
    earlier.write_bytes(pickle.dumps({"left": "by yesterday's run"}))
    tracer = tracing.Tracer(repo_top=repo)
    tracer.start()
    try:
        with open(repo / "best_search.pkl", "wb") as handle:
            pickle.dump({"best": 1}, handle)
        with open(repo / "best_search.pkl", "rb") as handle:
            assert pickle.load(handle) == {"best": 1}
        (repo / "outputs").mkdir()
        (repo / "outputs" / "scores.csv").write_text("a\n1\n")
        assert (repo / "outputs" / "scores.csv").read_text() == "a\n1\n"
        earlier.read_bytes()
    finally:
        tracer._ignored_in_repo = lambda: []  # git's check-ignore is a subprocess: the integration tests run it
        tracer.stop()
    assert sorted(tracer._repo_reads) == [os.path.join("cache", "earlier.pkl")]


def test_the_fix_offered_for_a_traced_file_fits_where_it_lies():
    from auditor.lineage.traced import CACHED_HINT, FILE_HINT, file_hint

    assert file_hint("$REPO/cache/earlier.pkl") == CACHED_HINT and "remove it before training" in CACHED_HINT
    assert file_hint("~/features.csv") == FILE_HINT


def test_a_variable_read_while_unset_is_no_registration_warning_but_a_rebuild_that_finds_it_set_is_refused():
    """A library's switch read while unset (SCIPY_ARRAY_API by scikit-learn's import) is pinned as unset: the honest
    scorecard's report warned about it though nothing could change it; a rebuild that finds it set is still refused."""
    unset = _rec(env=[TracedVariable(name="SCIPY_ARRAY_API", sha256=None)])
    assert [f for f in check(unset) if f.code == "traced.env"] == []
    now_set = _rec(env=[TracedVariable(name="SCIPY_ARRAY_API", sha256=sha(b"1"))])
    found = compare(unset, now_set)
    assert [f.code for f in found] == ["traced.env_changed"] and found[0].blocking
