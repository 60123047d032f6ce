"""Issue 40, build 5: a quiet report. Each line once (lineage warnings in the lineage table, the model's differences
under Bitwise), backticks as code, JSON tags as key: value lines, long lists collapsed, the explanation said once."""

from __future__ import annotations

import json

from auditor.judge.result import TensorDiff, Verdict, WeightDiff
from auditor.judge.verdict import judge
from auditor.lineage.findings import Finding
from auditor.report.evidence import build_evidence
from auditor.report.render import render_report
from auditor.report.tidy import quiet_tiers, tag_lines, ticks
from auditor.settings import Settings
from tests.fixtures.audits import make_audit


def _row(key, summary, details):
    return {"key": key, "title": key, "status": "fail", "summary": summary, "details": details}


def test_a_line_two_tiers_share_is_shown_under_bitwise_and_counted_under_statistical():
    shared = ["parameter eta: '0.1' vs '0.12'", "tree 4 node 0: split threshold differs on feature 0: 0.07 vs 0.17"]
    rows = quiet_tiers([_row("statistical", "another model", [*shared, "auc: inside"]), _row("bitwise", "2 of 9 differ", shared)])
    stat, bit = rows
    assert bit["details"] == shared
    assert stat["details"] == ["the 2 model difference(s) the Bitwise tier lists (the cause first)", "auc: inside"]


def test_lineage_warnings_are_left_to_the_lineage_table_and_a_detail_repeating_the_summary_goes():
    rows = quiet_tiers([_row("lineage", "complete, 1 warning(s)", ["[warning] data.train.split — not recorded (fix: record it)"]),
                        _row("statistical", "2 same-seed reruns differ", ["weights: 2 same-seed reruns differ", "auc: inside"])])
    assert rows[0]["details"] == ["1 warning(s), each with its fix, in the lineage table below"]
    assert rows[1]["details"] == ["auc: inside"]


def test_backticks_become_code_and_markup_stays_text():
    assert str(ticks("run `repro-audit calibrate` <b>now</b>")) == "run <code>repro-audit calibrate</code> &lt;b&gt;now&lt;/b&gt;"
    assert str(ticks("no ticks")) == "no ticks" and str(ticks(None)) == ""
    assert "<code>" not in str(ticks("a lone ` tick"))


def test_a_json_tag_reads_as_key_value_lines_and_other_tags_as_they_are():
    value = json.dumps({"calibrated_at": "2026-12-05", "cost": {"reruns": 7, "cpu_s": 33.6531, "accelerator_s": None},
                        "deterministic": True, "kind": "repro.calibration"})
    assert tag_lines(value, limit=10) == ["calibrated_at: 2026-12-05", "cost.accelerator_s: —", "cost.cpu_s: 33.65",
                                          "cost.reruns: 7", "deterministic: yes", "kind: repro.calibration"]
    assert tag_lines(value, limit=2)[-1].startswith("… and 4 more")
    assert tag_lines("team-risk") is None and tag_lines("{not json") is None and tag_lines('["a"]') is None


def test_the_rendered_page_says_each_line_once_and_collapses_long_lists():
    diff = WeightDiff(identical=False, tensors=30, differing=30, max_abs=0.5,
                      worst=[TensorDiff(name=f"w{i}", shape_a=[2], shape_b=[2], max_abs=0.5 / (i + 1), rel_l2=0.123456789,
                                        cosine=0.987654321) for i in range(14)])
    warning = Finding(code="data.split_missing", path="data.train.split", severity="warning",
                      message="how the data was split is not recorded", hint="call `run.record_split`")
    verdict, tiers = judge(findings=[warning], recovery=None, metric_results=[], weight_diff=diff)
    audit = make_audit(verdict).model_copy(update={"tiers": tiers, "weight_diff": diff, "findings": [warning]})
    html = render_report(build_evidence(audit, settings=Settings()))
    assert html.count("how the data was split is not recorded") == 1  # the lineage table only
    assert "call <code>run.record_split</code>" in html
    assert "rel L2 0.1235, cosine 0.9877" in html and "0.123456789" not in html.split('id="evidence"')[0]
    assert "<details><summary>" in html and "more (open)" in html
    if audit.verdict is not Verdict.REPRODUCED_BITWISE:  # a problem box: its explanation is not repeated under the tiers
        start = html.index('id="problems"')
        explanation = html[html.index("<p>", start) + 3:html.index("</p>", start)]
        assert html.count(explanation) == 1


def test_where_decisions_flip_is_drawn_by_score_with_the_threshold():
    """Issue 40, build 3: a tabular divergence's picture shows where, by score, the flipped decisions are."""
    import numpy as np

    from auditor.flavors import predictions
    from auditor.report import plots

    scores = np.linspace(0.0, 1.0, 500)
    moved = scores.copy()
    moved[(scores > 0.48) & (scores < 0.5)] += 0.03  # rows just under the threshold cross it in the rebuild
    found = predictions.compare(dict(zip(predictions.ARRAYS, (scores, moved, scores, moved), strict=True)), 0.5)
    assert found.flips == int(np.count_nonzero((scores > 0.48) & (scores < 0.5)))
    assert sum(b[2] for b in found.by_score) == 500 and sum(b[3] for b in found.by_score) == found.flips
    flipped_bins = [b for b in found.by_score if b[3]]
    assert all(b[0] <= 0.5 <= b[1] + 0.06 for b in flipped_bins), flipped_bins  # at the threshold, not elsewhere
    svg = str(plots.flips_svg([list(b) for b in found.by_score], 0.5))
    assert 'class="flips-strip"' in svg and 'fill="#c62828"' in svg and "stroke-dasharray" in svg
    assert plots.flips_svg([[0.0, 1.0, 10, 0]], 0.5) is None  # nothing flips: no picture


def test_the_first_divergent_tree_is_shown_beside_its_registered_twin():
    """Issue 40, build 3: the first tree that differs, node by node, both versions side by side."""
    import json

    from auditor.flavors.base import Node, Normal, diff_normals
    from auditor.judge.models import as_weight_diff

    def tree(threshold):
        return [Node(feature=0, threshold=0.5, children=(1, 2)), Node(feature=1, threshold=threshold, children=(3, 4)),
                Node(value=(0.1,)), Node(value=(0.2,)), Node(value=(0.3,))]

    a = Normal(flavor="xgboost", trees=[tree(1.0), tree(1.0)])
    b = Normal(flavor="xgboost", trees=[tree(1.0), tree(1.75)])
    diff, evidence = as_weight_diff(diff_normals(a, b), "xgboost")
    twin = json.loads(evidence["model.first_tree"])
    assert twin["tree"] == 1 and len(twin["nodes"]) == 5
    differing = [n for n in twin["nodes"] if n[1] != n[2]]
    assert differing == [[1, "split on feature 1 at 1.0", "split on feature 1 at 1.75"]]
    audit = make_audit(Verdict.OUT_OF_TOLERANCE).model_copy(update={"weight_diff": diff, "evidence": evidence})
    html = render_report(build_evidence(audit, settings=Settings()))
    assert "Tree 1, the first that differs, beside its registered twin" in html
    assert html.count('class="differs"') == 1


def test_an_adoptions_lineage_warnings_stay_in_the_tier_because_its_table_shows_only_its_classes():
    rows = quiet_tiers([_row("lineage", "complete, 1 warning(s)", ["[warning] seeds — too few reruns (fix: more)"])],
                       table_has_warnings=False)
    assert rows[0]["details"] == ["[warning] seeds — too few reruns (fix: more)"]


def test_the_twin_always_shows_the_first_node_that_differs_deep_in_a_tree():
    import json

    from auditor.flavors.base import Node, Normal, diff_normals
    from auditor.judge.models import as_weight_diff

    def tree(leaf40):  # a complete binary tree of 63 nodes: splits 0-30, leaves 31-62
        splits = [Node(feature=k % 3, threshold=0.5, children=(2 * k + 1, 2 * k + 2)) for k in range(31)]
        return splits + [Node(value=(leaf40 if k == 40 else 0.5,)) for k in range(31, 63)]

    _, evidence = as_weight_diff(diff_normals(Normal(flavor="xgboost", trees=[tree(0.5)]),
                                              Normal(flavor="xgboost", trees=[tree(0.75)])), "xgboost")
    twin = json.loads(evidence["model.first_tree"])
    assert [n for n in twin["nodes"] if n[1] != n[2]] == [[40, "leaf 0.5", "leaf 0.75"]], twin


def test_scores_with_one_column_per_class_get_no_by_score_picture():
    """Multi-class decisions are an argmax, not a threshold: binning every class cell would count rows per class."""
    import numpy as np

    from auditor.flavors import predictions

    a = np.tile([[0.2, 0.3, 0.5]], (10, 1))
    b = a.copy()
    b[:3] = [0.5, 0.3, 0.2]
    found = predictions.compare(dict(zip(predictions.ARRAYS, (a, b, a, b), strict=True)), 0.5)
    assert found.flips > 0 and found.by_score == ()


def test_a_finding_on_a_secret_looking_config_key_is_not_mangled_by_the_redaction_of_output():
    """Our own line "config.resolved.credentials.pin: a secret-looking value was redacted" lost its word "a" to the
    key: value rule every output line passes through; the path and the message are now joined by a dash."""
    from auditor.lineage.redact import redact_text

    finding = Finding(code="config.redacted", path="config.resolved.credentials.pin", severity="warning",
                      message="a secret-looking value was redacted; a rebuild sees the marker", hint="read it from the environment")
    assert redact_text(str(finding)) == str(finding)
