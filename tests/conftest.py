"""Shared test set-up. Fixture modules live in tests/fixtures/, one per real part."""

from __future__ import annotations

import importlib.util

_FIXTURE_MODULES = [
    "tests.fixtures.common",
    "tests.fixtures.s3",
    "tests.fixtures.gitrepo",
    "tests.fixtures.mlflow",
    "tests.fixtures.docker",
    "tests.fixtures.images",
    "tests.fixtures.compose",
    "tests.fixtures.browser",
    "tests.fixtures.reference",
]

pytest_plugins = [m for m in _FIXTURE_MODULES if importlib.util.find_spec(m) is not None]

# Optional dependencies that CI installs (``.[dev]``) must never skip silently there: under
# REPRO_REQUIRE_OPTIONAL=1 (``.ci/run`` sets it) a skip for a missing module or tool is a failure.
_MISSING = ("could not import", "not installed", "no module named")


def pytest_runtest_makereport(item, call):
    import os

    import pytest

    if os.environ.get("REPRO_REQUIRE_OPTIONAL") != "1" or call.excinfo is None:
        return None
    if call.excinfo.errisinstance(pytest.skip.Exception):
        reason = str(call.excinfo.value).lower()
        if any(marker in reason for marker in _MISSING):
            from _pytest.reports import TestReport

            report = TestReport.from_item_and_call(item, call)
            report.outcome = "failed"
            report.longrepr = f"REPRO_REQUIRE_OPTIONAL=1 but an optional dependency is missing: {call.excinfo.value}"
            return report
    return None
