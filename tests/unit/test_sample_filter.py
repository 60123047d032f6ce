"""``Session.sample``'s model filter and production aliases, over the real in-memory registry."""

from __future__ import annotations

from auditor.registry.memory import MemoryRegistry
from auditor.settings import Settings
from auditor.steps import Session
from tests.fixtures.records import complete_record


def test_the_models_pattern_matches_a_name_or_a_name_and_version(tmp_path):
    registry = MemoryRegistry.named(f"memory://sample-filter-{tmp_path.name}")
    try:
        for name in ("credit-a", "credit-a", "fraud"):
            registry.register_record(name, complete_record(), weights=b"w")
        settings = Settings.from_env({"REPRO_HOME": str(tmp_path), "MLFLOW_TRACKING_URI": registry.uri, "REPRO_NIGHTLY_MAX_MODELS": "10"})
        picked = lambda models: sorted(p["ref"] for p in Session(settings).sample("2026-05-01", models=models)["picks"])  # noqa: E731
        assert picked("credit-*") == ["models:/credit-a/1", "models:/credit-a/2"]
        assert picked("credit-a/2") == ["models:/credit-a/2"]
        assert picked(None) == ["models:/credit-a/1", "models:/credit-a/2", "models:/fraud/1"]
        assert picked("nothing-*") == []
    finally:
        MemoryRegistry.forget(registry.uri)


def test_the_production_aliases_setting_reaches_the_sample(tmp_path):
    registry = MemoryRegistry.named(f"memory://sample-aliases-{tmp_path.name}")
    try:
        registry.register_record("m", complete_record(), weights=b"w", aliases=("blue",))
        env = {"REPRO_HOME": str(tmp_path), "MLFLOW_TRACKING_URI": registry.uri}
        reason = lambda extra: Session(Settings.from_env({**env, **extra})).sample("2026-05-01")["picks"][0]["reason"]  # noqa: E731
        assert reason({}) == "never audited"
        assert reason({"REPRO_PRODUCTION_ALIASES": "blue,green"}) == "serving under alias 'blue'"
    finally:
        MemoryRegistry.forget(registry.uri)


def test_a_retired_version_is_never_sampled_and_the_coverage_rows_say_retired(tmp_path):
    import datetime as dt

    registry = MemoryRegistry.named(f"memory://sample-retired-{tmp_path.name}")
    try:
        registry.register_record("churn", complete_record(), weights=b"w", aliases=("champion",), tags={"repro.retired": "true"})
        registry.register_record("churn", complete_record(), weights=b"w")
        session = Session(Settings.from_env({"REPRO_HOME": str(tmp_path), "MLFLOW_TRACKING_URI": registry.uri,
                                             "REPRO_REPORTS": str(tmp_path / "reports")}))
        sample = session.sample("2026-05-01")
        assert [p["ref"] for p in sample["picks"]] == ["models:/churn/2"]
        assert {"ref": "models:/churn/1", "reason": "retired by its owner (tag repro.retired)"} in sample["skipped"]
        rows, _ = session.coverage(now=dt.datetime(2026, 5, 1, tzinfo=dt.UTC))
        assert {(r["version"], r["status"]) for r in rows} == {("1", "retired"), ("2", "never audited")}
        assert rows[-1]["status"] == "retired"  # listed last: nothing to do about it
    finally:
        MemoryRegistry.forget(registry.uri)
