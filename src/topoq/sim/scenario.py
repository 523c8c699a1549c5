"""The scenario file: a cluster, a policy and a timeline of events, read for ``topoq simulate``.

::

    apiVersion: topoq.io/v1
    kind: Scenario
    metadata: {name: reclaim}
    cluster: cluster.yaml            # a path (relative to this file) to any cluster description
                                     # topoq reads, or inline: {generate: "2x2x4 p5.48xlarge"}
    policy: policy.yaml              # a path to a policy file, or an inline policy body
    cycle_interval_s: 10             # optional: also run a cycle every N seconds
    stop_delay_s: 5                  # optional: how long a victim takes to stop (default 0)
    until_s: 7200                    # optional end; default: when nothing is left to happen
    events:
    - {at: 0, submit: {id: b1, team: vision, priority: training, runtime_s: 3600,
                       pods: 8, gpus: 8, required: topology.k8s.aws/network-node-layer-2}}
    - {at: 0, submit: {id: big, team: nlp, job: ../workloads/x.yaml, runtime_s: 600}}
    - {at: 0, submit: {id: inline, team: nlp, runtime_s: 60,
                       podSets: [{name: w, count: 2, requests: {nvidia.com/gpu: 8}}]}}
    - {at: 30, cancel: b1}
    - {at: 60, fail_node: p5-0003}
    - {at: 300, recover_node: p5-0003}
    - {at: 90, submit: {id: dep, team: nlp, after_ok: [b1], runtime_s: 60, pods: 1, gpus: 8,
                        exit_code: 1, max_retry: 1}}
    - {at: 100, hold: dep}
    - {at: 110, release: dep}
    - {at: 0, stream: {team: vision, every_s: 60, count: 50, id_prefix: small,
                       pods: 1, gpus: 8, runtime_s: 300}}

A submission gives its shape one of three ways: ``job`` (a Kueue Workload, topoq job file or
HyperPod job, relative to the scenario), ``podSets`` (as in topoq's job file), or the shortcut
``pods`` × ``gpus`` with optional ``required``/``preferred`` levels. ``exit_code`` may be a list,
one code per attempt (the last repeats). A stream submits ``count`` identical jobs (``batch`` at
a time) every ``every_s`` seconds from ``at``, named ``{id_prefix}-{n}``.

Events at the same time apply in file order. Errors name the file, the event and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from topoq.discovery.clusterfile import cluster_from_document
from topoq.discovery.documents import Fields, check_header, read_document
from topoq.discovery.policy import (
    POLICY_API_VERSION,
    POLICY_KIND,
    load_policy,
    policy_from_document,
)
from topoq.discovery.sources import load_cluster
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy
from topoq.domain.node import NodeSpec
from topoq.domain.topology import TopologySpec
from topoq.sim.events import ScenarioEvent, Submit, read_events
from topoq.sim.values import optional_seconds, relative_path

MAX_PERIODIC_CYCLES = 100_000
"""Cycles ``cycle_interval_s`` adds to a run, counted up to its latest possible end."""
API_VERSION = "topoq.io/v1"
KIND = "Scenario"
_TOP_KEYS = (
    "apiVersion",
    "kind",
    "metadata",
    "cluster",
    "policy",
    "cycle_interval_s",
    "stop_delay_s",
    "until_s",
    "events",
)


@dataclass(frozen=True)
class Scenario:
    name: str
    source: str
    nodes: tuple[NodeSpec, ...]
    topology: TopologySpec
    policy: ClusterPolicy
    events: tuple[ScenarioEvent, ...]
    """In the order they apply: by time, then file order."""
    cycle_interval_s: float | None = None
    until_s: float | None = None
    stop_delay_s: float = 0.0
    """How long a preempted job's pods take to stop: it keeps its GPUs (PREEMPTING) and its
    preemptor waits that long."""
    warnings: tuple[str, ...] = ()


def load_scenario(path: Path | str) -> Scenario:
    """Read and check a scenario file; every error names the file, the event and the field."""
    source = str(path)
    document = read_document(path)
    try:
        return _scenario(Fields(document, ""), source, Path(path).parent)
    except InvalidInputError as error:
        raise error.located(source) from None


def _scenario(fields: Fields, source: str, base: Path) -> Scenario:
    fields.reject_unknown_keys(_TOP_KEYS, listed=_TOP_KEYS)
    check_header(fields, API_VERSION, KIND, what="a scenario")
    name = fields.mapping("metadata").text("name", Path(source).stem)
    nodes, topology, warnings = _cluster(fields, base)
    policy = _policy(fields, base)
    events, event_warnings = read_events(fields, base, policy, nodes, topology)
    until_s = optional_seconds(fields, "until_s")
    interval = optional_seconds(fields, "cycle_interval_s", positive=True)
    if interval is not None:
        _check_periodic_cycles(interval, _horizon_s(events, until_s), fields)
    return Scenario(
        name=name,
        source=source,
        nodes=nodes,
        topology=topology,
        policy=policy,
        events=events,
        cycle_interval_s=interval,
        until_s=until_s,
        stop_delay_s=optional_seconds(fields, "stop_delay_s") or 0.0,
        warnings=(*warnings, *event_warnings),
    )


def _horizon_s(events: tuple[ScenarioEvent, ...], until_s: float | None) -> float:
    """When the run ends at the latest: ``until_s``, else after the last event every job's
    every attempt run one after another."""
    if until_s is not None:
        return until_s
    last = max((event.at_s for event in events), default=0.0)
    work = 0.0
    for event in events:
        if isinstance(event.action, Submit):
            spec = event.action.spec
            work += (spec.runtime_s or 0.0) * (1 + spec.max_retry)
    return last + work


def _check_periodic_cycles(interval_s: float, horizon_s: float, fields: Fields) -> None:
    """The run's periodic cycles are bounded before it starts (each is a full cycle)."""
    cycles = horizon_s / interval_s
    if cycles > MAX_PERIODIC_CYCLES:
        raise InvalidInputError(
            f"a cycle every {interval_s:g} s until {horizon_s:g} s is {cycles:,.0f} cycles",
            where=fields.path("cycle_interval_s"),
            hint=f"a scenario runs at most {MAX_PERIODIC_CYCLES:,} periodic cycles; give a "
            "longer cycle_interval_s, or an until_s",
        )


def _cluster(
    fields: Fields, base: Path
) -> tuple[tuple[NodeSpec, ...], TopologySpec, tuple[str, ...]]:
    value = fields.required("cluster")
    where = fields.path("cluster")
    if isinstance(value, str):
        path = relative_path(base, value, where)
        try:
            loaded = load_cluster(path)
        except InvalidInputError as error:
            raise error.located(where) from None
        nodes, topology, used = loaded.nodes, loaded.topology, loaded.used
        warnings = tuple(loaded.warnings)
    elif isinstance(value, Mapping):
        inline = cluster_from_document(value, source=where, default_name="scenario")
        nodes, topology, used, warnings = inline.nodes, inline.topology, inline.used, ()
    else:
        raise InvalidInputError(
            f"expected a path or a cluster file body, got {value!r}",
            where=where,
            hint="e.g. cluster: cluster.yaml, or cluster: {generate: '2x2x4 p5.48xlarge'}",
        )
    if used:
        warnings = (
            *warnings,
            f"the cluster's `used` capacity ({len(used)} nodes) is ignored: "
            "the simulator starts from an empty cluster",
        )
    return nodes, topology, warnings


def _policy(fields: Fields, base: Path) -> ClusterPolicy:
    value = fields.required("policy")
    where = fields.path("policy")
    if isinstance(value, str):
        path = relative_path(base, value, where)
        try:
            return load_policy(path)
        except InvalidInputError as error:
            raise error.located(where) from None
    if isinstance(value, Mapping):
        document = {"apiVersion": POLICY_API_VERSION, "kind": POLICY_KIND} | dict(value)
        return policy_from_document(document, source=where)
    raise InvalidInputError(
        f"expected a path or a policy body, got {value!r}",
        where=where,
        hint="e.g. policy: policy.yaml, or an inline mapping with scheduling and teams",
    )
