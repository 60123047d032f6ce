"""The auditor's own environment against the committed lock (issue 38): pins read, digests comparable."""

from __future__ import annotations

from auditor.report.itself import describe_itself, environment_digest, lock_comparison, lock_pins

LOCK = """# comment
apache-airflow==3.3.2 \\
    --hash=sha256:aaaa
torch==2.13.0+cpu \\
    --hash=sha256:bbbb
    # via x
Typing_Extensions==4.15.0 ; python_version < '3.12'
"""


def test_the_lock_pins_are_read_with_normal_names():
    assert lock_pins(LOCK) == {"apache-airflow": "3.3.2", "torch": "2.13.0+cpu", "typing-extensions": "4.15.0"}


def test_an_environment_that_is_the_lock_has_the_locks_digest_and_no_difference():
    pins = lock_pins(LOCK)
    installed = {**pins, "repro-audit": "0.1.0", "pip": "23.2.1"}
    assert environment_digest(installed) == environment_digest(pins)
    assert lock_comparison(installed, pins) == []


def test_a_moved_missing_or_extra_package_is_named():
    pins = lock_pins(LOCK)
    installed = {"apache-airflow": "3.2.2", "torch": "2.13.0+cpu", "fastapi": "0.165.0"}
    assert lock_comparison(installed, pins) == ["apache-airflow 3.2.2 (lock 3.3.2)", "typing-extensions missing (lock 4.15.0)",
                                                "fastapi 0.165.0 (not in the lock)"]
    assert environment_digest(installed) != environment_digest(pins)


def test_describe_says_whether_it_matches():
    record = {"version": "0.1.0", "environment_digest": "sha256:ab", "lock": {"matches": True}}
    assert describe_itself(record) == "repro-audit 0.1.0, environment sha256:ab (matches the committed lock)"
    assert "no committed lock" in describe_itself({**record, "lock": None})
    assert "not recorded" in describe_itself(None)
