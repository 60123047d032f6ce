"""Reconstructed environments, the cheap parts: the cache key, pip's wheel folders, the runner choice.

The reconstruction itself (uv, a real index folder, a rebuild) is tests/integration/test_reconstructed_env.py.
"""

from __future__ import annotations

import sys

from auditor.lineage.record import EnvironmentInfo, LocalPackage
from auditor.rebuild.run import make_runner
from auditor.rebuild.runners import ProcessRunner, RunSpec
from auditor.rebuild.venv import Reconstructor, lock_digest, pip_find_links
from auditor.settings import Settings


def _env(**packages: str) -> EnvironmentInfo:
    return EnvironmentInfo(python="3.11.7", packages=packages)


def test_the_cache_key_is_the_interpreter_and_the_package_set_spelling_aside():
    assert lock_digest(_env(Foo_Bar="1.0", numpy="2.0")) == lock_digest(_env(numpy="2.0", **{"foo-bar": "1.0"}))
    assert lock_digest(_env(numpy="2.0")) != lock_digest(_env(numpy="2.1"))
    assert lock_digest(_env(numpy="2.0")) != lock_digest(EnvironmentInfo(python="3.12.1", packages={"numpy": "2.0"}))
    local = EnvironmentInfo(python="3.11.7", packages={"feat": "1.0"},
                            local_packages={"feat": LocalPackage(version="1.0", path="/src/feat", editable=True, tree_digest="a")})
    moved = local.model_copy(update={"local_packages": {"feat": LocalPackage(version="1.0", path="/src/feat", editable=True, tree_digest="b")}})
    assert lock_digest(local) != lock_digest(moved)


def test_pip_find_links_come_from_the_environment_and_pip_conf(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    conf = tmp_path / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text("[global]\nfind-links = /srv/wheels\n    /srv/more\n")
    links = pip_find_links({"PIP_FIND_LINKS": "/opt/a /opt/b"})
    assert links[:2] == ["/opt/a", "/opt/b"] and "/srv/wheels" in links and "/srv/more" in links


def test_the_runner_reconstructs_when_asked_and_the_auditors_environment_is_the_default(tmp_path):
    recorded = make_runner("process", Settings.from_env({"REPRO_REBUILD_ENV": "recorded", "REPRO_VENV_CACHE": str(tmp_path), "REPRO_FIND_LINKS": "/w1, /w2"}))
    assert isinstance(recorded, ProcessRunner) and recorded.reconstructor is not None
    assert recorded.reconstructor.cache == tmp_path and recorded.reconstructor.find_links == ["/w1", "/w2"]
    own = make_runner("process", Settings.from_env({"REPRO_REBUILD_ENV": "auditor"}))
    assert own.reconstructor is None
    assert make_runner("process", Settings.from_env({})).reconstructor is None


def test_a_record_naming_an_image_or_no_packages_runs_in_the_auditors_interpreter(tmp_path):
    class Refuses(Reconstructor):
        def reconstruct(self, env):
            raise AssertionError("must not reconstruct")

    from auditor.rebuild.runners import ImageRef

    runner = ProcessRunner(reconstructor=Refuses(tmp_path))
    base = {"argv": ["python", "-V"], "cwd": tmp_path, "output_dir": tmp_path / "out"}
    in_image = RunSpec(**base, image=ImageRef("r/t@sha256:" + "a" * 64), environment=_env(numpy="2.0"))
    assert runner.interpreter(in_image) == (sys.executable, [])
    assert runner.interpreter(RunSpec(**base, environment=EnvironmentInfo())) == (sys.executable, [])
