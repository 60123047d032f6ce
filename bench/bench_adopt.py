"""``repro-audit adopt --assess-only`` over a registry of plain versions, beside MLflow's own listing (issue 30).

The registry is made through MLflow's client API by ``tests.fixtures.plain_registry`` (no training): N versions
over R runs, a tenth with no run. Measured back to back, each in a fresh interpreter, both reading the same
registry:

* **MLflow listing**: ``MlflowClient.search_model_versions`` paged over every version (what ``mlflow`` itself
  does to list the registry: names, versions, sources, no run looked up);
* **assess-only**: ``repro-audit adopt --assess-only --json`` (every version's run tags, params and datasets in
  chunked ``search_runs``, its ``MLmodel`` and environment files, the classification).

Both include the interpreter's start and MLflow's import; the listing is also timed in-process, without them.

    python bench/bench_adopt.py [--versions 2000] [--runs 100] [--out bench/results/adopt.txt]

Target (issue 30, acceptance 4): assess-only under 120 s for 2,000 versions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LISTING = """
import sys, time
from mlflow import MlflowClient
client = MlflowClient(tracking_uri=sys.argv[1])
start = time.perf_counter()
token, n = None, 0
while True:
    page = client.search_model_versions(max_results=1000, page_token=token)
    n += len(page)
    token = page.token
    if not token:
        break
print(n, time.perf_counter() - start)
"""


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT)
    return time.perf_counter() - start, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    from tests.fixtures.plain_registry import plain_versions

    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true", "PYTHONPATH": str(ROOT)}
    env.pop("MLFLOW_TRACKING_URI", None)
    with tempfile.TemporaryDirectory(prefix="bench-adopt-") as tmp:
        root = Path(tmp)
        uri = f"sqlite:///{root / 'mlflow.db'}"
        from mlflow import MlflowClient

        MlflowClient(tracking_uri=uri).search_experiments()  # creates the database
        made = plain_versions(uri, root, args.versions, runs=args.runs)
        listing_wall, listing = _timed([sys.executable, "-c", LISTING, uri], env)
        assess_wall, assess = _timed([sys.executable, "-m", "auditor", "adopt", "--assess-only", "--json",
                                      "--tracking-uri", uri], env)
    if listing.returncode != 0 or assess.returncode not in (0, 1):
        sys.exit(f"a command failed:\n{listing.stderr[-2000:]}\n{assess.stderr[-2000:]}")
    listed, listing_inner = listing.stdout.split()
    swept = json.loads(assess.stdout)
    load = os.getloadavg()[0]
    lines = [
        f"registry: {args.versions} plain versions over {args.runs} runs (made in {made['runs'] + made['versions']:.1f} s), "
        f"load average {load:.1f}",
        f"{'':32}{'wall (process)':>16}{'in-process':>14}{'versions':>10}",
        f"{'MLflow search_model_versions':32}{listing_wall:>15.2f}s{float(listing_inner):>13.2f}s{int(listed):>10}",
        f"{'repro-audit adopt --assess-only':32}{assess_wall:>15.2f}s{swept['seconds']:>13.2f}s{swept['versions']:>10}",
        f"ratio assess-only / listing: {assess_wall / listing_wall:.2f} (process), "
        f"{swept['seconds'] / max(float(listing_inner), 1e-9):.1f} (in-process); target: assess-only < 120 s "
        f"({'met' if assess_wall < 120 else 'NOT met'})",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
