"""The promotion gate under Airflow: notice a production alias move in MLflow, compare, and show the gate as a state.

The DAG runs on the registry's webhook or on a poll (``promotion_schedule``, ``REPRO_REGISTRY_EVENTS``): with
``webhook``, on the asset event MLflow's signed alias webhook starts (``REPRO_ALIAS_ASSET``,
``auditor.airflow.webhook``); with ``poll`` (the default: a registry without webhooks), every ten minutes, its sensor in
reschedule mode, so a quiet poll holds no worker slot between pokes. Either way ``AliasMoveSensor``
lists the registry's versions, keeps the production aliases (``REPRO_PRODUCTION_ALIASES``) and compares
them with the state last seen, kept in the Airflow Variable ``ALIAS_STATE_VARIABLE`` (``{model: {alias:
version}}``). An alias that now points at another version is a move: the new version is the candidate,
the one it left the incumbent. An alias seen for the first time is remembered, not compared (there is
no incumbent). The sensor succeeds with the moves as its XCom, or is skipped (``soft_fail``) when nothing
moved before its timeout, so a quiet poll is no red square. The aliases it saw become the state last seen
only once every move was compared (``remember_aliases``, after ``compare``): a comparison that crashed
leaves its move to the next run instead of losing it (``RememberAliases``).

``compare`` (a ``@task`` in the DAG file) is one call into ``Session.compare`` per move; ``PromotionGate``,
the task after it, never retried, is the gate as a state: green for an improvement beyond seed noise,
red (``AirflowFailException``) for one within seed noise or worse, naming the published comparison.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator, BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowFailException

from auditor.airflow.hooks import AuditHook
from auditor.airflow.notifications import failure_notifiers

#: the Airflow Variable holding the production aliases last seen: ``{model: {alias: version}}``
ALIAS_STATE_VARIABLE = "repro_alias_state"
#: the sensor's XCom key for the aliases it saw when it found moves (``remember_aliases`` stores them)
ALIAS_STATE_KEY = "alias_state"
#: how often the registry's aliases are polled (a cron expression), and how long one poll waits
ALIAS_POLL_SCHEDULE = "*/10 * * * *"
ALIAS_POLL_TIMEOUT = timedelta(minutes=9)
ALIAS_POKE_INTERVAL = timedelta(minutes=1)


def promotion_schedule() -> Any:
    """The promotion gate's schedule: the alias asset under ``REPRO_REGISTRY_EVENTS=webhook`` (MLflow's signed webhook
    starts it within seconds of a move), else a poll every ten minutes. Read while Airflow parses: never raises."""
    from auditor.airflow import asset_of
    from auditor.settings import ALIAS_ASSET, REGISTRY_EVENTS

    if REGISTRY_EVENTS.get_or_default() == "webhook":
        return [asset_of(ALIAS_ASSET)]
    return ALIAS_POLL_SCHEDULE


def alias_state(versions: Any, aliases: tuple[str, ...] | list[str]) -> dict[str, dict[str, str]]:
    """``{model: {alias: version}}`` of the production ``aliases`` among ``versions`` (``ModelVersionInfo``s)."""
    state: dict[str, dict[str, str]] = {}
    for info in versions:
        for alias in info.aliases:
            if alias in aliases:
                state.setdefault(info.name, {})[alias] = str(info.version)
    return state


def alias_moves(seen: Mapping[str, Mapping[str, str]], now: Mapping[str, Mapping[str, str]]) -> list[dict[str, str]]:
    """Each alias that points at another version than last seen: ``{model, alias, candidate, incumbent}`` (refs)."""
    from auditor.uris import model_uri

    moves = []
    for name in sorted(now):
        for alias, version in sorted(now[name].items()):
            before = (seen.get(name) or {}).get(alias)
            if before is not None and before != version:
                moves.append({"model": name, "alias": alias, "candidate": model_uri(name, version),
                              "incumbent": model_uri(name, before)})
    return moves


def move_label(move: Mapping[str, Any]) -> str:
    return f"{move.get('model')}@{move.get('alias')}: {move.get('incumbent')} -> {move.get('candidate')}"


class AliasMoveSensor(BaseSensorOperator):
    """Succeeds when a production alias has moved since the last poll; its XCom is the list of moves."""

    ui_color = "#fdf3e1"

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("task_id", "alias_moved")
        kwargs.setdefault("soft_fail", True)  # nothing moved: skipped, not failed
        kwargs.setdefault("timeout", ALIAS_POLL_TIMEOUT)
        kwargs.setdefault("poke_interval", ALIAS_POKE_INTERVAL)
        kwargs.setdefault("mode", "reschedule")  # between pokes the slot is free: a poll that finds nothing costs no worker
        kwargs.setdefault("on_failure_callback", failure_notifiers("task"))
        super().__init__(**kwargs)

    def session(self, settings: Any) -> Any:
        """The task's audit session (a test or a deployment overrides it to stand in a registry)."""
        return AuditHook().session(settings)

    def poke(self, context: Any) -> PokeReturnValue:
        from airflow.sdk import Variable

        settings = AuditHook().get_conn()
        session = self.session(settings)
        now = alias_state(session.registry.list_versions(), tuple(settings.production_aliases))
        seen = json.loads(Variable.get(ALIAS_STATE_VARIABLE, default="{}") or "{}")
        moves = alias_moves(seen, now)
        if moves:  # remembered by ``remember_aliases`` once every move was compared: a crashed run loses none
            context["ti"].xcom_push(key=ALIAS_STATE_KEY, value=now)
        elif now != seen:  # an alias seen for the first time, or one gone: nothing to compare, remembered now
            Variable.set(ALIAS_STATE_VARIABLE, json.dumps(now, sort_keys=True))
        for move in moves:
            self.log.info("alias moved: %s", move_label(move))
        return PokeReturnValue(is_done=bool(moves), xcom_value=moves)


class RememberAliases(BaseOperator):
    """After every comparison (red or green): the aliases the sensor saw become the state last seen."""

    def __init__(self, *, sensor_task_id: str = "alias_moved", **kwargs: Any) -> None:
        kwargs.setdefault("task_id", "remember")
        kwargs.setdefault("on_failure_callback", failure_notifiers("task"))
        super().__init__(**kwargs)
        self.sensor_task_id = sensor_task_id

    def execute(self, context: Any) -> dict[str, Any]:
        return remember_aliases(context["ti"].xcom_pull(task_ids=self.sensor_task_id, key=ALIAS_STATE_KEY))


def remember_aliases(state: Mapping[str, Any] | None) -> dict[str, Any]:
    """Keep the aliases the sensor saw as the state last seen: run after every move was compared (red or green)."""
    from airflow.sdk import Variable

    if state is None:
        raise AirflowFailException(f"the sensor pushed no {ALIAS_STATE_KEY!r}: the moves stay unseen and are compared again")
    Variable.set(ALIAS_STATE_VARIABLE, json.dumps(dict(state), sort_keys=True))
    return dict(state)


def gate_row(move: Mapping[str, Any], comparison: Mapping[str, Any]) -> dict[str, Any]:
    """What the gate task reads: the move, the gate, its words, and where the comparison was published."""
    return {**move, "gate": comparison["gate"], "words": comparison["words"], "published": comparison.get("published") or {},
            "sentences": [m["sentence"] for m in comparison.get("metrics") or []]}


def compared_row(move: Mapping[str, Any], compare: Any) -> dict[str, Any]:
    """``gate_row`` of ``compare()`` (one ``Session.compare`` call); a comparison that can never succeed (a version
    without a record, a lineage that blocks: anything but an infrastructure failure or a crash) is a settled red row,
    ``not_comparable``, so the move is remembered and not compared again every poll; a transient failure is raised
    (the move stays unseen and the next run compares it)."""
    from auditor.errors import Meaning, ReproError, describe, meaning_of

    try:
        comparison = compare()
    except ReproError as exc:
        if meaning_of(exc) in (Meaning.INFRASTRUCTURE, Meaning.CRASH):
            raise
        return {**move, "gate": "not_comparable", "words": f"not comparable: {describe(exc)}", "published": {}, "sentences": []}
    return gate_row(move, comparison.model_dump(mode="json"))


class PromotionGate(BaseOperator):
    """The task after a comparison: green for an improvement beyond seed noise, red otherwise; never retried."""

    template_fields = ("row",)

    def __init__(self, *, row: Any, **kwargs: Any) -> None:
        kwargs.setdefault("task_id", "gate")
        kwargs.setdefault("on_failure_callback", failure_notifiers("task"))
        kwargs.setdefault("trigger_rule", "all_done")
        kwargs["retries"] = 0  # a comparison is settled: no retry changes it
        super().__init__(**kwargs)
        self.row = row

    @classmethod
    def partial(cls, **kwargs: Any) -> Any:
        kwargs.setdefault("task_id", "gate")
        kwargs.setdefault("on_failure_callback", failure_notifiers("task"))
        kwargs.setdefault("trigger_rule", "all_done")
        kwargs["retries"] = 0
        return super().partial(**kwargs)

    def execute(self, context: Any) -> dict[str, Any]:
        row = dict(self.row)
        where = row.get("published", {}).get("comparison")
        message = f"{move_label(row)}: {row['words']}" + (f" (comparison {where})" if where else "")
        if row["gate"] != "beyond_noise":
            raise AirflowFailException(message)
        self.log.info("%s", message)
        return row
