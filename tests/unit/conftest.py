"""The unit tier is pure: a test here that starts a subprocess, opens a socket or a database, forks, or
touches Docker fails, naming what it did and where it belongs (tests/integration). `make test-fast` runs
this tier alone, in under 90 s on 2 cores; everything that needs a real part lives one folder over.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess

import pytest

# croniter starts a `file` subprocess when first imported (7.x): import it here, before the guard, so a unit
# test that checks a cron setting does not trip it
try:
    import croniter  # noqa: F401
except ImportError:  # the core install has no croniter; its tests skip
    pass


class ImpureUnitTest(AssertionError):
    """A unit test reached for a real part."""


def _refuse(what: str):
    def refused(*_args, **_kwargs):
        raise ImpureUnitTest(f"a unit test must not {what}; move it to tests/integration (see tests/unit/conftest.py)")

    return refused


@pytest.fixture(autouse=True)
def pure_unit_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse subprocesses (and so Docker's CLI and git), forks, sockets (and so Docker's API, MLflow servers,
    S3) and SQLite (and so MLflow's SQLite store) for the duration of each unit test."""
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("start a subprocess"))
    monkeypatch.setattr(os, "fork", _refuse("fork"))
    monkeypatch.setattr(os, "posix_spawn", _refuse("start a subprocess"), raising=False)
    monkeypatch.setattr(socket.socket, "__init__", _refuse("open a socket"))
    monkeypatch.setattr(socket, "create_connection", _refuse("open a socket"))
    monkeypatch.setattr(sqlite3, "connect", _refuse("open a database"))
