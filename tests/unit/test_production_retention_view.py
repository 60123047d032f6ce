"""The pure parts of issue 32's checks: how the coverage page shows them, what is red, how names are read."""

from __future__ import annotations

import datetime as dt

from auditor.report.index import render_coverage
from auditor.settings import Settings
from auditor.steps.production import DIFFERS, _deployed_for
from auditor.steps.retention import AT_RISK, KEPT, LOST, _horizon_status, _registry_url, _untagged, red

ROW = {"model": "credit", "version": "3", "ref": "models:/credit/3", "aliases": ["champion"], "audit_id": "a-1",
       "audited_at": "2026-07-01T00:00:00Z", "audited": "sha256:aa", "status": DIFFERS,
       "detail": "registry: it hashes to sha256:bb, the audited artifact to sha256:aa",
       "copies": [{"where": "registry", "uri": "models:/credit/3", "audited": "sha256:aa", "found": "sha256:bb",
                   "status": DIFFERS, "detail": "it hashes to sha256:bb"}]}


def _retention(*items, production=True):
    return {"checked_at": "2026-12-01T00:00:00Z", "years": 10, "horizon": "2036-11-29T00:00:00Z",
            "versions": [{"model": "credit", "version": "3", "ref": "models:/credit/3", "aliases": ["champion"],
                          "production": production, "audited": True, "status": items[0]["status"], "items": list(items)}]}


def _item(status, until=None, what="data.train (delta)"):
    return {"input": what, "where": "data.train blake3:00", "status": status, "until": until, "detail": "why <b>", "fix": "how"}


def test_the_coverage_page_shows_a_production_mismatch_and_each_retention_item_with_its_date():
    retention = _retention(_item(LOST, "2026-06-08T00:00:00Z"), _item(KEPT, what="data.holdout (iceberg)"))
    page = render_coverage([], overdue_days=30, as_of="now", registry="sqlite:///x",
                           checks={"production": [ROW], "retention": retention})
    assert DIFFERS in page and "registry: it hashes to sha256:bb" in page
    assert ">lost<" in page and "2026-06-08T00:00:00Z" in page and ">kept<" in page
    assert "why &lt;b&gt;" in page  # escaped, never markup
    assert "REPRO_DEPLOYED_ARTIFACTS" in page and "REPRO_RETENTION_YEARS" in page


def test_a_check_that_could_not_run_is_said_on_the_page_and_no_check_leaves_the_page_as_it_was():
    page = render_coverage([], overdue_days=30, as_of="now", registry="r",
                           checks={"production": {"error": "the production check could not run: boom"},
                                   "retention": {"error": "the retention check could not run: bang"}})
    assert "could not run: boom" in page and "could not run: bang" in page
    plain = render_coverage([], overdue_days=30, as_of="now", registry="r")
    assert "Production equals documented" not in plain and "Retention" not in plain


def test_only_a_lost_input_of_a_production_version_is_red():
    assert red(_retention(_item(LOST), _item(AT_RISK))["versions"]) == ["models:/credit/3: data.train (delta) (data.train blake3:00)"]
    assert red(_retention(_item(LOST), production=False)["versions"]) == []
    assert red(_retention(_item(AT_RISK))["versions"]) == []


def test_a_date_before_the_horizon_or_no_date_at_all_is_at_risk():
    horizon = dt.datetime(2036, 1, 1, tzinfo=dt.UTC)
    assert _horizon_status(None, horizon) == AT_RISK
    assert _horizon_status(horizon - dt.timedelta(days=1), horizon) == AT_RISK
    assert _horizon_status(horizon, horizon) == KEPT


def test_image_references_are_read_as_the_registry_api_needs_them():
    assert _registry_url("127.0.0.1:5000/team/trainer@sha256:ab") == ("http://127.0.0.1:5000", "team/trainer", "sha256:ab")
    assert _registry_url("registry.example/trainer:v1@sha256:ab") == ("https://registry.example", "trainer", "sha256:ab")
    assert _registry_url("trainer@sha256:ab") is None  # no registry host: nothing this check can ask
    assert _untagged("localhost:5000/trainer:v1") == "localhost:5000/trainer" and _untagged("trainer:v1") == "trainer"


def test_deployed_copies_are_named_by_alias_and_several_copies_split_on_a_bar():
    class Info:
        name, aliases = "credit", ("Champion",)

    settings = Settings.from_env({"REPRO_DEPLOYED_ARTIFACTS": "credit@champion=s3://serving/m.bin|/srv/m.bin,credit@shadow=/x,other@champion=/y"})
    assert _deployed_for(settings, Info()) == [("deployed credit@champion", "s3://serving/m.bin"), ("deployed credit@champion", "/srv/m.bin")]
