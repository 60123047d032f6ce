"""The one redactor: the shapes issue 14 found leaking, what it must leave alone, the diff, logs, CLI streams."""

from __future__ import annotations

import io
import logging

import pytest

from auditor.errors import BadInput
from auditor.lineage.redact import (
    is_secret_key,
    redact_diff,
    redact_text,
    redacted_diff_lines,
    redacted_logger,
    restore_committed_lines,
)

S = "s3cr3t-Canary-value"

LEAKED_SHAPES = [
    f"{{'db_password': '{S}', 'lr': 0.1}}",
    f'{{"api_key": "{S}", "epochs": 2}}',
    f"KeyError('token={S}')",
    f"ValueError({{'secret': '{S}'}})",
    f"PGPASSWORD={S}",
    f"env: DB_PASS={S} MYSQL_PWD={S}",
    f"APP_PASS: {S}",
    f"redis://:{S}@cache:6379/0",
    f"postgres://app:{S}@db/train",
    f"jdbc:postgresql://h/db?user=u&password={S}",
    f"https://hooks.example/x?token={S}",
    f"https://h/o?X-Amz-Date=1&sig={S}&x=1",
    f"https://h/o?a=1&api_key={S}",
    f"Authorization: Bearer {S}",
    f"authorization=Basic {S}",
    f"python train.py --password {S} --lr 0.1",
    f"-----BEGIN RSA PRIVATE KEY-----\nMIIE{S}\nline2{S}\n-----END RSA PRIVATE KEY-----",
    "aws_secret_access_key = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "sk_live_abcdefghijklmnopqrstuvwx",
]


@pytest.mark.parametrize("text", LEAKED_SHAPES)
def test_every_shape_that_leaked_is_redacted(text):
    out = redact_text(text)
    assert S not in out and "wJalrXUtnFEMI" not in out and "ghp_abc" not in out and "sk_live_abc" not in out, out
    assert "<redacted:" in out


def test_a_private_key_block_goes_whole_and_what_follows_it_stays():
    out = redact_text(f"before\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn{S}\n-----END OPENSSH PRIVATE KEY-----\nafter")
    assert out.startswith("before\n<redacted:") and out.endswith(">\nafter") and "b3Blbn" not in out


def test_ordinary_settings_digests_and_paths_keep_their_values():
    text = ("max_tokens=512 tokenizer=bpe num_passes=3 sort_key=ts passes=2 pin_memory=True bypass_cache=1 "
            "sha256:" + "ab" * 32 + " blake3:" + "cd" * 32 + " weights_sha256=" + "0f" * 32 + " /home/u/data/train.npy "
            "https://git.example.com/team/model.git lr: 0.1 {'epochs': 3, 'hidden': 64}")
    assert redact_text(text) == text
    for name in ("max_tokens", "tokenizer", "num_passes", "sort_key", "passes", "pin_memory", "bypass", "compass_heading", "passthrough"):
        assert not is_secret_key(name), name
    for name in ("PGPASSWORD", "DB_PASS", "MYSQL_PWD", "APP_PASS", "PGPASSFILE", "hf_token", "apiKey", "client_secret", "sig"):
        assert is_secret_key(name), name


def test_a_long_record_without_secrets_is_left_as_it_was():
    import json

    text = json.dumps({"packages": [{"name": f"pkg{i}", "version": "1.0", "sha256": "ab" * 32} for i in range(3000)]}, indent=2)
    assert redact_text(text) == text  # speed is measured in bench/, not asserted here


DIFF = """diff --git a/.env b/.env
index 1111111111111111111111111111111111111111..2222222222222222222222222222222222222222 100644
--- a/.env
+++ b/.env
@@ -1 +1 @@
-DEBUG=0 PGPASSWORD=committed-secret
+DEBUG=1 PGPASSWORD=committed-secret
@@ -4,0 +5 @@ LOG_LEVEL=info
+NEW_API_TOKEN=new-secret
"""


def test_the_diff_keeps_no_secret_on_any_line_and_names_the_changed_ones():
    redacted, changed = redact_diff(DIFF)
    assert "committed-secret" not in redacted and "new-secret" not in redacted
    assert "LOG_LEVEL=info" not in redacted  # the committed line git quotes after a hunk header
    assert changed == 2
    assert redacted_diff_lines(redacted) == [".env:1", ".env:5"]


def test_removed_lines_come_back_from_the_committed_file_exactly():
    redacted, _ = redact_diff(DIFF)
    committed = "DEBUG=0 PGPASSWORD=committed-secret\nA=1\nB=2\nLOG_LEVEL=info\n"
    restored = restore_committed_lines(redacted, lambda path: committed if path == ".env" else None)
    assert "-DEBUG=0 PGPASSWORD=committed-secret\n" in restored
    assert "+DEBUG=1 PGPASSWORD=<redacted:" in restored  # an added line stays redacted


def test_a_private_key_added_in_the_diff_is_redacted_line_by_line():
    diff = ("diff --git a/k.pem b/k.pem\nnew file mode 100644\n--- /dev/null\n+++ b/k.pem\n@@ -0,0 +1,4 @@\n"
            f"+-----BEGIN RSA PRIVATE KEY-----\n+MIIE{S}\n+x{S}\n+-----END RSA PRIVATE KEY-----\n")
    redacted, changed = redact_diff(diff)
    assert S not in redacted and changed == 4 and redacted.count("\n") == diff.count("\n")


def test_library_log_records_are_redacted_before_any_handler_sees_them():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = redacted_logger("auditor.test_redact")
    logger.addHandler(handler)
    try:
        logger.warning("connecting to %s", f"postgres://u:{S}@db/x")
        try:
            raise ValueError({"secret": S})
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    assert S not in stream.getvalue() and "postgres://u:<redacted:" in stream.getvalue()


def test_every_library_logger_carries_the_filter():
    import auditor.airflow  # noqa: F401
    import auditor.sdk  # noqa: F401
    import auditor.settings  # noqa: F401
    from auditor.lineage.redact import RedactingFilter

    names = [n for n in logging.root.manager.loggerDict if n == "auditor" or n.startswith("auditor.")]
    redacted_logger("auditor")
    for name in names:
        assert any(isinstance(f, RedactingFilter) for f in logging.getLogger(name).filters), name


def test_the_cli_streams_redact_a_secret_split_across_writes():
    from auditor.cli.output import RedactingStream

    inner = io.StringIO()
    stream = RedactingStream(inner)
    stream.write("url: redis://:")
    stream.write(f"{S}@cache\npartial {S[:4]}")
    stream.flush()
    assert S not in inner.getvalue() and inner.getvalue().endswith(f"partial {S[:4]}")


@pytest.mark.parametrize("name", ["a=b", "raw/train", "my data", "", "x@y", "train:1", "-lead", "n" * 65])
def test_a_data_ref_name_that_cannot_round_trip_is_refused_naming_it(name):
    from auditor.contract import check_data_name, data_env_var

    with pytest.raises(BadInput) as err:
        check_data_name(name)
    assert repr(name) in str(err.value) and "letters, digits" in str(err.value)
    with pytest.raises(BadInput):
        data_env_var(name)


def test_track_refuses_a_data_ref_name_with_an_equals_sign_and_takes_the_allowed_form():
    from auditor.sdk.capture import _data_refs

    with pytest.raises(BadInput, match="'train=v2'"):
        _data_refs({"train=v2": "store@blake3:" + "0" * 64}, {}, False)
    from auditor.contract import check_data_name, data_env_var

    assert [check_data_name(n) for n in ("train", "test_v2", "train.v2", "raw-2")] == ["train", "test_v2", "train.v2", "raw-2"]
    assert data_env_var("train.v2") == "REPRO_DATA_TRAIN_V2"


# -- issue 27, point 1: provider shapes, prose, JSON kept valid, our own words kept ----------------------
import json as _json  # noqa: E402

import pytest as _pytest  # noqa: E402

from auditor.lineage.redact import redact_text as _r  # noqa: E402
from auditor.lineage.redact_code import redact_source  # noqa: E402

_PROVIDER = {
    "databricks": "dapi" + "0123456789abcdef" * 2,
    "databricks with suffix": "dapi" + "0123456789abcdef" * 2 + "-3",
    "google": "AIza" + "SyA1234567890abcdefghijklmnopqrstuv",
    "azure devops (classic)": "abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst",
    "azure devops (new)": "A1b2" * 19 + "AZDO" + "x9Y8",
    "hugging face": "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz12",
    "openai": "sk-proj-" + "Ab3" * 10,
}


@_pytest.mark.parametrize("name", sorted(_PROVIDER))
@_pytest.mark.parametrize("place", ["alone {}", "branch fix/my_{}", "token_{} in a name", "x={}", "https://{}@github.com/o/r.git"])
def test_provider_token_shapes_are_redacted_wherever_they_stand(name, place):
    token = _PROVIDER[name]
    assert token not in _r(place.format(token))


def test_digests_and_ordinary_words_are_not_taken_for_tokens():
    for text in ("sha256:" + "ab" * 32, "blake3:" + "c0" * 32, "a" * 52, "commit 0123456789abcdef0123456789abcdef01234567",
                 "the token is missing", "the password is not set", "PEM public key: every entry's attestation",
                 "public half, for evidence verify --public-key: /tmp/keys/audit.pem.pub", "signing key: ~/keys/audit.pem",
                 "ssh://git@github.com/o/r.git", "key id: 3f2a9c"):
        assert _r(text) == text, text


@_pytest.mark.parametrize("text", ["the password is hunter2.", "Our API key for prod was: Xk29fQ", "the token is 'a9F3k2'",
                                   "db password was set to hunter2!", "the secret is hunter2"])
def test_plain_prose_leaks_are_caught(text):
    assert "hunter2" not in _r(text) and "Xk29fQ" not in _r(text) and "a9F3k2" not in _r(text)


_DOCS = [
    {"password": {"value": "hunter2", "n": 12345}, "lr": 0.1},
    {"api_key": ["hunter2", 7, None, True], "token": 12345, "db": {"PGPASSWORD": None}},
    {"log_tail": 'password="hunter2" and \\"token\\": \\"hunter2\\" then PGPASSWORD=hunter2\\', "ok": "yes"},
    {"https://user:hunter2@pypi.internal/simple": 1, "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz12": "ci"},
    [{"secret": {"nested": [{"deep": "hunter2"}]}}, "the password is hunter2"],
    {"error": "KeyError('token=hunter2')", "note": "sk-" + "a" * 30 + '\\"'},
]


@_pytest.mark.parametrize("doc", _DOCS, ids=range(len(_DOCS)))
@_pytest.mark.parametrize("indent", [None, 2])
def test_redaction_keeps_json_valid_whole_and_line_by_line(doc, indent):
    """The CLI redacts ``--json`` whole, then its stream redacts it again line by line: both must parse, no secret left."""
    text = _json.dumps(doc, indent=indent, sort_keys=True)
    once = _r(text)
    lines = "\n".join(_r(line) for line in once.split("\n"))
    for out in (once, lines):
        parsed = _json.loads(out)
        assert "hunter2" not in out and "hunter2" not in _json.dumps(parsed)
    assert lines == once  # idempotent


def test_a_copied_script_keeps_running_without_its_secrets():
    source = (
        'import os\nDB_PASSWORD = "hunter2"  # the db password is hunter2\n'
        'API_KEY: str = "hun" \\\n    "ter2"\n'
        'token = os.environ.get("HF_TOKEN", "hunter2")\n'
        'cfg = {"password": 1234, "lr": 0.1, "url": "https://u:hunter2@h/x"}\n'
        'print("the password is hunter2")\n'
        'def build_model(n=3):\n    return {"n": n, "lr": cfg["lr"]}\n'
    )
    out = redact_source(source)
    assert "hunter2" not in out and "1234" not in out
    namespace: dict = {}
    exec(compile(out, "train.py", "exec"), namespace)  # noqa: S102 - our own test source
    assert namespace["build_model"](4) == {"n": 4, "lr": 0.1}
    assert '"HF_TOKEN"' in out  # the names of secrets stay: only values go
