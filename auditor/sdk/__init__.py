"""The training-side SDK: ``auditor.track(...)`` and ``auditor.register_model(run, name)``.

::

    with auditor.track(config="config.yaml", overrides=sys.argv[1:], data={"train": uri_at_id}, seed=7) as run:
        model = train(run.config, run.data_path("train"), **run.dataloader_kwargs())
        run.log_metrics({"auc": 0.91})
        run.save_weights(model.state_dict())
    auditor.register_model(run, "churn")

Two modes, one script. Normally ``track`` resolves the config, seeds every
generator, captures the run record, starts (or attaches to) an MLflow run and,
on exit, logs the record and everything MLflow users expect. With
``REPRO_REBUILD=1`` (the audit re-running the recorded entrypoint) it does no
MLflow I/O: the config, data, seed and output folder come from the environment
(see the entry-point contract in the README) and ``metrics.json``,
``model.safetensors`` and ``run_record.json`` are left in ``REPRO_OUTPUT_DIR``.

The modules, each importing only those listed before it (no heavy library at import time):

==========================  ==========================================================================
``env``                     the rebuild's environment (the script's side of ``auditor.contract``)
``evaluation``              the forked child that re-evaluates registered weights (process mechanics)
``weights``                 the safetensors weights file and the pyfunc spec logged over it
``generated``               ``auditor.generated(...)``: data the script makes, recorded as a snapshot
``consumed``                a digest per batch of what the model consumed (torch hooks, estimator fit/predict)
``run``                     ``Run``, the handle a block yields, and every piece of state it holds
``models``                  ``save_model``: any supported model saved without pickle (``auditor.flavors``)
``checkpoints``             checkpoint chains and segment replay: ``checkpoint``, ``step_done``, ``resume``
``argparse_capture``        ``track(config=parser|args)``: the namespace, recorded values in a rebuild
``capture``                 capturing the record as a block begins; input tracing and the seed guard
``outputs``                 the MLflow run at training time, ``REPRO_OUTPUT_DIR`` in a rebuild
``register``                ``register_model``: the gate, then a registered model version
``forms``                   ``track``, ``start``/``finish`` and ``@tracked``
==========================  ==========================================================================
"""

from auditor.sdk.checkpoints import checkpoint, checkpoint_every, resume, save_model, step_done, stop_step
from auditor.sdk.env import rebuild_mode
from auditor.sdk.forms import finish, start, track, tracked
from auditor.sdk.generated import GeneratedData, generated
from auditor.sdk.register import register_model
from auditor.sdk.run import Run

__all__ = [
    "GeneratedData", "Run", "checkpoint", "checkpoint_every", "finish", "generated", "rebuild_mode", "register_model",
    "resume", "save_model", "start", "step_done", "stop_step", "track", "tracked",
]
