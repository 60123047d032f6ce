"""Issue 42, builds 3 and 4 (the pure halves): adoption compares scores, and its report renders from its tiers.

The sandbox's score comparison (``auditor.adopt.sandbox_compare``, standalone: imported here by path) on a real
scikit-learn logistic regression whose coefficients were scaled by 2.5 after fitting: every label the same, the
probabilities not, and the decisions that flips at each cut-off counted. The judge (``auditor.adopt.rebuild.judge``)
names the difference and the flips; a REPRODUCED_BITWISE adoption built by the step's own code renders an HTML page
whose every tier and lineage row says what its JSON evidence says.
"""

from __future__ import annotations

import copy
import importlib.util
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from auditor.adopt.rebuild import evidence_lines, judge, plan
from auditor.adopt.rules import classify
from tests.unit.test_adopt_rebuild_plan import PINNED_META

pytest.importorskip("sklearn")


def _sandbox():
    import auditor.adopt

    path = Path(auditor.adopt.__file__).parent / "sandbox_compare.py"
    spec = importlib.util.spec_from_file_location("sandbox_compare_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scaled():
    """A logistic regression on 2,000 rows and the same model with coef_ and intercept_ scaled by 2.5 after fitting."""
    import pandas as pd
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    x = pd.DataFrame(rng.normal(size=(2000, 4)), columns=list("abcd"))
    y = (x.a + x.b + rng.normal(size=2000) > 0).astype(int)
    model = LogisticRegression(random_state=0).fit(x, y)
    other = copy.deepcopy(model)
    other.coef_, other.intercept_ = other.coef_ * 2.5, other.intercept_ * 2.5
    sc = _sandbox()
    mine, theirs = sc.scores(model, x), sc.scores(other, x)
    compared = [sc.compare_scores(n, mine[n], theirs[n], classes=model.classes_) for n in sc.SCORE_ORDER if n in mine]
    return sc, model, x, compared


def test_scaled_coefficients_keep_every_label_but_move_the_scores_and_flip_decisions_at_cut_offs(scaled):
    sc, _, _, compared = scaled
    by = {c["score"]: c for c in compared}
    assert set(by) == {"predict_proba", "decision_function", "predict"}
    assert by["predict"]["within_resolution"] and by["predict"]["differing"] == 0  # labels: what the old check compared
    proba = by["predict_proba"]
    assert not proba["within_resolution"] and proba["column"] == "P(class 1)"
    assert 0.1 < proba["max_abs"] < 0.3 and proba["over"]["0.05"] > 1000
    flips = {c["cutoff"]: c["flips"] for c in proba["cutoffs"]}
    assert flips[0.5] == 0 and flips[0.3] > 100, flips  # the model's own threshold holds; a 0.3 cut-off does not
    assert [c["cutoff"] for c in proba["cutoffs"]] == list(sc.PROBABILITY_CUTOFFS)


def test_float_resolution_is_tolerated_and_nothing_beyond_it():
    sc = _sandbox()
    a = np.linspace(0.0, 1.0, 101)
    assert sc.compare_scores("predict_proba", a, a.copy())["within_resolution"]
    assert sc.compare_scores("predict_proba", a, np.nextafter(a, 2.0))["within_resolution"]  # one ulp
    moved = a.copy()
    moved[7] += 1e-9
    found = sc.compare_scores("predict_proba", a, moved)
    assert not found["within_resolution"] and found["differing"] == 1
    assert not sc.compare_scores("predict_proba", a, "AttributeError: no predict_proba")["within_resolution"]
    assert not sc.compare_scores("predict", np.array(["yes", "no"]), np.array(["yes", "yes"]))["within_resolution"]


def _found(compared, rows=2000):
    labels = next(c for c in compared if c["score"] == "predict")
    same = all(c["within_resolution"] for c in compared)
    return {"registered_loaded": True, "rebuilt_params": dict(PINNED_META.params),
            "predictions": {"rows": rows, "data": "Delta table /lake/churn @ version 1", "identical": same, "classifier": True,
                            "labels_identical": labels["within_resolution"], "differing": labels["differing"],
                            "max_abs": labels["max_abs"], "scores": compared}}


def test_the_judge_fails_scaled_scores_naming_the_difference_and_the_flipped_decisions(scaled):
    _, _, _, compared = scaled
    p = plan(PINNED_META, classify(PINNED_META), ref="models:/churn/3")
    verdict, tiers, problems = judge(p, _found(compared), registered_sha256="sha256:1", rebuilt_sha256="sha256:2")
    assert verdict.value == "OUT_OF_TOLERANCE" and not verdict.reproduced and not problems
    stat = tiers["statistical"]
    assert stat.status == "fail"
    assert "scores differ beyond float resolution" in stat.summary and "predict_proba P(class 1): max |difference| 0.1" in stat.summary
    assert "by more than 0.05" in stat.summary and "0 decision(s) flip at the model's own threshold" in stat.summary
    assert re.search(r"\d+ decision\(s\) flip at cut-off 0\.\d+", stat.summary), stat.summary
    cut = next(d for d in stat.details if d.startswith("decisions flipped at each cut-off of predict_proba"))
    assert "0.3: " in cut and "0.5: 0" in cut
    lines = evidence_lines(_found(compared))
    assert lines["predictions.flips"] == "0" and float(lines["predictions.max_abs_score"]) > 0.1
    assert "0.3: " in lines["predictions.cutoffs"]
    same = [dict(c, within_resolution=True) for c in compared]
    assert judge(p, _found(same), registered_sha256="sha256:1", rebuilt_sha256="sha256:1")[0].value == "REPRODUCED_BITWISE"


def _bitwise_result(monkeypatch, compared):
    """A REPRODUCED_BITWISE adoption built by the step's own code (``_rebuilt_result``), the sandbox's answer given."""
    from auditor.steps import adopt as step

    same = [dict(c, within_resolution=True, max_abs=0.0, differing=0) for c in compared]
    monkeypatch.setattr(step, "_run_in_sandbox", lambda *a, **k: (_found(same), "sha256:1", "sha256:1", [], "trained\n"))
    rows = classify(PINNED_META)
    the_plan = plan(PINNED_META, rows, ref="models:/churn/3")
    session = SimpleNamespace(settings=SimpleNamespace(responsible_person="Dana Risk", runner="process"))
    return step._rebuilt_result(session, None, SimpleNamespace(ref="models:/churn/3"), PINNED_META, rows, the_plan, (),
                                "adopt-rebuild-2026-12-02", "2026-12-02T00:00:00Z", None, lambda _m: None)


def _pills(html: str, section: str) -> dict[str, str]:
    part = html.split(f'id="{section}"', 1)[1].split("</section>" if section != "verdict" else "</header>", 1)[0]
    return dict(re.findall(r'<span class="pill [^"]*">([A-Za-z ]+): ([a-z ]+)</span>', part))


def test_a_bitwise_adoption_report_says_what_its_evidence_says(monkeypatch, scaled):
    from auditor.report.evidence import build_evidence
    from auditor.report.render import render_report
    from auditor.report.view import TIER_TITLES
    from auditor.settings import Settings

    result = _bitwise_result(monkeypatch, scaled[3])
    assert result.verdict.value == "REPRODUCED_BITWISE"
    doc = build_evidence(result, settings=Settings())
    html = render_report(doc)
    tiers = doc["audit"]["tiers"]
    assert {k: t["status"] for k, t in tiers.items()} == dict.fromkeys(("lineage", "artifact_recovery", "statistical", "bitwise"), "pass")
    header = _pills(html, "verdict")
    assert header == {TIER_TITLES[k]: t["status"] for k, t in tiers.items()}, header
    table = re.findall(r'<tr><td>([A-Za-z ]+)</td><td><span class="pill [^"]*">([a-z ]+)</span>', html.split('id="tiers"')[1])
    assert dict(table[:4]) == {TIER_TITLES[k]: t["status"] for k, t in tiers.items()}
    assert "not run" not in html
    # every lineage row's class is its finding's class in the JSON: pinned beside pinned, never "missing"
    rows = dict(re.findall(r'<tr><td class="nowrap">([^<]+)</td><td class="nowrap"><span class="pill [^"]*">([^<]+)</span>', html))
    classes = {f["path"]: f["code"].rsplit(".", 1)[1] for f in doc["audit"]["findings"] if f["code"].startswith("adopt.")}
    assert {path: ("pinned" if k == "pinned" else k) for path, k in classes.items() if k == "pinned"} == \
        {path: s for path, s in rows.items() if classes.get(path) == "pinned"}
    assert rows["infrastructure"] == "missing" and classes["infrastructure"] == "missing"  # said as an assumption
    assert "Adoption rebuild: lineage recovered from MLflow metadata" in html and "Reproduced bit for bit" in html
    supports = re.findall(r'<tr><td>([A-Za-z ]+)</td><td><span class="pill [^"]*">([a-z ]+)</span></td><td>', html.split('id="supports"')[1])
    assert dict(supports) == {TIER_TITLES[k]: t["status"] for k, t in tiers.items()}
    assert "every score it exposes on the training data equals the registered model" in html


def test_an_adoption_pack_says_why_it_holds_no_run_record():
    from auditor.report.pack import _no_record

    said = _no_record({"audit": {"audit_id": "adopt-rebuild-2026-12-02", "verdict": "REPRODUCED_BITWISE"}})
    assert "stopped before" not in said and "recovered from MLflow metadata" in said
    assert "stopped before" in _no_record({"audit": {"audit_id": "2026-12-02", "verdict": "ERROR"}})
