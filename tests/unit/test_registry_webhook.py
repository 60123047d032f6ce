"""Issue 43, build 2: a registry webhook starts something only when it is provably MLflow's, fresh and new.

Signed here with ``auditor.registry.webhook.sign``; that it matches what MLflow really sends is checked with a real
``mlflow server`` delivering to the receiver (``tests/integration/test_registry_webhook_delivery.py``: importing
MLflow's delivery module starts a subprocess, which a unit test may not)."""

from __future__ import annotations

import json

import pytest

from auditor.registry.webhook import EVENTS, ReplayGuard, WebhookRefused, sign, verify

SECRET = "whsec-test-0123456789"
NOW = 1_800_000_000


def _delivery(event="model_version.created", data=None, *, delivery="d-1", stamp=NOW, secret=SECRET, signer=None):
    entity, action = event.split(".")
    body = json.dumps({"entity": entity, "action": action, "timestamp": "2027-01-15T08:00:00+00:00",
                       "data": data if data is not None else {"name": "credit-scorer", "version": "7", "source": "models:/m-1"}})
    signature = (signer or sign)(secret, delivery, str(stamp), body)
    return {"X-MLflow-Delivery-Id": delivery, "X-MLflow-Timestamp": str(stamp), "X-MLflow-Signature": signature,
            "Content-Type": "application/json"}, body.encode()


def test_a_signed_delivery_verifies_and_names_the_version():
    headers, body = _delivery()
    event = verify(headers, body, secret=SECRET, now=NOW + 3, guard=ReplayGuard())
    assert event is not None and event.model_uri == "models:/credit-scorer/7" and event.alias is None
    assert event.extra()["model_uri"] == "models:/credit-scorer/7"


def test_an_alias_event_names_the_alias_and_lower_case_headers_are_headers():
    headers, body = _delivery("model_version_alias.created", {"name": "credit-scorer", "alias": "champion", "version": "7"})
    event = verify({k.lower(): v for k, v in headers.items()}, body, secret=SECRET, now=NOW, guard=ReplayGuard())
    assert event is not None and (event.event, event.alias, event.version) == (EVENTS[1], "champion", "7")


@pytest.mark.parametrize(("tamper", "status", "said"), [
    (lambda h, b: ({k: v for k, v in h.items() if k != "X-MLflow-Signature"}, b), 401, "not signed"),
    (lambda h, b: ({**h, "X-MLflow-Signature": "v1," + "A" * 44}, b), 401, "does not verify"),
    (lambda h, b: (h, b.replace(b'"7"', b'"8"')), 401, "does not verify"),  # the body edited after signing
    (lambda h, b: ({**h, "X-MLflow-Timestamp": str(NOW + 1)}, b), 401, "does not verify"),  # a fresh stamp, old signature
    (lambda h, b: ({k: v for k, v in h.items() if k != "X-MLflow-Timestamp"}, b), 401, "integer X-MLflow-Timestamp"),
])
def test_an_unsigned_or_forged_delivery_is_refused(tamper, status, said):
    headers, body = tamper(*_delivery())
    with pytest.raises(WebhookRefused) as refused:
        verify(headers, body, secret=SECRET, now=NOW, guard=ReplayGuard())
    assert refused.value.status == status and said in str(refused.value)


def test_a_replayed_delivery_or_a_stale_timestamp_is_refused():
    guard = ReplayGuard()
    headers, body = _delivery()
    assert verify(headers, body, secret=SECRET, now=NOW, guard=guard) is not None
    with pytest.raises(WebhookRefused) as again:
        verify(headers, body, secret=SECRET, now=NOW + 10, guard=guard)
    assert again.value.status == 409 and "already received" in str(again.value)
    old_headers, old_body = _delivery(delivery="d-2", stamp=NOW - 301)
    with pytest.raises(WebhookRefused) as stale:
        verify(old_headers, old_body, secret=SECRET, now=NOW, guard=guard)
    assert stale.value.status == 409 and "outside ±300 s" in str(stale.value)


def test_no_secret_refuses_everything_and_other_events_start_nothing():
    headers, body = _delivery()
    with pytest.raises(WebhookRefused, match="no webhook secret"):
        verify(headers, body, secret=None, now=NOW, guard=ReplayGuard())
    other_headers, other_body = _delivery("registered_model.created", {"name": "m"})
    assert verify(other_headers, other_body, secret=SECRET, now=NOW, guard=ReplayGuard()) is None


def test_a_signed_payload_naming_a_model_the_audit_would_refuse_is_refused():
    headers, body = _delivery(data={"name": "credit\u202escorer", "version": "1"})
    with pytest.raises(WebhookRefused) as refused:
        verify(headers, body, secret=SECRET, now=NOW, guard=ReplayGuard())
    assert refused.value.status == 400 and "U+202E" in str(refused.value)

