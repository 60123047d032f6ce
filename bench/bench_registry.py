"""Listing and resolving the records of 2,000 registered versions on MLflow (SQLite).

Prints, for the same registry in one run:
  * our paginated listing (version pages + one ``search_runs`` per chunk of run ids),
  * the naive listing a first draft would write (one ``get_run`` per version),
  * resolving every version's run record (``load_record``: list + download + parse + digest check),
with the registry calls each made and the ratio between the two listings.

    .venv/bin/python bench/bench_registry.py [--versions 2000] [--models 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

from tests.fixtures.counting import CountingClient  # noqa: E402


def naive_listing(client) -> int:
    """One page of versions, then the run of each version fetched on its own."""
    count = 0
    token = None
    while True:
        page = client.search_model_versions(max_results=1000, page_token=token)
        for mv in page:
            client.get_run(mv.run_id)
            count += 1
        token = page.token
        if not token:
            return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--versions", type=int, default=2000)
    parser.add_argument("--models", type=int, default=20)
    args = parser.parse_args()

    from mlflow import MlflowClient

    from auditor.registry.mlflow import MlflowRegistry
    from tests.fixtures.mlflow import bulk_versions
    from tests.fixtures.records import complete_record

    with tempfile.TemporaryDirectory(prefix="bench-registry-") as tmp:
        root = Path(tmp)
        os.chdir(root)  # MLflow's default artifact root is ./mlruns
        uri = f"sqlite:///{root / 'mlflow.db'}"
        started = time.perf_counter()
        bulk_versions(uri, root / "artifacts", args.versions, models=args.models, record=complete_record())
        print(f"setup: {args.versions} versions over {args.models} models, each with a run record, "
              f"in {time.perf_counter() - started:.1f} s")

        ours = CountingClient(MlflowClient(tracking_uri=uri))
        registry = MlflowRegistry(uri, client=ours)
        started = time.perf_counter()
        listed = list(registry.list_versions())
        t_list = time.perf_counter() - started
        assert len(listed) == args.versions
        list_calls = Counter(ours.calls)

        naive = CountingClient(MlflowClient(tracking_uri=uri))
        started = time.perf_counter()
        assert naive_listing(naive) == args.versions
        t_naive = time.perf_counter() - started

        ours.calls.clear()
        started = time.perf_counter()
        for info in listed:
            registry.load_record(info)
        t_records = time.perf_counter() - started

        def calls(counter: Counter[str]) -> str:
            if not counter:
                return "    0 client calls (reads each run's artifact store directly)"
            return f"{sum(counter.values()):>5} client calls ({', '.join(f'{k} {v}' for k, v in sorted(counter.items()))})"

        n = args.versions
        print(f"{'list, paginated + batched runs':<34} {t_list:7.3f} s  {1000 * t_list / n:6.3f} ms/version  "
              f"{calls(list_calls)}")
        print(f"{'list, naive (get_run per version)':<34} {t_naive:7.3f} s  {1000 * t_naive / n:6.3f} ms/version  "
              f"{calls(naive.calls)}")
        print(f"{'resolve every record (load_record)':<34} {t_records:7.3f} s  {1000 * t_records / n:6.3f} ms/version  "
              f"{calls(ours.calls)}")
        print(f"ratio naive/ours for listing: {t_naive / t_list:.1f}x the time, "
              f"{sum(naive.calls.values()) / sum(list_calls.values()):.0f}x the calls")
        print(f"list + resolve {n} records: {t_list + t_records:.2f} s")


if __name__ == "__main__":
    main()
