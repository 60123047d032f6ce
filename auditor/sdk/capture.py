"""Capturing a run's record as its block begins, and watching the block (input tracing, the seed guard).

``capture_record`` resolves the config and the seed (in a rebuild, from the environment the audit
sets), seeds every generator and captures the five inputs into ``run.record``; ``start_tracing`` and
``guard_seeds`` then watch what the script reads and how it reseeds until the block ends.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from auditor.contract import ENV_DETERMINISTIC, ENV_SEED, check_data_name, data_env_var
from auditor.errors import BadInput
from auditor.lineage.record import DataRef
from auditor.lineage.redact import redacted_logger
from auditor.sdk.env import env_flag, env_int, output_dir, rebuild_config
from auditor.sdk.generated import GeneratedData, generated_ref
from auditor.sdk.run import Run

log = redacted_logger(__name__)  # the warnings may quote config values and URIs


def capture_record(
    run: Run,
    *,
    config: Any,
    overrides: Sequence[str],
    data: Mapping[str, str | DataRef | GeneratedData],
    seed: int | None,
    deterministic: bool | None,
    repo_dir: str | Path | None,
    entrypoint: Sequence[str] | None,
) -> Path:
    """Resolve the config and the seed, seed every generator, and capture the record into ``run``; returns the repo folder.

    In a rebuild the config, the seed, determinism and the output folder come from the environment
    (``REPRO_CONFIG``, ``REPRO_SEED``, ``REPRO_DETERMINISTIC``, ``REPRO_OUTPUT_DIR``) and win over the
    arguments; otherwise the arguments win over the config's own ``seed`` and ``deterministic``.
    """
    from auditor.lineage.gather import capture, resolve_config
    from auditor.seeds import seed_everything

    env = run._env
    forced_seed = forced_deterministic = None
    if run.rebuild:
        config, overrides = rebuild_config(env), ()
        forced_seed, forced_deterministic = env_int(env, ENV_SEED), env_flag(env, ENV_DETERMINISTIC)
        run._output_dir = output_dir(env)
    config, hydra = hydra_config(config)  # an OmegaConf/Hydra config: resolved, with where each value came from
    # The config is resolved once before capture only to learn the seed it may hold.
    resolved = resolve_config(config, overrides, env).resolved
    seed = _first_given(forced_seed, seed, resolved.get("seed"))
    deterministic = _first_given(forced_deterministic, deterministic, resolved.get("deterministic", True))
    if seed is not None:
        run.seeds = seed_everything(_as_seed(seed), bool(deterministic))
    default_dir, default_argv = _script_dir_and_argv()
    repo = Path(repo_dir) if repo_dir is not None else default_dir
    captured = capture(
        repo_dir=repo,
        config=config,
        overrides=overrides,
        data=_data_refs(data, env, run.rebuild),
        seeds=run.seeds,
        entrypoint=entrypoint or default_argv,
        env=env,
    )
    run.record, run.diff = captured.record, captured.diff
    if hydra is not None and run.record.config is not None:  # the digest covers the values only: sources may be refined
        known = {k: v for k, v in hydra.sources.items() if k in run.record.config.sources}
        run.record.config = run.record.config.model_copy(update={"sources": {**run.record.config.sources, **known},
                                                                 "file": hydra.file})
    return repo


class HydraSources(NamedTuple):
    """Where each value of a Hydra config came from: ``cli`` (a command-line override, or under a config group the
    command line chose), ``file`` (the composed YAML); and the primary config's name."""

    sources: dict[str, str]
    file: str | None


def hydra_config(config: Any) -> tuple[Any, HydraSources | None]:
    """An OmegaConf ``DictConfig`` (what ``@hydra.main`` passes) as a plain dict with every interpolation resolved,
    and its sources from Hydra's overrides; any other config unchanged, with None."""
    if type(config).__module__.split(".", 1)[0] != "omegaconf":
        return config, None
    from omegaconf import OmegaConf

    from auditor.lineage.gather.config import flatten

    plain = OmegaConf.to_container(config, resolve=True, throw_on_missing=True)
    if not isinstance(plain, dict):
        raise BadInput("an OmegaConf config must be a mapping (a DictConfig), not a list", hint="pass the cfg @hydra.main gives")
    chosen: list[str] = []
    name = None
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            hydra = HydraConfig.get()
            chosen = [str(o).split("=", 1)[0].lstrip("+~") for o in hydra.overrides.task if "=" in str(o)]
            name = hydra.job.config_name
    except ImportError:  # OmegaConf without Hydra: a YAML the script loaded itself
        pass
    sources = {}
    for key in flatten(plain):
        given = any(key == c or key.startswith(c + ".") for c in chosen)
        sources[key] = "cli" if given else "file"
    return plain, HydraSources(sources, f"{name}.yaml" if name else None)


def _first_given(*values: Any) -> Any:
    return next((value for value in values if value is not None), None)


def _as_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, str)):
        raise BadInput(f"seed {seed!r} is not an integer")
    try:
        return int(seed)
    except ValueError:
        raise BadInput(f"seed {seed!r} is not an integer") from None


def _script_dir_and_argv() -> tuple[Path, list[str] | None]:
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.is_file():
        # The audit runs the entrypoint from the project folder (code.subdir), so the
        # script is named relative to it, whatever folder training was started from.
        return script.resolve().parent, ["python", script.name, *sys.argv[1:]]
    return Path.cwd(), None


def _data_refs(data: Mapping[str, str | DataRef | GeneratedData], env: Mapping[str, str], rebuild: bool) -> dict[str, DataRef]:
    """The data refs ``track(data=...)`` names: refs as given, ``URI@version`` parsed, generated data snapshotted."""
    from auditor.lineage.gather import parse_data_ref

    refs: dict[str, DataRef] = {}
    for name, spec in data.items():
        check_data_name(name)  # before a name holding '=' is cut into the spec below
        if isinstance(spec, DataRef):
            refs[name] = spec
        elif isinstance(spec, GeneratedData):
            refs[name] = generated_ref(name, spec, env, rebuild)
        elif spec:
            refs[name] = parse_data_ref(f"{name}={spec}")[1]
            _check_snapshot_id(name, spec, refs[name])
        elif rebuild:
            # A script that reads its data ref from an environment variable sees none in a rebuild;
            # the audit's materialised folder is what this rebuild actually read.
            refs[name] = DataRef(kind="path", uri=env.get(data_env_var(name)) or "unset")
        else:
            raise BadInput(f"data ref {name!r} is empty", hint=f"pass data={{{name!r}: '<store URI>@<snapshot id>'}}")
    return refs


def _check_snapshot_id(name: str, spec: Any, ref: DataRef) -> None:
    """A ``URI@<algorithm>:<digest>`` data ref must name one of our snapshot ids (``blake3:`` and 64 lower-case hex
    digits, ``auditor.digests.SNAPSHOT_ID``): ``sha256:``, ``BLAKE3:``, 63 digits or ``md5:`` are refused before
    training starts, naming the shape, instead of training on a ref no audit can materialise."""
    from auditor.digests import SNAPSHOT_ID_HELP, looks_like_digest_id, snapshot_id_problem

    version = ref.version or ""
    problem = snapshot_id_problem(version) if looks_like_digest_id(version) else None
    if problem:
        raise BadInput(f"data ref {name!r} = {str(spec)!r} does not name a snapshot id: {problem}",
                       hint=f"a snapshot id is {SNAPSHOT_ID_HELP}, as `repro-audit snapshot create` prints it; "
                            f"pass data={{{name!r}: '<store>@{SNAPSHOT_ID_HELP}'}}")


# -- watching the block ------------------------------------------------------------------------------
def start_tracing(run: Run, repo_dir: Path) -> None:
    """Input tracing for the block (``auditor.lineage.tracing``); a failure to trace never stops training."""
    from auditor.lineage import tracing

    try:
        run._tracer = tracing.start(run.record, repo_dir=repo_dir, env=run._env, exclude=[run._scratch, run._output_dir])
    except Exception as exc:  # noqa: BLE001 - the record then says it was not traced
        log.warning("repro: input tracing is off for this run: %s", exc)
        run._tracer = None


def stop_tracing(run: Run) -> None:
    """End the block's input tracing and put what it saw into the record."""
    tracer = run._tracer
    if tracer is not None:
        run._tracer = None
        try:
            run.record.traced = tracer.stop()
        except Exception as exc:  # noqa: BLE001 - the record then says it was not traced
            log.warning("repro: input tracing failed for this run: %s", exc)


def guard_seeds(run: Run) -> None:
    """Report the script's own reseeding of the global generators while the block runs (a seeded run only)."""
    if run.seeds is not None:
        from auditor.seeds import guard_seeding

        run._seed_guard = guard_seeding(run.seeds, lambda message: log.warning("repro: %s", message))


def unguard_seeds(run: Run) -> None:
    """Stop reporting reseeding (the block ended); the guard keeps what it found (``run._seed_guard.found``). Records
    whether torch used CUDA in the block (``FLAG_TORCH_CUDA_USED``): a host's GPU that no kernel ran on explains no noise."""
    if run._seed_guard is not None:
        run._seed_guard.uninstall()
    if run.seeds is not None:
        from auditor.seeds import flags_at_end

        for name, value in flags_at_end().items():
            run.record_flag(name, value)
