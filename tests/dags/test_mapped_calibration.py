"""repro_calibrate_tolerance as mapped tasks (issue 43, build 1): the same stored calibration as the CLI's.

Real parts: the tabular example (``examples/tabular``, XGBoost) trained and registered in MLflow on SQLite,
calibrated once by ``repro-audit calibrate`` (the in-process path) and once by ``dag.test()`` of the DAG (one
mapped task per rerun, results through the reports store, one reduce), in Airflow 3 on SQLite in a child
process (see conftest). Both calibrations are read back from the ledger, where audits read them, and compared:
the same seeds, the same model digests, the same metrics, floors and bands; only when and how long differ (on a
real Celery cluster, with a worker killed: tests/distributed/test_celery_mapped_calibration.py, ``make test-all``).
Then the step doors alone: a retried rerun whose result is stored reruns nothing and is counted once, and a
reduce missing a result names it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xgboost")

from tests.fixtures.gitrepo import init_repo  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tabular"
RERUNS, SAME_SEED = 3, 2

CALIBRATE = r"""
import json, os
from airflow.dag_processing.dagbag import DagBag

bag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
if bag.import_errors:
    raise SystemExit(f"DAG import errors: {bag.import_errors}")
dag = bag.get_dag("repro_calibrate_tolerance")
run = dag.test(run_conf={"model_uri": os.environ["PROBE_REF"], "reruns": int(os.environ["PROBE_RERUNS"]),
                         "same_seed": int(os.environ["PROBE_SAME_SEED"])})
tasks = {f"{ti.task_id}[{ti.map_index}]": str(ti.state) for ti in run.get_task_instances()}
json.dump({"state": str(run.state), "tasks": tasks}, open(os.environ["PROBE_OUT"], "w"))
"""


class World:
    """The tabular example in a git repository, one XGBoost version trained and registered."""

    def __init__(self, root: Path) -> None:
        from auditor.demo import base_env

        files = {p.name: p.read_bytes() for p in EXAMPLE.iterdir() if p.is_file()}
        self.project = init_repo(root / "project", {**files, ".gitignore": ".repro/\nmlruns/\n__pycache__/\n"})
        self.env = {**os.environ, **base_env(root)}
        self.env.pop("REPRO_TORCH_THREADS", None)
        done = subprocess.run([sys.executable, "train.py", "model=xgboost"], cwd=self.project, env=self.env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        from mlflow import MlflowClient

        import auditor

        uri = self.env["MLFLOW_TRACKING_URI"]
        client = MlflowClient(tracking_uri=uri)
        run = client.search_runs([client.get_experiment_by_name("tabular").experiment_id], max_results=1)[0]
        self.ref = f"models:/mapped-xgboost/{auditor.register_model(run.info.run_id, 'mapped-xgboost', tracking_uri=uri)}"

    def session(self):
        from auditor.settings import Settings
        from auditor.steps import Session

        return Session(Settings.from_env(self.env))


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    return World(tmp_path_factory.mktemp("mapped-world"))


def _calibrations(session, ref: str) -> list:
    from auditor.judge.floors import calibration_from_json
    from auditor.report.calibrations import ledgered_calibrations

    info = session.registry.resolve(ref)
    found, problem = ledgered_calibrations(session.store, info.name, str(info.version), None)
    assert problem is None, problem
    return [calibration_from_json(c.data, source=c.describe()) for c in found]


def _essence(calibration) -> dict:
    """What two calibrations of one version must agree on: everything but when it ran and what it cost."""
    return calibration.model_dump(mode="json", exclude={"calibrated_at", "cost"})


@pytest.fixture(scope="module")
def dag_run(world, airflow_db, run_in_airflow, tmp_path_factory):
    env = {**airflow_db, **{k: v for k, v in world.env.items() if k.startswith(("REPRO_", "MLFLOW_", "PYTHONHASHSEED"))},
           "PROBE_REF": world.ref, "PROBE_RERUNS": str(RERUNS), "PROBE_SAME_SEED": str(SAME_SEED)}
    return run_in_airflow(CALIBRATE, env, cwd=tmp_path_factory.mktemp("mapped-dag"), timeout=1200)


def test_the_dag_maps_one_task_per_rerun_and_stores_the_calibration_where_audits_read_it(dag_run, world):
    assert dag_run["state"] == "success", dag_run
    tasks = dag_run["tasks"]
    assert sorted(k for k in tasks if k.startswith("rerun_same_seed")) == [f"rerun_same_seed[{i}]" for i in range(SAME_SEED)]
    assert sorted(k for k in tasks if k.startswith("rerun_seed_varied")) == [f"rerun_seed_varied[{i}]" for i in range(RERUNS)]
    assert set(tasks.values()) == {"success"}, tasks
    from auditor.steps.calibrate import calibration_seeds

    mapped = _calibrations(world.session(), world.ref)[-1]
    record, _ = world.session().registry.load_record(world.session().registry.resolve(world.ref))
    assert [r.seed for r in mapped.seed_varied] == calibration_seeds(record.seeds.seed, RERUNS)
    assert mapped.cost["mapped"] is True and mapped.cost["reruns"] == RERUNS + SAME_SEED
    assert mapped.same_seed.bit_identical  # XGBoost on one thread: the same-seed reruns are bit-identical


def test_the_mapped_calibration_is_the_one_the_cli_stores(dag_run, world):
    cli = subprocess.run([sys.executable, "-m", "auditor", "calibrate", world.ref, "--reruns", str(RERUNS), "--json"],
                         env=world.env, capture_output=True, text=True, timeout=900, check=False)
    assert cli.returncode == 0, cli.stdout[-2000:] + cli.stderr[-3000:]
    *_, mapped, by_cli = _calibrations(world.session(), world.ref)
    assert _essence(mapped) == _essence(by_cli)
    assert not by_cli.cost.get("mapped")


def test_the_ledger_verifies_with_the_reruns_working_files_beside_it(dag_run, world):
    from auditor.report.verify import verify

    session = world.session()
    assert any(k.startswith("calibration-reruns/") for k in session.store.list("calibration-reruns/"))
    result = verify(session.store)
    assert result.ok, [str(p) for p in result.problems]


def test_a_retried_rerun_whose_result_is_stored_reruns_nothing_and_is_counted_once(dag_run, world):
    session = world.session()
    planned = session.calibrate_plan(world.ref, reruns=RERUNS, same_seed=SAME_SEED, replace=True)
    for item in planned.same:
        assert session.calibrate_rerun(planned, item)["reran"] is True
    first = session.calibrate_rerun(planned, planned.same[0])  # the retry of a task whose try stored its result
    assert first["reran"] is False
    session.calibrate_check(planned)
    for item in planned.varied[1:]:
        session.calibrate_rerun(planned, item)
    from auditor.errors import InfrastructureError

    with pytest.raises(InfrastructureError, match=r"rerun varied-0 left no result"):
        session.calibrate_reduce(planned)
    session.calibrate_rerun(planned, planned.varied[0])
    bands = session.calibrate_reduce(planned)
    assert len(bands.calibration.seed_varied) == RERUNS
    assert [r.seed for r in bands.calibration.seed_varied] == [i.seed for i in planned.varied]


def test_the_rerun_pods_entry_point_stores_one_rerun_and_refuses_a_malformed_ticket(world):
    """What a pod runs on the Kubernetes route (``auditor.airflow.rerun_pod``), run here as a process: no cluster."""
    import json

    session = world.session()
    planned = session.calibrate_plan(world.ref, reruns=RERUNS, same_seed=SAME_SEED, replace=True)
    ticket = planned.tickets("same")[1]

    def pod(argument: str):
        return subprocess.run([sys.executable, "-m", "auditor.airflow.rerun_pod", "--ticket", argument], env=world.env,
                              capture_output=True, text=True, timeout=300, check=False)

    first = pod(json.dumps(ticket))
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads(first.stdout.strip().splitlines()[-1]) == {
        "rerun": "same-1", "stored": planned.key("same-1.json"), "reran": True, "first": True}
    again = pod(json.dumps(ticket))
    assert again.returncode == 0 and json.loads(again.stdout.strip().splitlines()[-1])["reran"] is False
    bad = pod('{"planned": {"ref": "models:/x/1"}}')
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "--ticket is not a calibration ticket" in bad.stderr


def test_a_result_planted_in_the_store_before_the_rerun_wrote_is_refused_not_counted(world):
    """An insider with write access to the reports store writes a rerun's result first (wider metrics, say): the real
    rerun loses the conditional create, and the reduce must refuse the planted file, not count it. The world signs
    (its key is made by ``base_env``), so every result carries a seal by the auditor's key."""
    import json

    from auditor.errors import Findings

    session = world.session()
    assert session.signer is not None
    planned = session.calibrate_plan(world.ref, reruns=RERUNS, same_seed=SAME_SEED, replace=True)
    for item in planned.same:
        session.calibrate_rerun(planned, item)
    session.calibrate_check(planned)
    forged = {"rerun": "varied-0", "seed": planned.varied[0].seed, "metrics": {"auc": 0.5, "accuracy": 0.5},
              "flavor": "xgboost", "weights": None, "weights_sha256": None, "canonical_sha256": None, "record": None,
              "decisions": None, "wall_s": 1.0, "accelerator_s": None, "cpu_s": None}
    assert session.store.write(planned.key("varied-0.json"), json.dumps(forged).encode())
    for item in planned.varied:
        session.calibrate_rerun(planned, item)  # varied-0 finds "its" result stored and reruns nothing
    with pytest.raises(Findings, match=r"varied-0\.json is not one this calibration wrote"):
        session.calibrate_reduce(planned)


def test_a_same_seed_model_replaced_in_the_store_stops_the_check(world):
    from auditor.errors import Findings

    session = world.session()
    planned = session.calibrate_plan(world.ref, reruns=RERUNS, same_seed=SAME_SEED, replace=True)
    for item in planned.same:
        session.calibrate_rerun(planned, item)
    models = [k for k in session.store.list(planned.key("models/"))]
    assert models
    path = session.store.local_path(models[0])
    path.chmod(0o644)
    path.write_bytes(path.read_bytes() + b" ")
    with pytest.raises(Findings, match=r"does not hash to the .* rerun same-\d recorded"):
        session.calibrate_check(planned)
