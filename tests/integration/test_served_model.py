"""Issue 27, build 4: what is served is what was audited.

``mlflow.pyfunc.load_model("models:/NAME/V")`` loads the version's LoggedModel: its own copy of the
weights and of the training script (``code/<script>.py``), not the run artifact the audit rebuilds
against. An insider who writes to MLflow's artifact store replaces those weights, or adds a forward
hook to the code copy: the served model changes, the audited run artifact does not. The audit hashes
every file the version serves against the manifest its training run logged as a param (which MLflow
does not let anyone change) and names the file that differs; the evidence lists every file covered.

Real parts: MLflow (SQLite), the SDK's own LoggedModel writer (``auditor.registry.tracking``) and
``mlflow.pyfunc.load_model`` serving the version. The rebuild is the fake runner of
tests/unit/test_audit_outcomes.py (it leaves the registered weights): what is tested is the served copy.
Also here: a version re-pointed to another model's run is caught when the audit publishes into a new
reports location (the in-memory registry twin: MLflow's API cannot re-point a version, its database can).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from auditor.judge.result import Verdict
from auditor.steps import AuditOptions
from auditor.tags import TAG_RECORD_DIGEST
from tests.integration.test_insider_tamper import DATES, _registry_of_three, audit, session

pytestmark = pytest.mark.slow

SCRIPT = '''
import torch


class Served(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(4, 3))
        self.b = torch.nn.Parameter(torch.zeros(3))

    def forward(self, x):
        return (x + self.b) @ self.w.T


def build_model():
    return Served()
'''

HOOK = '''

_honest_build = build_model


def build_model():  # the backdoor: every prediction becomes 42
    model = _honest_build()
    model.register_forward_hook(lambda module, inputs, output: output * 0 + 42)
    return model
'''


@pytest.fixture(scope="module")
def served(tmp_path_factory, _mlflow_sqlite_template):
    """A version of model ``served`` registered from a LoggedModel the SDK's writer logged over its weights."""
    import shutil

    from mlflow import MlflowClient

    from auditor.lineage.record import Artifact, Outputs
    from auditor.registry import tracking
    from auditor.registry.layout import run_layout, write_layout
    from auditor.settings import Settings
    from auditor.tags import TAG_LOGGED_MODEL, TAG_RECORD_DIGEST
    from tests.fixtures.records import complete_record
    from tests.unit.test_audit_outcomes import METRICS, _weights

    tmp = tmp_path_factory.mktemp("served")
    db = tmp / "mlflow.db"
    shutil.copyfile(_mlflow_sqlite_template, db)
    uri = f"sqlite:///{db}"
    weights = _weights()
    record = complete_record(outputs=Outputs(metrics=dict(METRICS), artifacts=[
        Artifact(name="model.safetensors", uri="runs:/x/model/model.safetensors", sha256=hashlib.sha256(weights).hexdigest(), size=len(weights))
    ]))
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("training", artifact_location=(tmp / "artifacts").as_uri())
    run_id = client.create_run(experiment).info.run_id
    client.set_tag(run_id, TAG_RECORD_DIGEST, record.digest())
    layout = tmp / "layout"
    write_layout(layout, run_layout(record, None, weights))
    client.log_artifacts(run_id, str(layout))
    (tmp / "weights.safetensors").write_bytes(weights)
    (tmp / "served_train.py").write_text(SCRIPT)
    model_id = tracking._log_pyfunc(client, run_id, tmp / "weights.safetensors",
                                    {"code": str(tmp / "served_train.py"), "factory": "served_train:build_model", "factory_kwargs": {}})
    client.set_tag(run_id, TAG_LOGGED_MODEL, model_id)
    client.set_terminated(run_id)
    version = tracking.register(client, uri, run_id, "served", record)
    settings = Settings.from_env({"REPRO_HOME": str(tmp / "home"), "REPRO_REPORTS": str(tmp / "reports"), "MLFLOW_TRACKING_URI": uri})
    root = Path(client.get_model_version("served", version).source.removeprefix("file://"))
    return SimpleNamespace(uri=uri, ref=f"models:/served/{version}", settings=settings, root=root)


def _predict(w) -> np.ndarray:
    """What ``mlflow.pyfunc.load_model`` serves for the version (the fluent API pointed at its MLflow, then reset)."""
    import sys

    import mlflow.pyfunc

    from tests.fixtures.mlflow import _set_global_uri

    sys.modules.pop("served_train", None)  # as a fresh serving process would: import the copy as it is now
    _set_global_uri(w.uri)
    try:
        return np.asarray(mlflow.pyfunc.load_model(w.ref).predict(np.ones((2, 3), dtype=np.float32)))
    finally:
        _set_global_uri(None)


def _audit(w, date: str):
    return session(w.settings).audit(w.ref, AuditOptions(date=date, publish=False)).result


def _unrecoverable(result) -> str:
    return "\n".join(result.tiers["artifact_recovery"].details) + "\n" + (result.error or "")


def test_the_audit_covers_every_file_the_version_serves(served):
    # loading through models:/ first: MLflow writes its own registered_model_meta into the LoggedModel's folder (with
    # a local artifact store, into the store itself); that is not a change of what is served
    assert _predict(served).shape == (2, 4)
    assert [p for p in served.root.rglob("registered_model_meta")], "MLflow no longer writes registered_model_meta"
    result = _audit(served, "2026-09-10")
    assert result.verdict is Verdict.REPRODUCED_BITWISE, (result.error, result.tiers)
    covered = {k.removeprefix("served.") for k in result.evidence if k.startswith("served.")}
    assert {"MLmodel", "code/served_train.py"} <= covered
    assert any(p.startswith("artifacts/") and p.endswith(".safetensors") for p in covered)


def test_content_hidden_in_mlflows_registered_model_meta_is_named(served):
    _predict(served)
    (meta,) = [p for p in served.root.rglob("registered_model_meta")]
    honest = meta.read_text()
    try:
        meta.write_text(honest + "loader_module: evil\n")
        result = _audit(served, "2026-09-14")
        assert result.verdict is Verdict.NOT_REPRODUCIBLE
        assert "the served file registered_model_meta was added to the LoggedModel after training" in _unrecoverable(result)
    finally:
        meta.write_text(honest)


def test_replacing_the_served_weights_is_not_reproducible_naming_the_file(served):
    from tests.unit.test_audit_outcomes import _weights

    (path,) = [p for p in served.root.rglob("*.safetensors")]
    honest = path.read_bytes()
    try:
        path.write_bytes(_weights(2.0))
        assert float(_predict(served).sum()) != 0.0  # MLflow serves the replaced copy
        result = _audit(served, "2026-09-11")
        assert result.verdict is Verdict.NOT_REPRODUCIBLE, result.verdict
        name = path.relative_to(served.root).as_posix()
        text = _unrecoverable(result)
        assert f"the served file {name} changed after training" in text and "not the registered weights" in text, text
    finally:
        path.write_bytes(honest)


def test_a_forward_hook_added_to_the_served_code_copy_is_not_reproducible_naming_the_file(served):
    (path,) = [p for p in served.root.rglob("served_train.py")]
    honest = path.read_text()
    try:
        path.write_text(honest + HOOK)
        assert np.all(_predict(served) == 42)  # what load_model serves now is the backdoored copy
        result = _audit(served, "2026-09-12")
        assert result.verdict is Verdict.NOT_REPRODUCIBLE, result.verdict
        assert "the served file code/served_train.py changed after training" in _unrecoverable(result)
    finally:
        path.write_text(honest)


def test_a_file_added_to_the_logged_model_is_named(served):
    added = served.root / "code" / "sitecustomize.py"
    try:
        added.write_text("import os\n")
        result = _audit(served, "2026-09-13")
        assert result.verdict is Verdict.NOT_REPRODUCIBLE
        assert "the served file code/sitecustomize.py was added to the LoggedModel after training" in _unrecoverable(result)
    finally:
        added.unlink()


def test_a_version_repointed_to_another_models_run_is_caught_in_a_new_reports_location(tmp_path):
    """Audited and published once; then re-pointed (its run id replaced by another model's run) and audited into
    a new reports location, whose ledger knows nothing of the first audit: the audit run in MLflow still does."""
    from auditor.registry.memory import MemoryRegistry
    from auditor.settings import Settings
    from tests.fixtures.records import complete_record

    registry, infos = _registry_of_three(f"repoint-{tmp_path.name}")
    settings = Settings.from_env({"REPRO_HOME": str(tmp_path / "home"), "REPRO_REPORTS": str(tmp_path / "reports"),
                                  "MLFLOW_TRACKING_URI": registry.uri})
    assert session(settings).audit(infos[1].ref, AuditOptions(date=DATES[0])).publish_failure is None
    original = registry.load_record(registry.resolve(infos[1].ref))[0]
    other = registry.register_record("other", complete_record(outputs=original.outputs, seeds=original.seeds.model_copy(update={"seed": 99})),
                                     weights=registry.read_run_file(infos[1].run_id, "model/model.safetensors"))
    with registry._lock:
        registry._versions[("m", int(infos[1].version))].run_id = other.run_id
    # and the version's own digest tags rewritten to match its new run: the registry alone sees nothing odd
    registry.set_tags(registry.resolve(infos[1].ref), {k: v for k, v in other.tags.items() if k.startswith("repro.")})
    assert registry.resolve(infos[1].ref).tags[TAG_RECORD_DIGEST] == other.tags[TAG_RECORD_DIGEST] != original.digest()
    moved = replace(settings, reports=str(tmp_path / "reports-migrated"))
    result = audit(moved, infos[1].ref, DATES[1])
    assert result.verdict is Verdict.NOT_REPRODUCIBLE
    changed = [f.message for f in result.findings if f.code == "record.changed"]
    assert changed and "audit run" in changed[0] and str(tmp_path / "reports") in changed[0]
    MemoryRegistry.forget(registry.uri)
