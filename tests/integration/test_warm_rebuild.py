"""A rebuild forked from a warm worker sees what a fresh interpreter would (issue 41, build 1): the same probe
script run both ways reports the same world, and the worker is reused only where that holds."""

from __future__ import annotations

import json
import textwrap
import zipfile
from pathlib import Path

import pytest

from auditor.rebuild import warm as warm_module
from auditor.rebuild.runners import ProcessRunner, RunSpec

PINNED_HASH = warm_module._pinned_hash  # the rule itself, whatever REPRO_TEST_WARM_ALL makes of it

PROBE = '''
"""A probe of what the interpreter set up."""
import atexit, json, os, sys, threading, time
import numpy

def report(path=os.environ["REPRO_OUTPUT_DIR"] + "/world.json"):
    import stat
    world = {
        "argv": sys.argv, "file": __file__, "name": __name__, "path0": sys.path[0], "cwd": os.getcwd(),
        "env": dict(os.environ), "own_group": os.getpgid(0) == os.getpid(), "own_session": os.getsid(0) == os.getpid(),
        "stdin_is_devnull": os.path.samefile("/proc/self/fd/0", os.devnull),
        "noted": sorted(m for m in ("sklearn.base", "xgboost", "lightgbm", "pandas") if m in sys.modules),
        "hash": hash("repro"), "main_module_file": sys.modules["__main__"].__file__,
        "numpy_draw": float(numpy.random.rand()), "thread_joined": done,
    }
    open(path, "w").write(json.dumps(world))

done = []
threading.Thread(target=lambda: (time.sleep(0.3), done.append(1))).start()
atexit.register(report)
print("to stdout"); print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
'''


def _run(tmp_path: Path, name: str, *, warm: bool, args=("3",), env=None, code=PROBE):
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "probe.py").write_text(textwrap.dedent(code))
    spec = RunSpec(argv=["python", "probe.py", *args], cwd=project, output_dir=tmp_path / name,
                   env={"PYTHONHASHSEED": "123", "OMP_NUM_THREADS": "1", **(env or {})})
    outcome = ProcessRunner(warm=warm).run(spec)
    world = tmp_path / name / "world.json"
    return outcome, (json.loads(world.read_text()) if world.exists() else None)


def test_a_warm_rebuild_sees_the_world_a_fresh_interpreter_sees(tmp_path):
    fresh, fresh_world = _run(tmp_path, "fresh", warm=False)
    warm, warm_world = _run(tmp_path, "warm", warm=True)
    again, again_world = _run(tmp_path, "again", warm=True)
    assert not fresh.warm and warm.warm and again.warm
    assert fresh.exit_code == warm.exit_code == 3
    assert "to stdout" in warm.log and "to stderr" in warm.log
    for world in (fresh_world, warm_world, again_world):
        world["env"].pop("REPRO_OUTPUT_DIR")
    different = {key for key in fresh_world if fresh_world[key] != warm_world[key]}
    assert different == {"numpy_draw"}, {key: (fresh_world[key], warm_world[key]) for key in different}
    assert warm_world["thread_joined"] == [1] and warm_world["own_session"] and warm_world["stdin_is_devnull"]
    assert warm_world["argv"] == ["probe.py", "3"] and warm_world["file"] == str(tmp_path / "project" / "probe.py")
    # an unseeded global generator is drawn afresh in every rebuild, as in every fresh interpreter
    assert len({fresh_world["numpy_draw"], warm_world["numpy_draw"], again_world["numpy_draw"]}) == 3


def test_a_crash_is_told_as_a_fresh_interpreter_tells_it(tmp_path):
    code = "import os\n\ndef fail():\n    raise ValueError('planted')\n\nfail()\n"
    fresh, _ = _run(tmp_path, "fresh", warm=False, code=code)
    warm, _ = _run(tmp_path, "warm", warm=True, code=code)
    assert fresh.exit_code == warm.exit_code == 1 and warm.warm
    assert warm.log == fresh.log, (warm.log, fresh.log)  # the traceback starts in the script, frame for frame


def test_an_unpinned_hash_seed_or_another_thread_pin_gets_no_shared_worker(tmp_path, monkeypatch):
    """A fork shares its parent's string-hash salt: a rebuild with PYTHONHASHSEED unset runs fresh; a thread pin is
    read as libraries load, so another pin is another worker."""
    from auditor.rebuild import warm

    monkeypatch.setattr(warm, "_pinned_hash", PINNED_HASH)

    unpinned, world = _run(tmp_path, "unpinned", warm=True, env={"PYTHONHASHSEED": "random"})
    assert not unpinned.warm and world is not None
    _run(tmp_path, "one", warm=True)
    _run(tmp_path, "two", warm=True, env={"OMP_NUM_THREADS": "2"})
    keys = [dict(key[3]) for key in warm.shared_pool().workers]
    assert {k.get("OMP_NUM_THREADS") for k in keys} >= {"1", "2"}
    # a run's own paths are not the worker's; HOME is (a library may keep a path under it from its import)
    assert all("REPRO_OUTPUT_DIR" not in k and "HOME" in k for k in keys)


def test_a_timeout_ends_a_warm_rebuild_and_its_children(tmp_path):
    code = "import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\ntime.sleep(60)\n"
    project = tmp_path / "project"
    project.mkdir()
    (project / "probe.py").write_text(code)
    spec = RunSpec(argv=["python", "probe.py"], cwd=project, output_dir=tmp_path / "out", env={"PYTHONHASHSEED": "0"},
                   timeout_s=2)
    outcome = ProcessRunner(kill_grace_s=0.5).run(spec)
    assert outcome.warm and outcome.timed_out and outcome.exit_code in (-15, -9)


SDK = ("auditor", *("auditor.sdk.run", "auditor.sdk.capture", "auditor.sdk.consumed", "auditor.sdk.forms", "auditor.sdk.models",
                     "auditor.lineage.gather", "auditor.seeds", "auditor.flavors.predictions"))
SEEDING = ("torch",)


@pytest.mark.parametrize("script, seeded, sdk, libraries", [
    ('"""doc"""\nfrom __future__ import annotations\nimport os, json\nimport numpy as np\nimport auditor\nx = 1\nimport pandas\n',
     True, SDK, ("os", "json", "numpy", *SEEDING)),
    ('import numpy\nimport auditor\n', False, SDK, ("numpy",)),  # unseeded: the SDK never imports torch
    ('import os\nos.environ["OMP_NUM_THREADS"] = "4"\nimport numpy\nimport auditor\n', True, (), ("os",)),
    ('import numpy\nimport helpers\nimport pandas\n', True, (), ("numpy",)),  # the project's own module stops it
    ('import numpy\nimport mylib\nimport pandas\n', True, (), ("numpy",)),  # so does a recorded local package
    ('import numpy\nfrom . import x\n', True, (), ("numpy",)),
    # a script that sets variables: neither torch nor the SDK's modules (they import NumPy, which reads them)
    ('import auditor\nimport os\nos.environ["X"] = "1"\n', True, ("auditor",), ("os",)),
])
def test_what_the_worker_imports_first(tmp_path, script, seeded, sdk, libraries):
    from auditor.rebuild.warm import SDK_PRELOAD, Preload, leading_imports

    assert SDK[1:] == SDK_PRELOAD
    (tmp_path / "train.py").write_text(script)
    (tmp_path / "helpers.py").write_text("")
    got = leading_imports(tmp_path / "train.py", tmp_path, seeded=seeded, local={"MyLib"})
    assert got == Preload(sdk=sdk, libraries=libraries)


#: (the script after ``import os\nimport auditor\n``, whether the worker may import torch first): reading a variable is no
#: reason not to; any way of setting one, or code of the project's own that is not read here, is
SETTERS = [
    ('"""Libraries read os.environ as they import."""\nx = os.environ.get("REPRO_REBUILD")\n', True),
    ('x = os.environ["HOME"]\ny = "A" in os.environ\nz = "B" not in os.environ\n', True),
    ('from os import environ\nx = environ.get("A")\n', True),
    ('os.environ["OMP_NUM_THREADS"] = "1"\n', False),
    ('os.environ.setdefault("OMP_NUM_THREADS", "1")\n', False),
    ('os.environ.update(OMP_NUM_THREADS="1")\n', False),
    ('del os.environ["A"]\n', False),
    ('os.environ["A"] += "x"\n', False),
    ('env = os.environ\nenv["A"] = "1"\n', False),
    ('from os import environ\nenviron["A"] = "1"\n', False),
    ('def f(e):\n    e["A"] = "1"\nf(os.environ)\n', False),
    ('os.putenv("A", "1")\n', False),
    ('from dotenv import load_dotenv\nload_dotenv()\n', False),
    ('def main():\n    import helpers\n', False),  # the project's module, imported later: its code is not read here
    ('def main():\n    from .config import x\n', False),
    ('def main():\n    import mylib.setup\n', False),  # a recorded local package
    ('from os import environ as env\nenv["OMP_NUM_THREADS"] = "1"\n', False),  # an alias of environ (review of 4fda976)
    ('from environs import Env\nEnv().read_env()\n', False),  # a library that loads .env into os.environ
    ('from accelerate.utils import patch_environment\nwith patch_environment(omp_num_threads=1):\n    pass\n', False),
    ('from mlcommon.runtime import configure_environment\nconfigure_environment()\n', False),
    ('os.environ.copy()\n', False),
    ('sys.path.insert(0, "src")\nimport mypkg\n', False),  # a project's src/ folder: its code is not read here
    ('# os.environ is read, never written\nx = os.environ.get("A", "")\n', True),
    # ways past a reading of names (an adversarial review of 3096eaa): each may set a variable
    ('print(f"{os.environ.setdefault(\'OMP_THREAD_LIMIT\', \'1\')}")\n', False),
    ('getattr(os, "environ")["OMP_THREAD_LIMIT"] = "1"\n', False),
    ('vars(os)["environ"]["OMP_THREAD_LIMIT"] = "1"\n', False),
    ('exec(compile("x = 1", "f", "exec"))\n', False),
    ('import importlib\nimportlib.import_module("helpers")\n', False),  # the project holds helpers.py
    ('from importlib import import_module\nimport_module("helpers")\n', False),
    ('__import__("helpers")\n', False),
    ('import runpy\nrunpy.run_path("helpers.py")\n', False),
    ('import ctypes\nctypes.CDLL(None).setenv(b"OMP_THREAD_LIMIT", b"1", 1)\n', False),
    # what only looks like them (a second review): the worker still imports torch first
    ('import re\nPATTERN = re.compile("x")\n', True),
    ('def score(model):\n    model.eval()\n    return model\n', True),
    ('print("training environment ready", "prod-environment")  # no dotenv here\n', True),
]


def test_a_module_named_at_run_time_counts_only_where_the_project_has_python_of_its_own(tmp_path):
    """``importlib.import_module(name)`` in a project of one script can import installed libraries only (the tabular
    example's own way to import its model's library); with another module beside it, a recorded local package or
    a PYTHONPATH, it may run the project's code."""
    from auditor.rebuild.warm import leading_imports

    (tmp_path / "train.py").write_text("import os\nimport auditor\nimport importlib\nfor name in ('xgboost',):\n"
                                       "    importlib.import_module(name)\n")
    assert "torch" in leading_imports(tmp_path / "train.py", tmp_path, seeded=True).libraries
    assert "torch" not in leading_imports(tmp_path / "train.py", tmp_path, seeded=True, local={"mylib"}).libraries
    assert "torch" in leading_imports(tmp_path / "train.py", tmp_path, seeded=True, local={"repro-audit"}).libraries
    assert "torch" not in leading_imports(tmp_path / "train.py", tmp_path, seeded=True, pythonpath="/src").libraries
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "setup_env.py").write_text("")  # a namespace package's module
    assert "torch" not in leading_imports(tmp_path / "train.py", tmp_path, seeded=True).libraries


@pytest.mark.parametrize("script, torch_first", SETTERS)
def test_the_worker_imports_torch_first_only_where_the_script_cannot_set_a_variable_before_its_run(tmp_path, script, torch_first):
    from auditor.rebuild.warm import leading_imports

    (tmp_path / "train.py").write_text("import os\nimport auditor\n" + script)
    (tmp_path / "helpers.py").write_text("")
    got = leading_imports(tmp_path / "train.py", tmp_path, seeded=True, local={"MyLib"})
    assert got.sdk == (SDK if torch_first else ("auditor",)) and ("torch" in got.libraries) is torch_first


def test_a_library_outside_the_interpreters_folders_is_never_imported_by_the_worker(tmp_path):
    """A module on PYTHONPATH (a project's src/ folder, an editable install) may read a run's variables as it is
    imported: the worker leaves it to the rebuild, which imports it under its own variables."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "readsseed.py").write_text("import os\nSEED = os.environ.get('REPRO_SEED')\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "probe.py").write_text("import readsseed\nprint('seed', readsseed.SEED)\n")
    spec = RunSpec(argv=["python", "probe.py"], cwd=project, output_dir=tmp_path / "out",
                   env={"PYTHONHASHSEED": "0", "PYTHONPATH": str(lib), "REPRO_SEED": "41"})
    outcome = ProcessRunner().run(spec)
    assert outcome.warm and outcome.log == "seed 41\n"


def test_the_sdk_preload_imports_no_library_whose_late_import_the_sdk_notes():
    """The SDK notes a library imported after a run began (auditor.sdk.consumed); a worker that imported one early
    would change that note, so the preload must not pull one in."""
    import subprocess
    import sys

    from auditor.rebuild.warm import SDK_PRELOAD

    probe = (f"import importlib, sys\nfor m in {list(SDK_PRELOAD)!r}: importlib.import_module(m)\n"
             "print(sorted(m for m in ('sklearn', 'xgboost', 'lightgbm', 'catboost', 'pandas', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_forked_auditor_gets_workers_of_its_own(tmp_path):
    """A Celery or Airflow task process is a fork of a process that may already hold workers: their answers go to a
    reader thread the fork did not copy, so the child must start its own instead of waiting forever."""
    import os

    first, _ = _run(tmp_path, "parent", warm=True)
    assert first.warm
    pid = os.fork()
    if pid == 0:  # the child: a rebuild of its own, then out without running the parent's test machinery
        code = 1
        try:
            outcome, world = _run(tmp_path, "child", warm=True)
            code = 0 if outcome.warm and outcome.exit_code == 3 and world is not None else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_worker_whose_imports_hang_is_ended_and_the_rebuild_starts_fresh(tmp_path, monkeypatch):
    from auditor.rebuild import warm

    monkeypatch.setattr(warm, "START_LIMIT_S", 2.0)
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "sitecustomize.py").write_text("import time\ntime.sleep(60)\n")  # every interpreter here hangs as it starts
    project = tmp_path / "project"
    project.mkdir()
    (project / "probe.py").write_text("import os\n")
    spec = RunSpec(argv=["python", "probe.py"], cwd=project, output_dir=tmp_path / "out", timeout_s=3,
                   env={"PYTHONHASHSEED": "0", "PYTHONPATH": str(lib)})
    outcome = ProcessRunner().run(spec)
    assert outcome.timed_out and not outcome.warm  # the fresh interpreter meets the hang itself, and times out


def test_rebuilds_run_side_by_side_from_one_worker(tmp_path):
    """Calibration reruns run side by side (REPRO_RERUN_WORKERS): one worker forks them all, each reported apart."""
    from concurrent.futures import ThreadPoolExecutor

    project = tmp_path / "project"
    project.mkdir()
    (project / "probe.py").write_text("import sys, time\ntime.sleep(0.5)\nprint('run', sys.argv[1])\nsys.exit(int(sys.argv[1]))\n")

    def one(code: int):
        spec = RunSpec(argv=["python", "probe.py", str(code)], cwd=project, output_dir=tmp_path / f"out{code}",
                       env={"PYTHONHASHSEED": "0"})
        return ProcessRunner().run(spec)

    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(one, range(4)))
    assert [o.exit_code for o in outcomes] == [0, 1, 2, 3]
    assert all(o.warm and o.log.strip() == f"run {i}" for i, o in enumerate(outcomes))


def test_a_spec_that_asks_for_a_fresh_interpreter_gets_one(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "probe.py").write_text("print('ran')\n")
    spec = RunSpec(argv=["python", "probe.py"], cwd=project, output_dir=tmp_path / "out", env={"PYTHONHASHSEED": "0"},
                   fresh=True)
    outcome = ProcessRunner().run(spec)
    assert outcome.ok and not outcome.warm and outcome.log == "ran\n"


def _both(tmp_path: Path, argv: list[str], files: dict[str, str]):
    """The same entry point run fresh and warm; (outcome, output folder) of each."""
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    for name, text in files.items():
        (project / name).write_text(textwrap.dedent(text))
    results = []
    for warm in (False, True):
        out = tmp_path / f"out-{warm}"
        spec = RunSpec(argv=argv, cwd=project, output_dir=out, env={"PYTHONHASHSEED": "0"})
        results.append((ProcessRunner(warm=warm).run(spec), out))
    return results


def test_a_file_the_script_leaves_open_is_flushed_as_a_fresh_interpreter_flushes_it(tmp_path):
    """A model file written and never closed is complete when a fresh interpreter exits (its modules are cleared):
    so it must be when a warm rebuild exits, or an honest recipe would leave a truncated model."""
    (fresh, fresh_out), (warm, warm_out) = _both(tmp_path, ["python", "train.py"], {"train.py": """
        import os, zipfile
        out = os.environ["REPRO_OUTPUT_DIR"]
        archive = zipfile.ZipFile(out + "/model.zip", "w")
        archive.writestr("weights", "0.5 " * 100)
        handle = open(out + "/metrics.json", "w")
        handle.write('{"auc": 0.9}')
        """})
    assert fresh.ok and warm.ok and warm.warm
    assert (warm_out / "metrics.json").read_text() == (fresh_out / "metrics.json").read_text() == '{"auc": 0.9}'
    assert zipfile.is_zipfile(warm_out / "model.zip") and zipfile.is_zipfile(fresh_out / "model.zip")


def test_a_file_held_in_a_reference_cycle_and_never_closed_is_flushed_as_a_fresh_interpreter_flushes_it(tmp_path):
    """A fresh interpreter's last garbage collection closes (and flushes) a file that only a reference cycle still
    holds at exit: a warm rebuild must not skip that collection (a ``gc.freeze`` at exit, as the auditor's own CLI
    does, would leave this metrics file empty: measured for issue 41, where it would have saved 0.3 s)."""
    (fresh, fresh_out), (warm, warm_out) = _both(tmp_path, ["python", "train.py"], {"train.py": """
        import os
        class Writer:
            def __init__(self, path):
                self.handle = open(path, "w")
                self.write = self.handle.write
                self.me = self  # a cycle: only the collector releases it
        writer = Writer(os.environ["REPRO_OUTPUT_DIR"] + "/metrics.json")
        writer.write('{"auc": 0.9}')
        """})
    assert fresh.ok and warm.ok and warm.warm
    assert (warm_out / "metrics.json").read_text() == (fresh_out / "metrics.json").read_text() == '{"auc": 0.9}'


def test_python_dash_m_keeps_the_module_as_main_for_its_atexit_handlers(tmp_path):
    (fresh, _), (warm, _) = _both(tmp_path, ["python", "-m", "trainmod"], {"trainmod.py": """
        import atexit, pickle, sys

        class Model:
            pass

        def save():
            print(sys.modules["__main__"].__file__.rsplit("/", 1)[-1], len(pickle.dumps(Model())) > 0)

        atexit.register(save)
        """})
    assert warm.warm and fresh.log == warm.log == "trainmod.py True\n", (fresh.log, warm.log)


def test_relative_paths_mean_what_they_mean_to_a_fresh_interpreter_and_ps_shows_the_rebuild(tmp_path, monkeypatch):
    """REPRO_HOME defaults to a relative folder, so a workspace and its log can be relative paths; and whoever walks
    the process tree (an operator's ps, the distributed tests) sees the rebuild's command line, not the worker's."""
    monkeypatch.chdir(tmp_path)
    Path("ws/project").mkdir(parents=True)
    Path("ws/project/probe.py").write_text("import os\nprint(os.getcwd(), open('/proc/self/cmdline', 'rb').read().replace(b'\\0', b' ').decode())\n")
    spec = RunSpec(argv=["python", "probe.py", "--lr", "0.5"], cwd=Path("ws/project"), output_dir=Path("ws/out"),
                   env={"PYTHONHASHSEED": "0"})
    outcome = ProcessRunner().run(spec)
    assert outcome.warm and outcome.ok, outcome.log
    cwd, cmdline = outcome.log.split(" ", 1)
    assert cwd == str(tmp_path / "ws" / "project")
    assert (tmp_path / "ws" / "out" / "rebuild.log").read_text() == outcome.log  # the log where the runner reads it
    assert "probe.py --lr 0.5" in cmdline and "zygote" not in cmdline


# -- found by an adversarial review of the worker (each failed before its fix) --------------------------------------


def _fresh_and_warm(tmp_path: Path, code: str, *, env=None, files=None) -> tuple:
    """``code`` as probe.py run fresh and warm: both outcomes (``files``: more of the project, by path)."""
    for path, text in (files or {}).items():
        target = tmp_path / "project" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return _run(tmp_path, "fresh", warm=False, args=(), env=env, code=code)[0], _run(tmp_path, "warm", warm=True, args=(), env=env, code=code)[0]


def test_a_project_module_named_as_one_the_worker_holds_gets_a_fresh_interpreter(tmp_path):
    """The worker imported the standard json (and whatever its preload pulled in); a fresh interpreter would import
    the project's json.py, first on its path."""
    fresh, warm = _fresh_and_warm(tmp_path, "import json\nprint(json.WHOSE)\n", files={"json.py": "WHOSE = 'project'\n"})
    assert fresh.log == warm.log == "project\n" and not warm.warm


def test_a_linked_script_and_a_safe_path_set_up_the_path_as_the_interpreter_does(tmp_path):
    files = {"src/train.py": "import helpers\nprint(helpers.WHERE)\n", "src/helpers.py": "WHERE = 'src'\n",
             "helpers.py": "WHERE = 'root'\n"}
    for path, text in files.items():
        (tmp_path / "project" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "project" / path).write_text(text)
    (tmp_path / "project" / "linked.py").symlink_to(tmp_path / "project" / "src" / "train.py")
    for warm in (False, True):
        spec = RunSpec(argv=["python", "linked.py"], cwd=tmp_path / "project", output_dir=tmp_path / f"out{warm}",
                       env={"PYTHONHASHSEED": "0"})
        outcome = ProcessRunner(warm=warm).run(spec)
        assert outcome.warm is warm and outcome.log == "src\n"  # CPython puts the link's target folder first
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "ppmod.py").write_text("WHERE = 'PYTHONPATH'\n")
    code = "import sys, ppmod\nprint(ppmod.WHERE, sys.path[0] == '')\n"
    fresh, warm = _fresh_and_warm(tmp_path, code, env={"PYTHONSAFEPATH": "1", "PYTHONPATH": str(lib)})
    assert fresh.log == warm.log == "PYTHONPATH False\n"


def test_variables_the_imports_set_and_the_main_modules_names_are_a_fresh_interpreters(tmp_path):
    """scikit-learn sets KMP_INIT_AT_FORK as it imports; ``__annotations__`` is a name of every fresh ``__main__``."""
    code = "import os\nimport sklearn\nprint(os.environ.get('KMP_INIT_AT_FORK'), __annotations__)\n"
    fresh, warm = _fresh_and_warm(tmp_path, code)
    assert warm.warm and fresh.log == warm.log == "FALSE {}\n"


def _venv_with(tmp_path: Path, modules: dict[str, str]) -> str:
    """A scratch interpreter whose own site-packages hold ``modules`` (installed, as a team's library would be), and
    this environment's through a ``.pth``."""
    import subprocess
    import sys
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = str(tmp_path / "venv" / "bin" / "python")
    purelib = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    (purelib / "zz_auditor.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for name, text in modules.items():
        (purelib / f"{name}.py").write_text(text)
    return python


def test_a_library_that_reads_a_run_time_variable_or_starts_a_thread_as_it_imports_gets_a_fresh_interpreter(tmp_path):
    """An installed helper that reads REPRO_DATA_TRAIN as it imports would read it unset in the worker, and train on
    the working copy instead of the recorded snapshot; one that starts a ``_thread`` poller would leave its lock held
    in every fork. A library that reads only what the worker's key holds (HOME) is forked, and one that prints as it
    imports has its words in the rebuild's log."""
    python = _venv_with(tmp_path, {
        "teamdata": "import os\nTRAIN = os.environ.get('REPRO_DATA_TRAIN', 'data/train')\n",
        "teamhome": "import os\nHOME = os.environ.get('HOME')\n",
        "bgpoll": "import _thread, time\n_thread.start_new_thread(lambda: time.sleep(30), ())\n",
        "noisy": "import sys\nprint('noisy 1.0: the slow path')\nprint('a warning', file=sys.stderr)\n",
        "spawns": "import subprocess\nsubprocess.run(['true'], check=True)\n"})  # os.environb's PATH (mlflow does)
    pool = warm_module.WarmPool()
    try:
        for module, forked in (("teamdata", False), ("bgpoll", False), ("teamhome", True), ("noisy", True), ("spawns", True)):
            project = tmp_path / module
            project.mkdir()
            (project / "train.py").write_text(f"import {module}\n")
            env = {"PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1", "HOME": str(tmp_path),
                   "REPRO_DATA_TRAIN": str(tmp_path / "snapshot")}
            started = pool.start((), python, [python, "train.py"], project, env, tmp_path / f"{module}.log", 30)
            assert (started is not None) is forked, module
            if started is not None:
                assert started.wait(30) == 0
        # what an import printed is in the rebuild's log, as a fresh interpreter's import prints it there
        assert (tmp_path / "noisy.log").read_text() == "noisy 1.0: the slow path\na warning\n"
    finally:
        pool.close()
