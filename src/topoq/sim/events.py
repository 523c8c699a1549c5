"""The timeline of a scenario: events as data, read from the file and checked as a whole.

Streams are expanded into their submissions. Events are put in the order they apply (by time,
then by their place in the file) and checked in that order: every job a cancel, hold, release
or dependency names is submitted earlier, every node a failure names exists and is up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from topoq.discovery.documents import Fields
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy
from topoq.domain.job import JobId
from topoq.domain.names import check_job_id
from topoq.domain.node import NodeName, NodeSpec
from topoq.domain.topology import TopologySpec
from topoq.sim.submission import JOB_KEYS, SUBMIT_KEYS, JobContext, Submit, read_submit
from topoq.sim.values import MAX_TIME_S, count, seconds, unknown_name

MAX_SCENARIO_JOBS = 20_000
"""Jobs one scenario submits, streams included (each is simulated through every cycle)."""

__all__ = [
    "Action",
    "Cancel",
    "FailNode",
    "Hold",
    "RecoverNode",
    "Release",
    "ScenarioEvent",
    "Submit",
    "read_events",
]


@dataclass(frozen=True)
class Cancel:
    job: JobId


@dataclass(frozen=True)
class Hold:
    job: JobId


@dataclass(frozen=True)
class Release:
    job: JobId


@dataclass(frozen=True)
class FailNode:
    node: NodeName


@dataclass(frozen=True)
class RecoverNode:
    node: NodeName


Action = Submit | Cancel | Hold | Release | FailNode | RecoverNode
_JOB_ACTIONS: dict[str, type[Cancel | Hold | Release]] = {
    "cancel": Cancel,
    "hold": Hold,
    "release": Release,
}
_NODE_ACTIONS: dict[str, type[FailNode | RecoverNode]] = {
    "fail_node": FailNode,
    "recover_node": RecoverNode,
}
_ACTIONS = ("submit", "stream", *_JOB_ACTIONS, *_NODE_ACTIONS)
_STREAM_KEYS = ("every_s", "count", "batch", "id_prefix", *JOB_KEYS)


@dataclass(frozen=True)
class ScenarioEvent:
    at_s: float
    action: Action
    where: str
    """The field that defines it, e.g. ``events[4].cancel``; ``… (job 7)`` within a stream."""


def read_events(
    fields: Fields,
    base: Path,
    policy: ClusterPolicy,
    nodes: Sequence[NodeSpec],
    topology: TopologySpec,
) -> tuple[tuple[ScenarioEvent, ...], tuple[str, ...]]:
    """The events in the order they apply, and warnings (teams the policy does not define)."""
    context = JobContext(base, policy, topology)
    listed: list[ScenarioEvent] = []
    jobs = _JobCount()
    for record in fields.records("events"):
        listed.extend(_event(record, context, jobs))
    ordered = tuple(sorted(listed, key=lambda event: event.at_s))  # stable: file order at ties
    _check_jobs(ordered)
    _check_nodes(ordered, nodes)
    return ordered, _unknown_teams(ordered, policy)


class _JobCount:
    """Jobs the events submit so far, refused past ``MAX_SCENARIO_JOBS`` before any is built."""

    def __init__(self) -> None:
        self.total = 0

    def add(self, jobs: int, where: str) -> None:
        self.total += jobs
        if self.total > MAX_SCENARIO_JOBS:
            raise InvalidInputError(
                f"{self.total:,} jobs",
                where=where,
                hint=f"a scenario has at most {MAX_SCENARIO_JOBS:,} jobs (streams included)",
            )


def _event(record: Fields, context: JobContext, jobs: _JobCount) -> list[ScenarioEvent]:
    record.reject_unknown_keys(("at", *_ACTIONS), listed=("at", *_ACTIONS))
    at_s = seconds(record, "at")
    given = [key for key in _ACTIONS if record.has(key)]
    if len(given) != 1:
        found = f"{' and '.join(given)} are given" if given else "no action is given"
        raise InvalidInputError(
            found, where=record.where, hint=f"give `at` and exactly one of {', '.join(_ACTIONS)}"
        )
    kind = given[0]
    where = record.path(kind)
    if kind == "submit":
        submit = record.mapping("submit")
        submit.reject_unknown_keys(SUBMIT_KEYS, listed=SUBMIT_KEYS)
        jobs.add(1, where)
        job_id = check_job_id(submit.text("id"), where=submit.path("id"))
        return [ScenarioEvent(at_s, read_submit(submit, at_s, context, job_id), where)]
    if kind == "stream":
        return _stream(record.mapping("stream"), at_s, context, jobs)
    if kind in _JOB_ACTIONS:
        return [ScenarioEvent(at_s, _JOB_ACTIONS[kind](JobId(record.text(kind))), where)]
    return [ScenarioEvent(at_s, _NODE_ACTIONS[kind](NodeName(record.text(kind))), where)]


def _stream(
    stream: Fields, at_s: float, context: JobContext, jobs: _JobCount
) -> list[ScenarioEvent]:
    stream.reject_unknown_keys(_STREAM_KEYS, listed=_STREAM_KEYS)
    every = seconds(stream, "every_s", positive=True)
    total = count(stream, "count")
    jobs.add(total, stream.path("count"))
    batch = count(stream, "batch", 1)
    prefix = stream.text("id_prefix", stream.text("team"))
    width = len(str(total))
    for last in (1, total):  # the first and the longest id follow the grammar, so all do
        check_job_id(f"{prefix}-{last:0{width}d}", where=stream.path("id_prefix"))
    if at_s + (total - 1) // batch * every > MAX_TIME_S:
        raise InvalidInputError(
            f"the stream's last job would be submitted after {MAX_TIME_S:,} s",
            where=stream.path("every_s"),
            hint="submit fewer jobs, more at a time (batch), or more often",
        )
    template = read_submit(stream, at_s, context, f"{prefix}-{1:0{width}d}")
    events: list[ScenarioEvent] = []
    for number in range(total):
        job_id = JobId(f"{prefix}-{number + 1:0{width}d}")
        when = at_s + (number // batch) * every
        workload = replace(template.spec.workload, name=job_id)
        spec = replace(template.spec, id=job_id, submitted_at=when, workload=workload)
        where = f"{stream.where} (job {number + 1})"
        events.append(ScenarioEvent(when, replace(template, spec=spec), where))
    return events


def _check_jobs(events: Sequence[ScenarioEvent]) -> None:
    submitted: dict[JobId, ScenarioEvent] = {}
    for event in events:
        action = event.action
        if isinstance(action, Submit):
            earlier = submitted.get(action.spec.id)
            if earlier is not None:
                raise InvalidInputError(
                    f"job {action.spec.id!r} is submitted twice",
                    where=event.where,
                    hint=f"also at {earlier.where}; give every job a distinct id",
                )
            for dependency in action.spec.dependencies:
                _check_known(dependency.job, submitted, events, event, dependency.kind.value)
            submitted[action.spec.id] = event
        elif isinstance(action, Cancel | Hold | Release):
            _check_known(action.job, submitted, events, event, "the job")


def _check_known(
    job: JobId,
    submitted: dict[JobId, ScenarioEvent],
    events: Sequence[ScenarioEvent],
    event: ScenarioEvent,
    role: str,
) -> None:
    if job in submitted:
        return
    later = next(
        (e for e in events if isinstance(e.action, Submit) and e.action.spec.id == job), None
    )
    if later is not None:
        raise InvalidInputError(
            f"{role} {job!r} is submitted only at {later.at_s:g} s ({later.where}), "
            f"after this event at {event.at_s:g} s",
            where=event.where,
            hint="submit the job before an event that names it",
        )
    known = [e.action.spec.id for e in events if isinstance(e.action, Submit)]
    raise unknown_name("job", job, known, event.where, "name a job a submit event defines")


def _check_nodes(events: Sequence[ScenarioEvent], nodes: Sequence[NodeSpec]) -> None:
    ready = {node.name: node.ready for node in nodes}
    for event in events:
        action = event.action
        if not isinstance(action, FailNode | RecoverNode):
            continue
        if action.node not in ready:
            raise unknown_name(
                "node", action.node, sorted(ready), event.where, "name a node of the cluster"
            )
        failing = isinstance(action, FailNode)
        if ready[action.node] != failing:
            raise InvalidInputError(
                f"node {action.node!r} is {'already failed' if failing else 'not failed'} "
                f"at {event.at_s:g} s",
                where=event.where,
                hint="recover it before failing it again"
                if failing
                else "fail it first (fail_node), or drop this event",
            )
        ready[action.node] = not failing


def _unknown_teams(events: Sequence[ScenarioEvent], policy: ClusterPolicy) -> tuple[str, ...]:
    warnings: dict[str, str] = {}
    for event in events:
        action = event.action
        if isinstance(action, Submit) and action.spec.team not in policy.by_team:
            warnings.setdefault(
                action.spec.team,
                f"{event.where}: team {action.spec.team!r} is not in the policy; its jobs will "
                "wait with UNKNOWN_TEAM",
            )
    return tuple(warnings.values())
