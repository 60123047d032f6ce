"""The regulatory map: one home for which clause each part of an audit's evidence bears on, and what it does not.

Each ``Clause`` names its source (document, article, and a short quote only where the wording was read
from the source: ``/work/shared/FACTS.md`` and the issue that asked for this map), the parts of our
evidence it maps to, the tiers whose pass that evidence rests on, and what the audit does **not** cover.
Nothing here claims compliance: a map says where to look, a supervisor decides what it is worth.

``markdown()`` renders the map for an evidence pack (``auditor.report.pack``); ``for_report(doc)`` gives
the rows the HTML report shows, with each clause's tiers as this audit judged them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from auditor.settings import DEPLOYED_ARTIFACTS

#: said above the map wherever it is shown
DISCLAIMER = (
    "This map names the clauses that this audit's evidence bears on and the parts of the evidence that do. "
    "It is not a claim of compliance with any of them: each clause asks for more than a reproducibility audit "
    "gives (the \"not covered\" lines say what), and whether the evidence satisfies a clause is for the "
    "institution and its supervisor to judge."
)

_DR_2022_439 = "Commission Delegated Regulation (EU) 2022/439 (RTS on the IRB assessment methodology)"
_AI_ACT = "Regulation (EU) 2024/1689 (EU AI Act)"
_CRR = "Regulation (EU) No 575/2013 (Capital Requirements Regulation, CRR)"
_SR_26_2 = "Federal Reserve SR 26-2 (2026; replaces SR 11-7; supervisory guidance, not an enforceable standard)"


@dataclass(frozen=True)
class Clause:
    """One clause, its source, the evidence that bears on it, and what the audit leaves to others."""

    key: str
    document: str
    article: str
    topic: str
    evidence: tuple[str, ...]
    not_covered: tuple[str, ...]
    quote: str | None = None  # only wording read from the source; None where we have not read it
    tiers: tuple[str, ...] = ()  # the tiers whose pass the evidence rests on (empty: the publication itself)

    @property
    def citation(self) -> str:
        """``<document>, <article>``, with the quote when there is one."""
        quoted = f': "{self.quote}"' if self.quote else ""
        return f"{self.document}, {self.article}{quoted}"


CLAUSES: tuple[Clause, ...] = (
    Clause(
        key="eu-2022-439-art-3-1-d-ii", document=_DR_2022_439, article="Art. 3(1)(d)(ii)",
        topic="documentation that lets a third party replicate the model development",
        quote="replicate the model development",
        evidence=("the run record (code commit, data snapshot ids, resolved configuration, environment, seeds)",
                  "the lineage tier: every input pinned immutably",
                  "the statistical and bitwise tiers: the model rebuilt today from that record"),
        not_covered=("the rationale, methodology and data-quality documentation of the model",
                     "a replication by the third party itself: the pack lets it check ours, not redo it"),
        tiers=("lineage", "statistical", "bitwise"),
    ),
    Clause(
        key="eu-2022-439-art-31-6-b", document=_DR_2022_439, article="Art. 31(6)(b)",
        topic="code references that let a third party reproduce the final results",
        quote="reproduce the final results",
        evidence=("the run record's code reference (repository, commit, entrypoint) and configuration",
                  "the metrics rebuilt from it against the registered ones, within a calibrated or declared band"),
        not_covered=("results outside the registered training run (rating assignment, estimation of risk parameters)",),
        tiers=("lineage", "statistical", "bitwise"),
    ),
    Clause(
        key="eu-2022-439-art-31-8-b", document=_DR_2022_439, article="Art. 31(8)(b)",
        topic="confirmation that the production model is the documented one",
        quote="the rating model implemented in the production system is the same as the one described in the documentation",
        evidence=("the registered weights' sha256, a subject of the signed attestation",
                  "the artifact recovery tier: the registered file is the one the run record names",
                  "the production check (repro-audit coverage): the registry's copy behind each production alias and "
                  f"each deployed copy named in {DEPLOYED_ARTIFACTS.name} are hashed against the audited artifact; a "
                  "difference is a finding on the report and the coverage page"),
        not_covered=("golden-set predictions of the deployed model: a deployed copy is compared by its bytes, not by "
                     "what it predicts",
                     f"deployed copies not named in settings ({DEPLOYED_ARTIFACTS.name}): what a production system "
                     "loaded from anywhere else is not compared"),
        tiers=("artifact_recovery",),
    ),
    Clause(
        key="crr-art-175", document=_CRR, article="Art. 175 (documentation of rating systems)",
        topic="documentation of the design and operational details of rating systems",
        evidence=("the report, the evidence JSON and the run record, kept in a hash-chained ledger",),
        not_covered=("the rating system's design rationale, rating criteria and their use in the institution",
                     "outcomes analysis against realised defaults, and the validation function's own work"),
        tiers=("lineage",),
    ),
    Clause(
        key="ai-act-annex-iv-2-g", document=_AI_ACT, article="Annex IV, point 2(g)",
        topic="test logs and test reports, dated and signed",
        quote="test logs and all test reports dated and signed by the responsible persons",
        evidence=("the report and its evidence JSON, dated (started and finished) and naming the responsible person",
                  "the DSSE/in-toto attestation, signed with Ed25519, naming the report and the evidence by sha256"),
        not_covered=("a personal signature: the key is the one the auditor was given, a person's only if it is theirs",
                     "tests of accuracy, robustness and discriminatory impact for the system's intended purpose"),
    ),
    Clause(
        key="ai-act-art-12", document=_AI_ACT, article="Art. 12 (record-keeping)",
        topic="automatic logging of events",
        evidence=("the ledger: one hash-chained entry per published audit, anchored in MLflow params",),
        not_covered=("the logging of the AI system's own operation (inputs, outputs, use): we log audits, not inference",),
    ),
    Clause(
        key="ai-act-art-18", document=_AI_ACT, article="Art. 18 (documentation keeping)",
        topic="technical documentation kept for ten years",
        evidence=("this evidence pack: everything needed to check the audit, verifiable without repro-audit",
                  "the reports store, write-once under Object Lock where configured"),
        not_covered=("the retention of the inputs themselves (data snapshots, images, MLflow runs): "
                     "a retention check is not part of this audit",
                     "the store's retention period, which is the operator's setting"),
    ),
    Clause(
        key="ai-act-art-19", document=_AI_ACT, article="Art. 19 (automatically generated logs)",
        topic="automatically generated logs kept for at least six months",
        evidence=("the ledger entries from genesis to this audit, and their MLflow anchors",),
        not_covered=("the AI system's operational logs and how long they are kept",),
    ),
    Clause(
        key="us-sr-26-2-ongoing-monitoring", document=_SR_26_2, article="ongoing monitoring",
        topic="model risk management: ongoing monitoring of models in use",
        evidence=("the nightly sampled audits and the coverage page (when each version was last audited)",
                  "the tier results and bands of this audit"),
        not_covered=("outcomes analysis against realised defaults (back-testing) and benchmarking",
                     "monitoring of input drift and of performance on production data",
                     "the soundness of the model's conceptual design"),
        tiers=("lineage", "artifact_recovery", "statistical", "bitwise"),
    ),
)


def clauses() -> tuple[Clause, ...]:
    """Every clause of the map, in the order it is shown."""
    return CLAUSES


def _tier_statuses(doc: dict[str, Any] | None) -> dict[str, str]:
    tiers = ((doc or {}).get("audit") or {}).get("tiers") or {}
    return {name: str((tier or {}).get("status") or "not run") for name, tier in tiers.items()}


def _backing(clause: Clause, statuses: dict[str, str] | None) -> str:
    """What this audit's tiers say about a clause's evidence (``""`` without an audit or tiers)."""
    if statuses is None or not clause.tiers:
        return ""
    passed = [t for t in clause.tiers if statuses.get(t) == "pass"]
    other = [f"{t} ({statuses.get(t, 'not run')})" for t in clause.tiers if statuses.get(t) != "pass"]
    said = [f"passed: {', '.join(passed)}"] if passed else []
    said += [f"did not pass, and support nothing here: {', '.join(other)}"] if other else []
    return "; ".join(said)


def for_report(doc: dict[str, Any] | None = None) -> dict[str, Any]:
    """The map as data for the HTML report: the disclaimer and one row per clause (tiers as ``doc`` judged them)."""
    statuses = _tier_statuses(doc) if doc is not None else None
    rows = [
        {"key": c.key, "article": c.article, "document": c.document, "topic": c.topic, "quote": c.quote,
         "citation": c.citation, "evidence": list(c.evidence), "not_covered": list(c.not_covered),
         "tiers": list(c.tiers), "backing": _backing(c, statuses)}
        for c in CLAUSES
    ]
    return {"disclaimer": DISCLAIMER, "clauses": rows}


def markdown(doc: dict[str, Any] | None = None) -> str:
    """The map as markdown (the pack's ``REGULATORY_MAP.md``)."""
    data = for_report(doc)
    out = ["# Regulatory map", "", data["disclaimer"], ""]
    for row in data["clauses"]:
        out += [f"## {row['article']}: {row['topic']}", "", f"- Source: {row['citation']}"]
        out += [f"- Evidence: {item}" for item in row["evidence"]]
        if row["backing"]:
            out.append(f"- In this audit, the tiers behind it: {row['backing']}")
        out += [f"- Not covered: {item}" for item in row["not_covered"]]
        out.append("")
    return "\n".join(out)


__all__ = ["CLAUSES", "DISCLAIMER", "Clause", "clauses", "for_report", "markdown"]
