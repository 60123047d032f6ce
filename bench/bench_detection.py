"""Detection of planted divergences, and false alarms on intact rebuilds (issue 13, acceptance 2).

The reference model (``examples/reference_model``), trained for real on CPU. Its ``train.py`` is given
three hooks the record does not pin (environment variables read by the script, as a careless user's
script would): a learning-rate scale, a fraction of training labels flipped, and one feature zeroed.
One intact version is calibrated for real (same-seed and seed-varied reruns); each divergent version
carries that calibration (the same recipe on the same platform), is audited once, and counts as
detected when its verdict is not REPRODUCED. The intact version is audited ``--intact`` times (20 by
default): each verdict that is not REPRODUCED is a false alarm.

    python bench/bench_detection.py [--intact 20] [--epochs 2]

Prints, per divergence and size, the verdict and the tier that caught it; then the detection rate
per tier and the false-alarm rate. Target on CPU: every divergence detected, 0 false alarms.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HOOKS = '''
def _plant(cfg, data):
    """Bench hooks: unrecorded inputs read from the environment (never set in an audit's rebuild)."""
    import os as _os
    cfg = dict(cfg)
    cfg["lr"] = float(cfg["lr"]) * float(_os.environ.get("PLANT_LR_SCALE", "1"))
    flip = float(_os.environ.get("PLANT_FLIP", "0"))
    if flip:
        y = data["train_y"].clone()
        idx = torch.randperm(len(y), generator=torch.Generator().manual_seed(99))[: int(flip * len(y))]
        y[idx] = 1 - y[idx]
        data = {**data, "train_y": y}
    drop = _os.environ.get("PLANT_DROP_FEATURE")
    if drop is not None:
        data = {k: v.clone() for k, v in data.items()}
        for k in ("train_X", "test_X"):
            data[k][:, int(drop)] = 0.0
    return cfg, data
'''

DIVERGENCES = [
    ("learning rate +1 %", {"PLANT_LR_SCALE": "1.01"}),
    ("learning rate +10 %", {"PLANT_LR_SCALE": "1.10"}),
    ("1 % of labels flipped", {"PLANT_FLIP": "0.01"}),
    ("5 % of labels flipped", {"PLANT_FLIP": "0.05"}),
    ("25 % of labels flipped", {"PLANT_FLIP": "0.25"}),
    ("one feature dropped", {"PLANT_DROP_FEATURE": "0"}),
]


def _patch(project: Path) -> None:
    train = project / "train.py"
    text = train.read_text()
    text = text.replace("\ndef train(cfg: dict, data", HOOKS + "\n\ndef train(cfg: dict, data", 1)
    text = text.replace('''        model, metrics = train(run.config, data, run.dataloader_kwargs())''',
                        '''        model, metrics = train(*_plant(run.config, data), run.dataloader_kwargs())''')
    assert "_plant(run.config" in text, "train.py changed: update the bench's hooks"
    train.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--intact", type=int, default=20, help="audits of the intact version (false alarms)")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    import subprocess

    from mlflow import MlflowClient

    import auditor
    from auditor import demo
    from auditor.snapshots import create_snapshot
    from auditor.steps import AuditOptions, Session
    from auditor.tags import TAG_BANDS, TAG_CALIBRATION

    root = Path(tempfile.mkdtemp(prefix="bench-detection-"))
    env = demo.base_env(root)
    project = demo.make_project(root / "project")
    _patch(project)
    demo._run(["git", "commit", "-qam", "bench hooks"], cwd=project, env={**os.environ, **demo.GIT_IDENTITY})
    full = {**os.environ, **env}
    demo._run([sys.executable, str(project / "make_data.py"), str(root / "data")], cwd=project, env=full)
    env["REPRO_TRAIN_DATA"] = f"{env['REPRO_SNAPSHOT_STORE']}@{create_snapshot(root / 'data', env['REPRO_SNAPSHOT_STORE']).id}"
    uri = env["MLFLOW_TRACKING_URI"]
    client = MlflowClient(tracking_uri=uri)
    client.create_experiment("reference-model", artifact_location=(root / "artifacts").as_uri())
    settings = demo.with_env(env)
    session = Session(settings)  # one session for the whole run: the registry and the runner opened once
    options = AuditOptions(runner="process", publish=False)  # no date: each audit its own id, as `audit --no-publish`

    def train(extra: dict[str, str]) -> str:
        started = time.perf_counter()
        subprocess.run([sys.executable, "train.py", f"epochs={args.epochs}"], cwd=project, env={**full, **env, **extra}, check=True, capture_output=True)
        version = auditor.register_model(demo._latest_run(uri), "bench", tracking_uri=uri)
        print(f"  trained version {version} in {time.perf_counter() - started:.1f}s {extra or '(intact)'}", flush=True)
        return f"models:/bench/{version}"

    print(f"world under {root}", flush=True)
    intact = train({})
    started = time.perf_counter()
    bands = session.calibrate(intact, reruns=5, same_seed=2, runner="process")
    floor = bands.calibration.same_seed
    print(f"  calibrated in {time.perf_counter() - started:.1f}s: same-seed floor bit-identical={floor.bit_identical} over {floor.n} reruns, "
          f"{len(bands)} bands", flush=True)
    tags = client.get_model_version("bench", intact.rsplit("/", 1)[1]).tags
    carried = {TAG_BANDS: tags[TAG_BANDS], TAG_CALIBRATION: tags[TAG_CALIBRATION]}

    rows = []
    for name, extra in DIVERGENCES:
        ref = train(extra)
        for key, value in carried.items():
            client.set_model_version_tag("bench", ref.rsplit("/", 1)[1], key, value)
        result = session.audit(ref, options).result
        failing = [t for t, tier in result.tiers.items() if tier.status == "fail"]
        inside = [m.name for m in result.metrics if m.inside]
        rows.append({"divergence": name, "verdict": result.verdict.value, "failing": failing, "metrics_inside_bands": inside,
                     "detected": not result.verdict.reproduced})
        print(f"  {name:<24} {result.verdict.value:<28} failing: {', '.join(failing) or '-'}; metrics inside their bands: {', '.join(inside) or 'none'}", flush=True)

    alarms = Counter()
    started = time.perf_counter()
    for i in range(args.intact):
        result = session.audit(intact, options).result
        alarms[result.verdict.value] += 1
        if not result.verdict.reproduced:
            print(f"  FALSE ALARM on intact audit {i + 1}: {result.verdict.value}: {result.error or result.tiers['statistical'].summary}", flush=True)
    per_audit = (time.perf_counter() - started) / max(args.intact, 1)

    detected = sum(r["detected"] for r in rows)
    by_tier = Counter(t for r in rows for t in r["failing"])
    band_only = sum(1 for r in rows if r["detected"] and len(r["metrics_inside_bands"]) == len(bands))
    false_alarms = sum(n for v, n in alarms.items() if not v.startswith("REPRODUCED"))
    print()
    print(f"detection: {detected}/{len(rows)} planted divergences ({detected / len(rows):.0%}); tiers that failed: {dict(by_tier)}")
    print(f"  of those, {band_only} had every metric inside its calibrated band: the metric bands alone would have passed them")
    print(f"false alarms: {false_alarms}/{args.intact} intact audits ({false_alarms / max(args.intact, 1):.0%}); verdicts {dict(alarms)}; "
          f"{per_audit:.1f}s an audit")
    out = ROOT / "bench" / "results" / "detection.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"divergences": rows, "intact_verdicts": dict(alarms), "epochs": args.epochs,
                               "floor_bit_identical": floor.bit_identical, "seconds_per_audit": round(per_audit, 1)}, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
