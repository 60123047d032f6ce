"""Where an MLflow user looks: the latest verdict atop the version's description, the audited version in the run's.

A version's description is shown on its page in MLflow's UI (rendered markdown). Each audit writes one
block at its top, between ``DESCRIPTION_START`` and ``DESCRIPTION_END`` (HTML comments: the page shows neither)::

    **OUT_OF_TOLERANCE** · 2026-03-02 · [report](…) · [audit run](#/experiments/4/runs/…)

and a later audit rewrites that block only: what a person wrote stays below it. The audit run's description
(MLflow's ``mlflow.note.content``) names the version it audited, with a link to its page: MLflow 3's "Registered
models" box on a run lists only versions registered from that run (or from a LoggedModel of its own experiment), so
a run that audited another run's version can only say so in its own words.

Links into MLflow's UI are relative (``#/models/…``, ``#/experiments/…``): they open at whatever address the UI is
served (the auditor may reach the tracking server as ``http://mlflow:5000`` while people browse another address, or
read a SQLite file that ``mlflow ui`` serves), and they name the experiment, the run and the artifact to whoever reads
the description through the API. With ``REPRO_REPORTS_URL`` the report link is the report's web address instead.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from auditor.tags import DESCRIPTION_END, DESCRIPTION_START, MAX_VERSION_DESCRIPTION
from auditor.uris import model_uri

log = logging.getLogger(__name__)

#: every block an audit wrote (a race of two publishers, or a block a person moved down), and the blank lines after it
_BLOCK = re.compile(re.escape(DESCRIPTION_START) + r".*?" + re.escape(DESCRIPTION_END) + r"[ \t]*(?:\r?\n)*", re.S)
#: what markdown would read as syntax in a model's name shown as link text
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+!|~])")


def ui_run_route(experiment_id: str, run_id: str, artifact: str | None = None) -> str:
    """The run's page in MLflow's UI, relative to wherever it is served; with ``artifact``, that file open."""
    route = f"#/experiments/{quote(str(experiment_id), safe='')}/runs/{quote(run_id, safe='')}"
    return f"{route}/artifacts/{quote(artifact, safe='/')}" if artifact else route


def ui_version_route(name: str, version: str) -> str:
    """The model version's page in MLflow's UI, relative to wherever it is served."""
    return f"#/models/{quote(name, safe='')}/versions/{quote(str(version), safe='')}"


def public_url(url: str) -> str:
    """``url`` without credentials (``https://user:token@host/…`` names no one in a description) and with the
    characters that end a markdown link destination escaped."""
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        parts = parts._replace(netloc=f"{host}:{parts.port}" if parts.port else host)
    return quote(urlunsplit(parts), safe=":/?#[]@!$&'*+,;=%~")


def _text(value: str) -> str:
    """``value`` as literal markdown text (a model name may hold ``_``, ``*`` or brackets)."""
    return _MARKDOWN.sub(r"\\\1", value).replace("<", "&lt;").replace(">", "&gt;")


def version_block(verdict: str, date: str, report: str | None, run: str | None, report_key: str) -> str:
    """The line an audit writes atop the version's description: the verdict first, then its date and links."""
    parts = [f"**{verdict}**", date]
    parts.append(f"[report]({report})" if report else f"report: artifact `{report_key}` of the audit run")
    if run:
        parts.append(f"[audit run]({run})")
    return " · ".join(parts)


def with_block(description: str | None, block: str) -> str:
    """``description`` opening with ``block`` between the markers: an earlier block of ours is replaced (wherever it
    is), every other line is kept, below ours, as it was."""
    rest = _BLOCK.sub("", description or "").lstrip("\r\n")
    ours = f"{DESCRIPTION_START}\n{block}\n{DESCRIPTION_END}\n"
    return f"{ours}\n{rest}" if rest.strip() else ours


def run_note(name: str, version: str, verdict: str, date: str | None, report_url: str | None, report_key: str) -> str:
    """The audit run's description: the version it audited (a link to its page), the verdict, the report."""
    ref = model_uri(name, version)
    report = f"[report]({public_url(report_url)})" if report_url else f"the report is this run's artifact `{report_key}`"
    head = f"Audit of [{_text(ref)}]({ui_version_route(name, version)})"
    return " · ".join([f"{head}: **{verdict}**", *([date] if date else []), report])


def describe_version(session: Any, info: Any, verdict: str, date: str, report_key: str, run_id: str,
                     report_url: str | None) -> bool:
    """Open the version's description with this audit's block, once: a block already there is replaced, the text a
    person wrote below it kept, nothing written when it already reads so. True when it was written.

    A registry without descriptions (the in-memory twin) is left alone; a description that would outgrow MLflow's
    limit is left as it is, with a warning (the version's tags still say the verdict).
    """
    registry = session.registry
    current = registry.get_description(info)
    if current is None:
        return False
    experiment = registry.get_run(run_id).experiment_id
    if report_url:
        report: str | None = public_url(report_url)
    else:
        report = ui_run_route(experiment, run_id, report_key) if experiment else None
    run = ui_run_route(experiment, run_id) if experiment else None
    wanted = with_block(current, version_block(verdict, date, report, run, report_key))
    if wanted == current:
        return False
    if len(wanted) > MAX_VERSION_DESCRIPTION:
        log.warning("publish %s: its description would be %d characters with the verdict on top (MLflow keeps %d); "
                    "left as it is", info.ref, len(wanted), MAX_VERSION_DESCRIPTION)
        return False
    registry.set_description(info, wanted)
    return True
