"""Render the index page over 5,000 synthetic published audits and print the time.

The entries have the shape ``auditor.report.publish.entry_fields`` writes into the ledger
(200 models x 25 audits, three metrics each), so this measures exactly what a publish pays to
rewrite ``index.html``: pandas to group histories, Jinja to write 5,000 rows and the sparklines.
Prints the median of ``--repeat`` renders (after one warm-up that pays the imports), its ratio to
the two-second budget, and the time to also write the page into a local store.

    .venv/bin/python bench/bench_index.py [--audits 5000] [--models 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditor.report.index import render_index, write_index  # noqa: E402
from auditor.storage import open_store  # noqa: E402

BUDGET_S = 2.0
VERDICTS = ["REPRODUCED_BITWISE", "REPRODUCED_WITHIN_TOLERANCE", "OUT_OF_TOLERANCE", "NOT_REPRODUCIBLE", "ERROR"]


def synthetic_entries(audits: int, models: int, seed: int = 7) -> list[dict]:
    """Ledger entries as the publisher writes them, with plausible verdicts and metric distances."""
    rng = random.Random(seed)
    entries = []
    for seq in range(audits):
        model = f"model-{seq % models:04d}"
        version = str(seq // models + 1)
        day = 1 + seq * 3650 // audits
        date = f"{2016 + day // 365:04d}-{1 + day % 365 // 31:02d}-{1 + day % 28:02d}T02:00:00Z"
        verdict = rng.choices(VERDICTS, weights=[30, 50, 10, 6, 4])[0]
        metrics = {
            name: {"distance": round(rng.gauss(-0.002, 0.003), 6), "inside": None}
            for name in ("auc", "loss", "f1")
        } if verdict not in ("NOT_REPRODUCIBLE", "ERROR") else {}
        for m in metrics.values():
            m["inside"] = m["distance"] <= 0
        stem = f"{model}_v{version}_audit-{seq:05d}_{seq:012x}"
        entries.append({
            "audit": {"model": model, "version": version, "audit_id": f"audit-{seq:05d}"},
            "verdict": verdict,
            "date": date,
            "report": {"key": f"{stem}.html", "sha256": "sha256:" + "0" * 64},
            "evidence": {"key": f"{stem}.json", "sha256": "sha256:" + "0" * 64, "digest": "sha256:" + "0" * 64},
            "metrics": metrics,
            "id": stem,
            "seq": seq,
            "prev": "sha256:" + "0" * 64,
            "published_at": date,
            "hash": f"sha256:{seq:064x}",
        })
    return entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--audits", type=int, default=5000)
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    entries = synthetic_entries(args.audits, args.models)

    started = time.perf_counter()
    html = render_index(entries)
    first = time.perf_counter() - started
    times = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        render_index(entries)
        times.append(time.perf_counter() - started)
    median = statistics.median(times)
    with tempfile.TemporaryDirectory() as folder:
        store = open_store(folder)
        started = time.perf_counter()
        write_index(store, entries)
        written = time.perf_counter() - started

    print(f"index over {args.audits} audits of {args.models} models: {len(html) / 1e6:.1f} MB of HTML")
    print(f"  first render (with pandas/jinja imports): {first:.2f} s")
    print(f"  render, median of {args.repeat}:            {median:.2f} s  ({median / BUDGET_S:.2f} x the {BUDGET_S:.0f} s budget)")
    print(f"  render + write to a local store:         {written:.2f} s")
    if median > BUDGET_S:
        print(f"  OVER BUDGET: {median:.2f} s > {BUDGET_S} s")


if __name__ == "__main__":
    main()
