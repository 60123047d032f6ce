"""Our own sentences are not redacted as secrets; real secrets still are (issue 29, build point 1).

The demo printed its public key's path as ``<redacted:…>``: "its public key: PATH" reads like an
assignment to a key named ``key``. The CLI declares the values it made itself and knows to be public;
everything else passes the redactor as before, labels included.
"""

from __future__ import annotations

import io

import pytest

from auditor.cli import output

PUBLIC = ".repro/demo/keys/signing.pem.pub"
DEMO_LINE = f"making the demo's signing key .repro/demo/keys/signing.pem (its public key: {PUBLIC})"


@pytest.fixture()
def stream():
    output.reset()
    buffer = io.StringIO()
    yield buffer, output.RedactingStream(buffer)
    output.reset()


def _through(stream, *lines: str) -> list[str]:
    buffer, redacting = stream
    for line in lines:
        redacting.write(line + "\n")
    redacting.flush()
    return buffer.getvalue().splitlines()


def test_the_demo_public_key_path_prints_as_it_is(stream):
    output.declare_public(PUBLIC)
    assert _through(stream, DEMO_LINE) == [DEMO_LINE]


def test_a_marker_is_put_back_only_as_the_declared_value(stream):
    output.declare_public(PUBLIC)
    assert _through(stream, f"password: {PUBLIC}") == [f"password: {PUBLIC}"]  # the value is public, whatever its label


@pytest.mark.parametrize("line", [
    "password: hunter2-not-a-path",                 # a secret's label before another value
    f"api_key={PUBLIC}x",                           # a value that merely starts like the declared one
    "token: ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "secret_key: .repro/demo/keys/signing.pem",     # the private key's path is not declared
])
def test_anything_else_under_a_secret_label_is_still_redacted(stream, line):
    output.declare_public(PUBLIC)
    (printed,) = _through(stream, line)
    assert "<redacted:" in printed and printed != line


def test_a_value_holding_a_credential_shape_is_never_declared(stream):
    token_path = "/home/ghp_abcdefghijklmnopqrstuvwxyz0123456789/key.pub"
    output.declare_public(token_path)
    (printed,) = _through(stream, f"its public key: {token_path}")
    assert "ghp_abcdefghijklmnopqrstuvwxyz0123456789" not in printed


def test_json_and_errors_take_the_same_rule(stream, capsys):
    output.declare_public(PUBLIC)
    output.emit_json({"public key": PUBLIC, "password": "hunter2"})
    output.error(f"its public key: {PUBLIC}; api_key=hunter2")
    captured = capsys.readouterr()
    assert PUBLIC in captured.out and "hunter2" not in captured.out
    assert PUBLIC in captured.err and "hunter2" not in captured.err
