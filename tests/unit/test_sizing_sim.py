"""bench/sizing.py's arithmetic on cases worked by hand, and its settings' names against auditor.settings."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

from auditor import settings as S

PATH = Path(__file__).resolve().parents[2] / "bench" / "sizing.py"


@pytest.fixture(scope="module")
def sizing():
    spec = importlib.util.spec_from_file_location("sizing_under_test", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_four_jobs_on_two_workers_by_hand(sizing):
    # 3 and 1 start at 0; 2 goes to the worker free at 1 (ends 3), 4 to the one free at 3 (ends 7)
    assert sizing.makespan([3, 1, 2, 4], 2) == 7
    # longest first: 4 | 3, then 2 -> the one free at 3 (5), 1 -> the one free at 4 (5)
    assert sizing.makespan([4, 3, 2, 1], 2) == 5
    assert sizing.makespan([3, 1, 2, 4], 1) == 10
    assert sizing.makespan([3, 1, 2, 4], 9) == 4  # more workers than jobs: the longest job
    assert sizing.workers_needed([3, 1, 2, 4], 7) == 2
    assert sizing.workers_needed([3, 1, 2, 4], 6.9) == 3  # 3 | 1,2 -> 3 | 4 ends at 4
    assert sizing.workers_needed([3, 1, 2, 4], 3.9) is None  # the 4 alone is longer


def test_calibrations_as_mapped_reruns_by_hand(sizing):
    # one calibration, 2 same-seed then 19 seed-varied reruns of 10 s: one worker 21 rounds; 4 workers 1 + 5 rounds;
    # 19 workers 1 + 1 (the seed-varied reruns wait for the same-seed ones: never under two rounds)
    assert sizing.calibrations_makespan([10], 2, 19, 1) == 210
    assert sizing.calibrations_makespan([10], 2, 19, 4) == 60
    assert sizing.calibrations_makespan([10], 2, 19, 19) == 20
    assert sizing.calibration_workers_needed([10], 2, 19, 60) == 4
    assert sizing.calibration_workers_needed([10], 2, 19, 19.9) is None
    # two calibrations of 10 s and 30 s, 1 + 2 reruns each, on 2 workers: same-seed 10 | 30 (ends 10, 30); the first's
    # seed-varied two go to the worker free at 10 (10-20, 20-30), then the second's to those free at 30 (30-60, 30-60)
    assert sizing.calibrations_makespan([10, 30], 1, 2, 2) == 60
    assert sizing.calibrations_makespan([10, 30], 1, 2, 6) == 60  # two rounds of the 30 s one: the floor
    assert sizing.calibration_workers_needed([10, 30], 1, 2, 60) == 2


def test_more_workers_never_end_the_calibrations_later(sizing):
    """The bisection in ``calibration_workers_needed`` needs this: checked on random registries."""
    rng = random.Random(44)
    for _ in range(60):
        rebuilds = [rng.lognormvariate(0, 1.2) for _ in range(rng.randint(1, 12))]
        same, reruns = rng.randint(0, 3), rng.randint(1, 8)
        walls = [sizing.calibrations_makespan(rebuilds, same, reruns, w) for w in range(1, 40)]
        assert all(later <= earlier + 1e-9 for earlier, later in zip(walls, walls[1:], strict=False)), walls


def test_more_workers_never_need_more_wall_time(sizing):
    rng = random.Random(43)
    for _ in range(50):
        jobs = [rng.lognormvariate(0, 1.2) for _ in range(rng.randint(1, 40))]
        walls = [sizing.makespan(jobs, w) for w in range(1, 45)]
        assert all(later <= earlier + 1e-12 for earlier, later in zip(walls, walls[1:], strict=False))
        window = rng.uniform(max(jobs), sum(jobs))
        needed = sizing.workers_needed(jobs, window)
        assert sizing.makespan(jobs, needed) <= window
        assert needed == 1 or sizing.makespan(jobs, needed - 1) > window


def test_the_lognormal_fit_and_the_seeded_output(sizing):
    median, sigma = sizing.fit_lognormal([1.0, 100.0])
    assert median == pytest.approx(10.0) and sigma == pytest.approx(3.2563, abs=1e-4)
    args = sizing.parse(["--registered", "300"])
    assert sizing.report(args) == sizing.report(args)  # a fixed seed: the same text every run


def test_the_settings_it_names_are_the_products(sizing):
    for name, default in (sizing.NIGHTLY_MAX_MODELS, sizing.NIGHTLY_BUDGET_HOURS, sizing.RERUN_WORKERS,
                          sizing.REBUILD_TIMEOUT_S, sizing.OVERDUE_DAYS):
        assert S.BY_NAME[name].default == default
    from auditor.sampling import DEFAULT_COST_HOURS

    assert sizing.DEFAULT_COST_HOURS == DEFAULT_COST_HOURS
