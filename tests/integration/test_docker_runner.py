"""The Docker runner against a real engine (tests/fixtures/docker.py starts one).

A probe inside the container proves the lock-down: no network interface but
loopback and no route out, a read-only root filesystem, a non-root user with no
capabilities and no-new-privileges. A control run of the same probe in an
ordinary container shows that the probe can tell the difference.
"""

from __future__ import annotations

import time

import pytest

from auditor.errors import BadInput, InfrastructureError
from auditor.rebuild.runners import AcceleratorRequest, ImageRef, RunSpec
from auditor.rebuild.runners_docker import LABEL, DockerRunner

pytestmark = pytest.mark.docker

PROBE = """
echo "uid=$(id -u)"
for i in $(ls /sys/class/net); do echo "iface=$i"; done
if nc -w 2 1.1.1.1 80 </dev/null 2>/dev/null; then echo net=open; else echo net=closed; fi
if touch /probe 2>/dev/null; then echo rootfs=writable; else echo rootfs=readonly; fi
if touch /tmp/probe 2>/dev/null; then echo tmp=writable; else echo tmp=readonly; fi
grep -E '^(CapEff|NoNewPrivs):' /proc/self/status | sed 's/:[[:space:]]*/=/'
"""

MOUNT_PROBE = """
if touch /output/written 2>/dev/null; then echo output=writable; else echo output=readonly; fi
if touch /workspace/x 2>/dev/null; then echo workspace=writable; else echo workspace=readonly; fi
if touch /data/train/x 2>/dev/null; then echo data=writable; else echo data=readonly; fi
echo "datafile=$(cat "$REPRO_DATA_TRAIN/hello.txt")"
echo "config=$(cat "$REPRO_CONFIG")"
echo "output_dir=$REPRO_OUTPUT_DIR rebuild=$REPRO_REBUILD seed=$REPRO_SEED"
env | grep -c CANARY || true
"""


def _facts(log: str) -> dict[str, list[str]]:
    facts: dict[str, list[str]] = {}
    for line in log.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            facts.setdefault(key.strip(), []).append(value.strip())
    return facts


def _container_events(engine, since: float) -> list[dict]:
    return list(engine.events(since=since, until=time.time() + 1, filters={"type": "container"}, decode=True))


def _leftovers(engine) -> list:
    return engine.containers.list(all=True, filters={"label": LABEL})


@pytest.fixture()
def workspace(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    return project


def _probe_spec(tmp_path, workspace, image, script: str, **kwargs) -> RunSpec:
    return RunSpec(argv=["sh", "-c", script], cwd=workspace, output_dir=tmp_path / "out", image=image, **kwargs)


def test_the_container_has_no_network_a_read_only_root_and_an_unprivileged_user(
    docker_engine, busybox_image, tmp_path, workspace
):
    image = ImageRef(busybox_image.tag, busybox_image.id)
    outcome = DockerRunner(client=docker_engine).run(_probe_spec(tmp_path, workspace, image, PROBE))
    assert outcome.ok, outcome.log
    facts = _facts(outcome.log)
    assert facts["iface"] == ["lo"]
    assert facts["net"] == ["closed"]
    assert facts["rootfs"] == ["readonly"]
    assert facts["tmp"] == ["writable"]
    assert facts["uid"] != ["0"]
    assert facts["CapEff"] == ["0000000000000000"]
    assert facts["NoNewPrivs"] == ["1"]
    assert _leftovers(docker_engine) == []


def test_the_probe_tells_an_ordinary_container_apart(docker_engine, busybox_image):
    """Control: with a network, a writable root and root, the same probe reports all three."""
    network = docker_engine.networks.create("repro-probe-control", driver="bridge")
    try:
        raw = docker_engine.containers.run(busybox_image.id, ["sh", "-c", PROBE], network=network.name, remove=True)
    finally:
        network.remove()
    facts = _facts(raw.decode())
    assert "eth0" in facts["iface"]
    assert facts["rootfs"] == ["writable"]
    assert facts["uid"] == ["0"]
    assert facts["CapEff"] != ["0000000000000000"]


def test_code_and_data_are_read_only_output_is_writable_and_the_contract_points_inside(
    docker_engine, busybox_image, tmp_path, workspace, monkeypatch
):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "CANARY-secret")
    data = tmp_path / "snapshot"
    data.mkdir()
    (data / "hello.txt").write_text("from the snapshot")
    config = tmp_path / "config.json"
    config.write_text('{"lr": 0.1}')
    spec = _probe_spec(
        tmp_path,
        workspace,
        ImageRef(busybox_image.tag, busybox_image.id),
        MOUNT_PROBE,
        data={"train": data},
        config_file=config,
        env={"REPRO_SEED": "7"},
    )
    outcome = DockerRunner(client=docker_engine).run(spec)
    assert outcome.ok, outcome.log
    facts = _facts(outcome.log)
    assert facts["output"] == ["writable"] and (tmp_path / "out" / "written").exists()
    assert facts["workspace"] == ["readonly"]
    assert facts["data"] == ["readonly"]
    assert facts["datafile"] == ["from the snapshot"]
    assert facts["config"] == ['{"lr": 0.1}']
    assert facts["output_dir"] == ["/output rebuild=1 seed=7"]
    assert "CANARY" not in outcome.log.replace("grep -c CANARY", "")
    assert outcome.log.rstrip().endswith("0")  # env | grep -c CANARY


def test_a_tag_only_image_is_refused_before_any_container_starts(docker_engine, busybox_image, tmp_path, workspace):
    since = time.time()
    spec = _probe_spec(tmp_path, workspace, ImageRef(busybox_image.tag), "echo ran")
    with pytest.raises(BadInput, match="tag only"):
        DockerRunner(client=docker_engine).run(spec)
    assert _container_events(docker_engine, since) == []
    assert not (tmp_path / "out").exists()


def test_a_local_image_whose_digest_differs_from_the_record_is_refused(
    docker_engine, busybox_image, tmp_path, workspace
):
    """With no pull possible, a moved tag is refused naming both ids (with a registry the image is pulled
    by digest instead: tests/integration/test_image_e2e.py)."""
    since = time.time()
    recorded = "sha256:" + "0" * 64
    spec = _probe_spec(tmp_path, workspace, ImageRef(busybox_image.tag, recorded), "echo ran")
    with pytest.raises(BadInput, match="record says") as caught:
        DockerRunner(client=docker_engine, pull=False).run(spec)
    assert busybox_image.id in str(caught.value) and recorded in str(caught.value)
    assert _container_events(docker_engine, since) == []


def test_an_image_pinned_by_id_runs_even_when_named_by_digest_alone(docker_engine, busybox_image, tmp_path, workspace):
    spec = _probe_spec(tmp_path, workspace, ImageRef(busybox_image.id), "echo pinned")
    outcome = DockerRunner(client=docker_engine).run(spec)
    assert outcome.ok and outcome.log == "pinned\n"


def test_exit_code_logs_and_removal_after_a_failing_run(docker_engine, busybox_image, tmp_path, workspace):
    since = time.time()
    image = ImageRef(busybox_image.tag, busybox_image.id)
    outcome = DockerRunner(client=docker_engine).run(
        _probe_spec(tmp_path, workspace, image, "echo out; echo err >&2; exit 3")
    )
    assert outcome.exit_code == 3 and not outcome.timed_out
    assert "out" in outcome.log and "err" in outcome.log
    assert outcome.log_path.read_text() == outcome.log
    actions = [e["Action"] for e in _container_events(docker_engine, since)]
    assert "create" in actions and "destroy" in actions
    assert _leftovers(docker_engine) == []


def test_a_timeout_kills_the_container_and_removes_it(docker_engine, busybox_image, tmp_path, workspace):
    image = ImageRef(busybox_image.tag, busybox_image.id)
    spec = _probe_spec(tmp_path, workspace, image, "echo started; sleep 120", timeout_s=2)
    outcome = DockerRunner(client=docker_engine).run(spec)
    assert outcome.timed_out and not outcome.ok
    assert outcome.exit_code == 137
    assert "started" in outcome.log
    assert _leftovers(docker_engine) == []


def test_an_accelerator_request_reaches_the_engine_and_a_refusal_names_the_image(
    docker_engine, busybox_image, tmp_path, workspace
):
    if "nvidia" in (docker_engine.info().get("Runtimes") or {}):
        pytest.skip("this engine has a GPU runtime; the refusal path cannot be shown here")
    image = ImageRef(busybox_image.tag, busybox_image.id)
    spec = _probe_spec(tmp_path, workspace, image, "echo ran", accelerator=AcceleratorRequest(count=1))
    with pytest.raises(InfrastructureError, match="capabilities: \\[\\[gpu\\]\\]") as caught:
        DockerRunner(client=docker_engine).run(spec)
    assert busybox_image.tag in str(caught.value)
    assert _leftovers(docker_engine) == []


def test_the_registered_weights_to_re_evaluate_are_readable_by_the_containers_user(
    docker_engine, busybox_image, tmp_path, workspace
):
    """An MLflow download is 0600 and the container's user owns none of the host's files (issue 15's e2e failure)."""
    weights = tmp_path / "registered.safetensors"
    weights.write_bytes(b"weights-bytes")
    weights.chmod(0o600)
    image = ImageRef(busybox_image.tag, busybox_image.id)
    script = 'echo "uid=$(id -u)"; echo "path=$REPRO_EVALUATE_WEIGHTS"; echo "weights=$(cat "$REPRO_EVALUATE_WEIGHTS")"'
    spec = _probe_spec(tmp_path, workspace, image, script, env={"REPRO_EVALUATE_WEIGHTS": str(weights)})
    outcome = DockerRunner(client=docker_engine).run(spec)
    assert outcome.ok, outcome.log
    facts = _facts(outcome.log)
    assert facts["uid"] != ["0"]
    assert facts["path"] == ["/evaluate/registered.safetensors"]
    assert facts["weights"] == ["weights-bytes"], outcome.log
