"""The entry-point contract between a training script (through the SDK) and the auditor. Pure: no I/O.

A rebuild runs the recorded entrypoint with these variables set, and reads back these files from
``REPRO_OUTPUT_DIR``. The SDK (``auditor.sdk``) is the script's side, the runners
(``auditor.rebuild``) are the auditor's side; both take every name from here, so the contract has
one home. The README's "entry-point contract" section documents the same table.

=============================  ============================================================  =======
variable                       meaning                                                       set by
=============================  ============================================================  =======
``REPRO_REBUILD``              ``1``: this process is an audit's rebuild (train, never log)  runner
``REPRO_OUTPUT_DIR``           folder for ``metrics.json``, the model file, the record       runner
``REPRO_CONFIG``               the resolved config as a JSON file                            runner
``REPRO_DATA_<NAME>``          folder of the verified snapshot of data ref NAME              runner
``REPRO_SEED``                 the seed to train under (recorded, or a calibration seed)     auditor
``REPRO_DETERMINISTIC``        ``1``/``0``: deterministic kernels as recorded                auditor
``REPRO_TORCH_THREADS``        torch's intra-op thread count as recorded                     auditor
``REPRO_EVALUATE_WEIGHTS``     evaluate this weights file instead of training                auditor
``REPRO_EVALUATE_THEN_TRAIN``  ``1``: evaluate them in a forked child, then train here       auditor
``REPRO_RESUME_CHECKPOINT``    segment replay: the start checkpoint (unset: the seed)        auditor
``REPRO_STOP_STEP``            segment replay: stop here, leave ``checkpoint.safetensors``   auditor
``REPRO_CFG__A__B``            a config override ``a.b`` (training time, recorded)           user
=============================  ============================================================  =======
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# -- variables --------------------------------------------------------------------------
ENV_REBUILD = "REPRO_REBUILD"
ENV_OUTPUT_DIR = "REPRO_OUTPUT_DIR"
ENV_CONFIG = "REPRO_CONFIG"
ENV_DATA_PREFIX = "REPRO_DATA_"
ENV_SEED = "REPRO_SEED"
ENV_DETERMINISTIC = "REPRO_DETERMINISTIC"
ENV_TORCH_THREADS = "REPRO_TORCH_THREADS"
ENV_EVALUATE_WEIGHTS = "REPRO_EVALUATE_WEIGHTS"
ENV_CONFIG_PREFIX = "REPRO_CFG__"
#: with ENV_EVALUATE_WEIGHTS: evaluate in a forked child (outputs in EVALUATION_DIR), then train here
ENV_EVALUATE_THEN_TRAIN = "REPRO_EVALUATE_THEN_TRAIN"
#: segment replay (``auditor.segments``): the start checkpoint, and the step to stop at
ENV_RESUME_CHECKPOINT = "REPRO_RESUME_CHECKPOINT"
ENV_STOP_STEP = "REPRO_STOP_STEP"

#: thread variables the environment capture records and a rebuild pins again (FACTS.md: the thread
#: count changes the weights)
#: cuBLAS's deterministic workspace setting (must be in the environment before cuBLAS initialises)
CUBLAS_WORKSPACE = ":4096:8"
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "MKL_CBWR", ENV_TORCH_THREADS)

# -- files in REPRO_OUTPUT_DIR (and in a run's artifacts) -----------------------------------
#: ``seeds.flags`` key of the nondeterministic sources a training script declared (``run.record_nondeterminism``):
#: the record's own reason why same-seed reruns may differ (``auditor.judge.expected``)
FLAG_NONDETERMINISTIC = "declared_nondeterministic"
#: ``seeds.flags`` key: whether torch initialised CUDA while the block ran (recorded at its end; absent: not recorded).
#: A host's GPU is a GPU run's only when it was used: a CPU run on a GPU host is expected bitwise
FLAG_TORCH_CUDA_USED = "torch_cuda_used"

METRICS_FILE = "metrics.json"
WEIGHTS_FILE = "model.safetensors"
RECORD_FILE = "run_record.json"
DIFF_FILE = "diff.patch"
#: left by the SDK when the script evaluated the weights it was given (REPRO_EVALUATE_WEIGHTS)
EVALUATION_FILE = "evaluation.json"
#: the rebuild's captured output, beside its output folder
LOG_FILE = "rebuild.log"
#: REPRO_EVALUATE_THEN_TRAIN: the forked evaluation's outputs (metrics.json, evaluation.json, its log)
EVALUATION_DIR = "evaluation"
EVALUATION_STATUS_FILE = "status.json"
EVALUATION_LOG_FILE = "evaluation.log"
#: segment replay: the end state a replayed segment leaves at REPRO_STOP_STEP
CHECKPOINT_FILE = "checkpoint.safetensors"
#: a tabular model's rebuild: both models' scores on the recorded evaluation data (``auditor.flavors.predictions``)
PREDICTIONS_FILE = "predictions.npz"
#: the model artifact of each flavour (``auditor.flavors``): one file, read without executing code;
#: a rebuild leaves the one its record's artifact names (``WEIGHTS_FILE`` for PyTorch, as before)
MODEL_FILES = {
    "torch": WEIGHTS_FILE,
    "sklearn": "model.skops",
    "xgboost": "model.xgboost.zip",
    "lightgbm": "model.lightgbm.txt",
    "catboost": "model.catboost.zip",
}


def model_file(flavor: str | None) -> str:
    """The artifact file of ``flavor`` (None: PyTorch weights, as records before flavours say)."""
    return MODEL_FILES[flavor or "torch"]


#: a data ref's name: what survives ``REPRO_DATA_<NAME>``, a ``name=uri`` spec and a tag key unchanged
DATA_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
DATA_NAME_FORM = "1-64 letters, digits, '_', '-' or '.', starting with a letter or digit (e.g. 'train', 'test_v2')"


def check_data_name(name: Any) -> str:
    """``name`` when it is a valid data ref name; ``BadInput`` naming it and the allowed form otherwise.

    A name holding ``=``, ``/``, ``@``, ``:`` or whitespace would be cut apart in the ``name=uri`` spec
    or the store URI, and could not be told back from its ``REPRO_DATA_<NAME>`` variable.
    """
    if not isinstance(name, str) or not DATA_NAME.fullmatch(name):
        from auditor.errors import BadInput

        raise BadInput(f"data ref name {name!r} cannot be used: it must be {DATA_NAME_FORM}",
                       hint="rename the data ref in data={...}, e.g. data={'train': ...}")
    return name


def data_env_var(name: str) -> str:
    """``REPRO_DATA_<NAME>``: NAME upper-cased, ``-`` and ``.`` turned into ``_`` (``check_data_name``'s form only)."""
    return ENV_DATA_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", check_data_name(name)).upper()


def is_rebuild(env: Mapping[str, str]) -> bool:
    """Whether ``env`` is an audit's rebuild (``REPRO_REBUILD=1``)."""
    return env.get(ENV_REBUILD) == "1"


#: what the runner sets for one run only, read by the SDK as the run begins and by no library as it is imported: the
#: variables a warm rebuild worker (``auditor.rebuild.warm``) may differ in from the rebuilds it forks
RUN_TIME_VARS = (ENV_OUTPUT_DIR, ENV_CONFIG, ENV_SEED, ENV_EVALUATE_WEIGHTS, ENV_EVALUATE_THEN_TRAIN, ENV_RESUME_CHECKPOINT,
                 ENV_STOP_STEP)  # not HOME: a library may keep a path under it from its import (matplotlib's config)


def is_run_time_var(name: str) -> bool:
    """Whether ``name`` is set per run (``RUN_TIME_VARS``, a data path, a config override)."""
    return name in RUN_TIME_VARS or name.startswith((ENV_DATA_PREFIX, ENV_CONFIG_PREFIX))


def path_env(*, output_dir: str, data: Mapping[str, str], config_file: str | None) -> dict[str, str]:
    """The path half of the contract, as the script will see the paths (the runner's view).

    ``ValueError`` when two data refs map to the same variable; the runner words it for the user.
    """
    env = {ENV_REBUILD: "1", ENV_OUTPUT_DIR: output_dir}
    seen: dict[str, str] = {}
    for name, path in data.items():
        key = data_env_var(name)
        if key in seen:
            raise ValueError(f"data refs {seen[key]!r} and {name!r} both map to {key}")
        seen[key] = name
        env[key] = path
    if config_file is not None:
        env[ENV_CONFIG] = config_file
    return env


def rebuild_env(record: Any, *, seed: int | None = None, evaluate: str | None = None, then_train: bool = False,
                force_deterministic: bool = False) -> dict[str, str]:
    """The seed, determinism and thread pins a rebuild of ``record`` runs under (paths come from the runner).

    ``force_deterministic``: execution made deterministic whatever the record says (deterministic algorithms on, one
    thread in every pool): the rerun that verifies a claimed noise source (``auditor.steps.calibrate``).

    ``record`` is an ``auditor.lineage.record.RunRecord``; it is not imported here, because the record
    module takes its file names from this one (this module sits below it and imports nothing of ours).
    """
    env: dict[str, str] = {}
    seeds = record.seeds
    if seeds is not None:
        chosen = seed if seed is not None else seeds.seed
        if chosen is not None:
            env[ENV_SEED] = str(chosen)
        env[ENV_DETERMINISTIC] = "0" if seeds.deterministic is False else "1"
        if seeds.pythonhashseed not in (None, "unset", "random"):
            env["PYTHONHASHSEED"] = seeds.pythonhashseed
        if seeds.flags.get("CUBLAS_WORKSPACE_CONFIG"):
            env["CUBLAS_WORKSPACE_CONFIG"] = str(seeds.flags["CUBLAS_WORKSPACE_CONFIG"])
    environment = record.environment
    if environment is not None:
        threads = environment.threads
        for name in THREAD_VARS:
            if threads.get(name):
                env[name] = str(threads[name])
        # the thread count changes the weights (FACTS.md): pin what training actually used
        if threads.get("torch_intra_op") and ENV_TORCH_THREADS not in env:
            env[ENV_TORCH_THREADS] = str(threads["torch_intra_op"])
    if evaluate is not None:
        env[ENV_EVALUATE_WEIGHTS] = str(evaluate)
        if then_train:
            env[ENV_EVALUATE_THEN_TRAIN] = "1"
    if force_deterministic:
        env.update({ENV_DETERMINISTIC: "1", "CUBLAS_WORKSPACE_CONFIG": CUBLAS_WORKSPACE,
                    **{name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", ENV_TORCH_THREADS)}})
    return env
