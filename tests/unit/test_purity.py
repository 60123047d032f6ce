"""The unit tier's guard (tests/unit/conftest.py) really refuses what a unit test must not do: each is tried here."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys

import pytest


@pytest.mark.parametrize("reach", [
    lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM),
    lambda: socket.create_connection(("127.0.0.1", 9)),
    lambda: subprocess.run([sys.executable, "-c", "pass"], check=False),
    lambda: sqlite3.connect(":memory:"),
    lambda: os.fork(),
], ids=["socket", "connection", "subprocess", "sqlite", "fork"])
def test_a_unit_test_that_reaches_for_a_real_part_fails_naming_it(reach):
    with pytest.raises(AssertionError, match="a unit test must not .*; move it to tests/integration"):  # ImpureUnitTest
        reach()
