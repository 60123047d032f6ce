"""Issue 42, point 8: no leak in keys or encodings, and nothing of ours mangled on the way.

A secret used as a mapping key (``hmac_keys: {<secret>: v1}``, an opaque token as a key), base64 values
(a whole Docker config encoded under an innocuous key, nested encodings) and Docker auth configs under any
key are redacted; digests, commits, run and snapshot ids, paths, identifiers and base64 without a secret
in it are left exactly as they were.
"""

from __future__ import annotations

import base64
import json

import pytest

from auditor.lineage.redact import is_secret_key, marker, redact_mapping, redact_text, redact_value
from auditor.lineage.redact_encoded import decode_base64, is_docker_auth_config
from auditor.lineage.redact_keys import is_opaque_token, is_plain_name, names_secret_collection

S = "CANARY-9f3a2b1c0d4e5f6a7b8c"  # the shape of the canary suites' secrets
TOKEN_KEY = "Qx7vR2mK9pL4tZ8wN3bF6hJ1sD5gY0cE"  # secrets.token_urlsafe-like


def b64(text: str, *, urlsafe: bool = False) -> str:
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(text.encode()).decode()


AUTH = b64(f"robot:{S}")
DOCKER = json.dumps({"auths": {"reg.example": {"auth": AUTH}}})
DOCKER_B64 = b64(DOCKER)


def _leaks(out) -> bool:
    text = json.dumps(out) if not isinstance(out, str) else out
    return any(secret in text for secret in (S, AUTH, DOCKER_B64, TOKEN_KEY))


# -- (a) keys ---------------------------------------------------------------------------------------
def test_a_secret_used_as_a_key_of_hmac_keys_is_redacted_and_its_plain_names_kept():
    config = {"seed": 7, "hmac_keys": {S: "v1", "primary": "x" * 12, "2024-01": "y" * 12}, "lr": 0.1}
    out = redact_value("", config)
    assert not _leaks(out) and "x" * 12 not in json.dumps(out)
    assert set(out) == {"seed", "hmac_keys", "lr"} and out["seed"] == 7 and out["lr"] == 0.1
    keys = set(out["hmac_keys"])
    assert {"primary", "2024-01"} < keys and marker(S) in keys and len(keys) == 3


@pytest.mark.parametrize("collection", ["hmac_keys", "api_keys", "signing_keys", "HMAC_KEYS", "secrets", "passwords",
                                        "jwt_secrets", "auth.hmac_keys"])
def test_every_collection_of_secrets_has_its_secret_keys_redacted(collection):
    assert names_secret_collection(collection.rsplit(".", 1)[-1])
    out = redact_value("", {collection: {S: "v1"}})
    assert not _leaks(out), out


@pytest.mark.parametrize("name", ["sort_keys", "primary_keys", "keys", "special_tokens", "added_tokens", "max_tokens", "num_keys"])
def test_a_mapping_that_is_not_a_collection_of_secrets_keeps_its_keys(name):
    assert not names_secret_collection(name)
    doc = {name: {"<pad>": 0, "user_id": 1, "Sequence2Sequence": 2}}
    assert redact_value("", doc) == doc


@pytest.mark.parametrize("text", [
    json.dumps({"hmac_keys": {S: "v1"}}),
    json.dumps({"hmac_keys": {S: "v1"}}, indent=2),
    repr({"hmac_keys": {S: "v1"}, "lr": 0.1}),
    f"hmac_keys.{S}",  # a flattened config key: a config's sources, a param name
    f"config key auth.hmac_keys.{S} set from file",
])
def test_a_secret_key_is_redacted_in_json_dict_text_and_dotted_paths(text):
    out = redact_text(text)
    assert S not in out and "<redacted:" in out
    assert redact_text(out) == out  # idempotent


def test_an_opaque_token_as_a_key_is_redacted_under_any_key():
    out = redact_value("", {"webhooks": {TOKEN_KEY: "deploy"}, "mirrors": {"AbCdEfGhIj" + "k1m2N3p4Q5r6S7t8": 1}})
    assert TOKEN_KEY not in json.dumps(out) and "k1m2N3p4Q5r6S7t8" not in json.dumps(out)
    assert out["webhooks"] == {marker(TOKEN_KEY): "deploy"}


def test_two_keys_that_become_one_marker_stay_two():
    out = redact_mapping({marker(S): 1, S: 2, "lr": 0.1})
    assert len(out) == 3 and out[marker(S)] == 1 and 2 in out.values() and S not in json.dumps(out)
    assert redact_mapping(out) == out  # a second pass keeps the told-apart key as it is


OURS = [
    "sha256:" + "ab" * 32, "blake3:" + "c0" * 32, "0123456789abcdef0123456789abcdef01234567",  # digests, a commit
    "9f3a2b1c0d4e5f6a7b8c9d0e1f2a3b4c", "m-9f3a2b1c0d4e5f6a7b8c9d0e1f2a3b4c",  # an MLflow run id, a LoggedModel id
    "123e4567-e89b-12d3-a456-426614174000", "location-" + "ab" * 16,  # a uuid, an anchor folder
    "/home/User/Projects/TrainSet2024/shard-00001.parquet", "s3://Bucket/Prefix/Part0001.parquet",
    "REPRO_DATA_TRAIN", "ResNet50_Weights", "layer4.1.conv2.weight", "TFBertForSequenceClassification",
    "GPT2LMHeadModel", "cudaD3D10ResourceGetMappedPitch", "Conv2dBiasFollowedByBatchNorm2d", "adopt-rebuild-2026-01-01",
    "ReLUActivationLayer", "TrainingConfigV2Settings", "F1_macro_Class10_k5", "val_AUC_fold3_seed42", "AbstractBaseTrainerFactory", "DataLoaderWorkerInit",
    "canaries2_v1_20260101_0123456789ab", "models:/canaries/1", b64("just some ordinary words here, nothing secret"), b64("an ordinary note", urlsafe=True),
]
BINARY = base64.b64encode(bytes(range(48))).decode()  # a signature, a key's DER: as a value, kept; as a key, a token


@pytest.mark.parametrize("text", OURS)
def test_our_own_ids_paths_names_and_plain_base64_are_not_mangled(text):
    assert redact_text(text) == text
    doc = {text: text, "nested": {text: [text]}}
    assert redact_value("", doc) == doc
    assert not is_opaque_token(text)


def test_binary_base64_is_kept_as_a_value():
    assert redact_text(BINARY) == BINARY and redact_value("", {"der": [BINARY], "n": 1})["der"] == [BINARY]


@pytest.mark.parametrize("text", ["hmac_keys.primary", "see api_keys.json", "secrets.token_urlsafe(32)", "secrets.compare_digest(a, b)", "passwords.txt"])
def test_a_dotted_path_into_a_collection_keeps_a_plain_name(text):
    assert redact_text(text) == text


def test_random_keys_are_opaque_and_identifiers_are_not():
    for token in (TOKEN_KEY, "kjasBS523KdkAILD2k78NdcJSk2k3KHG6", "Iw2IAN9XUsQeYUrkMGP3kP59ugFDkfHg"):
        assert is_opaque_token(token), token
    for name in ("v1", "primary", "2024-01-15", "key_2", "prod-eu"):
        assert is_plain_name(name)
    assert not is_plain_name(S) and not is_plain_name(TOKEN_KEY)
    for name in ("hmac_key", "HMAC_KEYS", "api_keys", "jwt_secret_key"):
        assert is_secret_key(name), name
    for name in ("sort_keys", "primary_key", "num_keys", "partition_keys"):
        assert not is_secret_key(name), name


# -- (b) base64 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    DOCKER_B64, b64(DOCKER, urlsafe=True), DOCKER_B64.rstrip("="),
    b64(DOCKER_B64), b64(b64(DOCKER_B64)),  # nested: three layers of base64 around the config
    f"REGISTRY_CONFIG={DOCKER_B64}", f"export BUILD_CFG='{DOCKER_B64}'", f"loaded {DOCKER_B64} from disk",
    AUTH, b64(f"api_key: {S}"), b64(f"postgres://app:{S}@db/train"),
])
def test_a_base64_value_holding_a_secret_is_redacted_whole(text):
    out = redact_text(text)
    assert not _leaks(out) and "<redacted:" in out, out
    assert redact_text(out) == out


def test_a_base64_docker_config_under_an_innocuous_key_leaves_no_trace_in_a_record():
    config = {"registry": DOCKER_B64, "builder": {"cache": b64(DOCKER_B64)}, "epochs": 2, "note": b64("hello, plain text")}
    out = redact_value("", config)
    assert not _leaks(out)
    assert out["epochs"] == 2 and out["note"] == config["note"]
    assert not _leaks(redact_text(json.dumps(config))) and json.loads(redact_text(json.dumps(config)))["epochs"] == 2


def test_decoding_takes_text_only():
    assert decode_base64(DOCKER_B64) == DOCKER
    assert decode_base64("ab" * 32) is None  # a hex digest is never tried
    assert decode_base64(base64.b64encode(bytes(range(30))).decode()) is None  # binary
    assert decode_base64("ReLUActivationLayer") is None  # an identifier: not base64 of text


# -- (c) Docker auth configs -----------------------------------------------------------------------
def test_a_docker_auth_config_is_a_secret_whatever_key_holds_it():
    config = {"auths": {"reg.example": {"auth": AUTH, "email": "ci@example.com"},
                        "ghcr.io": {"username": "robot", "password": S}, "quay.io": {"identitytoken": S}}}
    assert is_docker_auth_config(config)
    out = redact_value("", {"build": {"registry_settings": config}})
    assert not _leaks(out) and "ci@example.com" not in json.dumps(out)
    assert set(out["build"]["registry_settings"]["auths"]) == {"reg.example", "ghcr.io", "quay.io"}  # names kept
    text = redact_text(json.dumps({"settings": config}))
    assert not _leaks(text) and json.loads(text)["settings"]["auths"]["ghcr.io"]["username"] != "robot"
    assert not is_docker_auth_config({"auths": {"reg.example": {}}, "credsStore": "desktop"})  # no credential in it


def test_a_user_password_pair_decoded_from_an_auth_field_is_a_secret():
    assert not _leaks(redact_text(json.dumps({"auth": AUTH})))
    assert not _leaks(redact_text(f'{{"registry": {{"login": "{AUTH}"}}}}'))
    assert not _leaks(redact_text(AUTH))
    assert redact_text(b64("https://example.com/docs")) == b64("https://example.com/docs")  # a URL is not user:password


# -- a config printed as YAML (OmegaConf.to_yaml, yaml.dump): the lines of a block under a secret's key -------------
YAML = f"""seed: 7
hmac_keys:
  {S}: v1
  primary: {TOKEN_KEY}  # the current one
credentials:
  user: app
  nested:
    value: {S}x
passwords:
- {S}y
registry: {DOCKER_B64}
model:
  layers: 3
  tokenizer: bpe
lr: 0.1
"""


def test_a_yaml_block_under_a_secret_key_loses_its_secrets_and_keeps_the_rest():
    out = redact_text(YAML)
    assert not _leaks(out) and "app" not in out, out
    for kept in ("seed: 7", "  primary: <redacted:", "# the current one", "model:\n  layers: 3\n  tokenizer: bpe\nlr: 0.1"):
        assert kept in out, kept
    assert out.count("\n") == YAML.count("\n") and redact_text(out) == out


def test_a_base64_value_at_the_end_of_a_path_or_a_name_is_found():
    for head, encoded, tail in (("https://files.example/cfg/", DOCKER_B64, ""), ("cfg_", b64(DOCKER, urlsafe=True), ""),
                                ("x-", DOCKER_B64, " tail")):
        out = redact_text(head + encoded + tail)
        assert out == head + marker(encoded) + tail


@pytest.mark.parametrize("indent", [None, 2])
def test_json_stays_valid_and_redaction_idempotent_whole_and_line_by_line(indent):
    """The CLI redacts ``--json`` whole, then its stream again line by line: both parse, no secret, nothing changes twice."""
    doc = {"hmac_keys": {S: "v1", "primary": "p"}, "webhooks": {TOKEN_KEY: 1}, "registry": DOCKER_B64,
           "build": {"auths": {"r.example": {"auth": AUTH}}}, "runs": {"9f3a2b1c0d4e5f6a7b8c9d0e1f2a3b4c": "sha256:" + "ab" * 32}}
    text = json.dumps(doc, indent=indent)
    once = redact_text(text)
    lines = "\n".join(redact_text(line) for line in once.split("\n"))
    for out in (once, lines):
        parsed = json.loads(out)
        assert not _leaks(out) and parsed["runs"] == doc["runs"] and "primary" in parsed["hmac_keys"]
    assert lines == once
