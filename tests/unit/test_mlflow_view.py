"""The block an audit writes atop a version's description, and the audit run's own description (issue 40, build 7).

Pure: the splice keeps what a person wrote, replaces only our block, writes nothing twice; links carry no credentials
and stay markdown links whatever the names hold. The real MLflow round trip is tests/integration/test_mlflow_verdict_description.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from auditor.steps.mlflow_view import (
    describe_version,
    public_url,
    run_note,
    ui_run_route,
    ui_version_route,
    version_block,
    with_block,
)
from auditor.tags import DESCRIPTION_END, DESCRIPTION_START, MAX_VERSION_DESCRIPTION

USER = "Champion candidate for Q3.\n\n* owner: risk team\n* card: https://wiki.example.org/credit\n"
BLOCK = "**OUT_OF_TOLERANCE** · 2026-03-02 · [report](#/experiments/4/runs/abc/artifacts/r.html)"


def test_the_block_opens_the_description_and_what_the_user_wrote_follows_unchanged():
    text = with_block(USER, BLOCK)
    assert text == f"{DESCRIPTION_START}\n{BLOCK}\n{DESCRIPTION_END}\n\n{USER}"
    assert with_block("", BLOCK) == with_block(None, BLOCK) == f"{DESCRIPTION_START}\n{BLOCK}\n{DESCRIPTION_END}\n"


def test_a_later_audit_replaces_our_block_only_and_a_repeat_changes_nothing():
    first = with_block(USER, BLOCK)
    assert with_block(first, BLOCK) == first  # exactly once: publishing again writes the same text
    edited = first + "\nAdded after the first audit.\n"
    later = with_block(edited, "**REPRODUCED_BITWISE** · 2026-03-09 · [report](x)")
    assert later.startswith(f"{DESCRIPTION_START}\n**REPRODUCED_BITWISE** · 2026-03-09")
    assert later.count(DESCRIPTION_START) == 1 and "OUT_OF_TOLERANCE" not in later
    assert later.endswith(USER + "\nAdded after the first audit.\n")


def test_blocks_a_race_left_or_a_person_moved_down_are_folded_into_one_at_the_top():
    moved = f"Intro a person wrote.\n\n{DESCRIPTION_START}\nold\n{DESCRIPTION_END}\n\nMore.\n{DESCRIPTION_START}\nold 2\n{DESCRIPTION_END}"
    text = with_block(moved, BLOCK)
    assert text.count(DESCRIPTION_START) == text.count(DESCRIPTION_END) == 1
    assert text.startswith(f"{DESCRIPTION_START}\n{BLOCK}\n") and "Intro a person wrote." in text and "More." in text
    assert "old" not in text


def test_the_line_leads_with_the_verdict_then_the_date_and_the_links():
    line = version_block("REPRODUCED_BITWISE", "2026-12-05", "https://r.example.org/a.html", "#/experiments/1/runs/r", "a.html")
    assert line == "**REPRODUCED_BITWISE** · 2026-12-05 · [report](https://r.example.org/a.html) · [audit run](#/experiments/1/runs/r)"
    assert "artifact `a.html`" in version_block("ERROR", "2026-12-05", None, None, "a.html")


def test_links_into_mlflows_ui_are_relative_routes_with_names_escaped():
    assert ui_run_route("4", "abc") == "#/experiments/4/runs/abc"
    assert ui_run_route("4", "abc", "x_v1_2026.html") == "#/experiments/4/runs/abc/artifacts/x_v1_2026.html"
    assert ui_version_route("credit scorer/eu", "3") == "#/models/credit%20scorer%2Feu/versions/3"


def test_a_url_in_a_description_names_no_credentials_and_stays_one_markdown_link():
    assert public_url("https://alice:s3cret@reports.example.org:8443/a/b.html") == "https://reports.example.org:8443/a/b.html"
    assert public_url("https://token@reports.example.org/a.html") == "https://reports.example.org/a.html"
    assert public_url("https://r.example.org/a (1).html") == "https://r.example.org/a%20%281%29.html"
    assert public_url("https://r.example.org/a%20b.html?x=1") == "https://r.example.org/a%20b.html?x=1"


def test_the_audit_runs_description_names_the_version_with_a_link_to_its_page():
    note = run_note("credit_scorer", "3", "OUT_OF_TOLERANCE", "2026-03-02", None, "r.html")
    assert note.startswith(r"Audit of [models:/credit\_scorer/3](#/models/credit_scorer/versions/3): **OUT_OF_TOLERANCE**")
    assert "2026-03-02" in note and "artifact `r.html`" in note
    with_url = run_note("m", "1", "ERROR", None, "https://u:p@r.example.org/r.html", "r.html")
    assert with_url.endswith("[report](https://r.example.org/r.html)") and "u:p" not in with_url


class _Registry:
    """A registry with descriptions that counts its writes."""

    def __init__(self, description: str | None) -> None:
        self.description, self.writes = description, 0

    def get_description(self, info):
        return self.description

    def set_description(self, info, text):
        self.description, self.writes = text, self.writes + 1

    def get_run(self, run_id):
        return SimpleNamespace(experiment_id="7")


def _describe(registry, reports_url=None, verdict="OUT_OF_TOLERANCE"):
    session = SimpleNamespace(registry=registry)
    info = SimpleNamespace(ref="models:/m/1")
    return describe_version(session, info, verdict, "2026-03-02", "m_v1.html", "run1", reports_url)


def test_describing_writes_once_and_links_the_reports_artifact_in_mlflows_ui_without_a_reports_url():
    registry = _Registry(USER)
    assert _describe(registry) and not _describe(registry)
    assert registry.writes == 1
    assert registry.description.startswith(
        f"{DESCRIPTION_START}\n**OUT_OF_TOLERANCE** · 2026-03-02 · [report](#/experiments/7/runs/run1/artifacts/m_v1.html)"
        " · [audit run](#/experiments/7/runs/run1)\n")
    assert registry.description.endswith(USER)


def test_a_registry_without_descriptions_is_left_alone_and_an_overlong_one_is_not_cut(caplog):
    assert not _describe(_Registry(None))
    full = _Registry("x" * (MAX_VERSION_DESCRIPTION - 10))
    assert not _describe(full, reports_url="https://r.example.org/")
    assert full.writes == 0 and full.description == "x" * (MAX_VERSION_DESCRIPTION - 10)
    assert "left as it is" in caplog.text


@pytest.mark.parametrize("verdict", ["REPRODUCED_BITWISE", "LINEAGE_INSUFFICIENT"])
def test_the_reports_web_address_is_the_link_when_one_is_set(verdict):
    registry = _Registry("")
    _describe(registry, reports_url="https://reports.example.org/audits/m_v1.html", verdict=verdict)
    assert f"**{verdict}** · 2026-03-02 · [report](https://reports.example.org/audits/m_v1.html)" in registry.description
