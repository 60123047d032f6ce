"""Shared test set-up. Fixture modules live in tests/fixtures/, one per real part."""

from __future__ import annotations

import importlib.util

_FIXTURE_MODULES = [
    "tests.fixtures.common",
    "tests.fixtures.s3",
    "tests.fixtures.gitrepo",
    "tests.fixtures.mlflow",
    "tests.fixtures.docker",
    "tests.fixtures.browser",
    "tests.fixtures.reference",
]

pytest_plugins = [m for m in _FIXTURE_MODULES if importlib.util.find_spec(m) is not None]
