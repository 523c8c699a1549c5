"""Jobs taken in from the cluster: the suspended ``batch/v1`` Jobs that name a queue, and the
gated groups of plain Pods that do (a ``v1`` ``List`` of the group's pods), offered by the
executor (``ClusterJobSource``), become topoq jobs through the same checks as a submission
(``job_from_request``, the cluster's limits), each charged to the team whose namespace it is
in; a pod group's job keeps its pods as created (``SourceObject.manifests``) for a later
attempt. What topoq does not take gets a Warning Event that says why and what to change; a
Job (or a group's pod) deleted from the cluster cancels its topoq job. Runs in the controller
process, before each step (docs/executors.md, "Jobs already on the cluster" and "Pods already
on the cluster")."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from topoq.api.cluster_limits import ClusterLimits
from topoq.api.service import NODE_SIZES_REFRESH_S, NodeSizes
from topoq.api.submission import job_from_request
from topoq.api.submission_warnings import refuse_unshareable
from topoq.discovery.pod_groups import is_pod_group, kept_manifest, pods_of, ranked_pods
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy, TeamName
from topoq.domain.job import JobId, SourceObject
from topoq.domain.kube_names import kube_name
from topoq.domain.topology import TopologySpec
from topoq.engine.intake import Intake
from topoq.engine.ports import (
    ClusterJob,
    ClusterJobSource,
    DuplicateJob,
    ExecutorCapabilities,
    Store,
    UnknownJob,
)
from topoq.wire.v1 import JobFormat, SubmitJobRequest

log = logging.getLogger(__name__)

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PLACEMENT_GATE = "topoq.io/placement"
"""The scheduling gate a pod of a group is created with; topoq lifts it on the placed node."""
HYPERPOD_QUEUE_SUFFIX = "-localqueue"
ACTOR = "kubernetes"
"""Who submitted a job taken in from the cluster."""


@dataclass(frozen=True)
class Refusal(Exception):
    reason: str
    message: str


def team_queues(policy: ClusterPolicy | None, namespace_pattern: str) -> dict[str, TeamName]:
    """Each team's namespace → the team."""
    teams = policy.teams if policy is not None else ()
    return {namespace_pattern.format(team=kube_name(t.name)): t.name for t in teams}


def queues_of(namespace: str, team: TeamName) -> tuple[str, ...]:
    """The queue names a team's Job may name: the LocalQueue ``topoq policy export --to kueue``
    writes (the team's name), and HyperPod's ``<namespace>-localqueue``."""
    return (kube_name(team), f"{namespace}{HYPERPOD_QUEUE_SUFFIX}")


class ClusterIntake:
    def __init__(
        self,
        source: ClusterJobSource,
        store: Store,
        topology: TopologySpec,
        *,
        namespace_pattern: str = "{team}",
        clock: Callable[[], float],
        executor: ExecutorCapabilities | None = None,
    ) -> None:
        self.source = source
        self.executor = executor
        self.store = store
        self.topology = topology
        self.namespace_pattern = namespace_pattern
        self.clock = clock
        self.intake = Intake(store, clock)
        self.node_sizes = NodeSizes(store.nodes, NODE_SIZES_REFRESH_S)
        self.limits = ClusterLimits(store.nodes, topology, NODE_SIZES_REFRESH_S)

    def take(self) -> list[JobId]:
        """Take in what the cluster offers now; the jobs taken."""
        taken: list[JobId] = []
        offered = self.source.cluster_jobs()
        policy = self.store.policy() if offered else None  # read once for all of them
        teams = team_queues(policy, self.namespace_pattern)
        for found in offered:
            try:
                taken.append(self._take(found, policy, teams))
            except Refusal as refusal:
                self.source.refuse(found, refusal.reason, refusal.message)
            except Exception:  # the API server away, say: offered again next step
                log.exception("could not take in %s %s", _what(found), _name(found))
        for job_id in self.source.cluster_jobs_gone():
            self._cancel(job_id)
        return taken

    def _take(
        self, found: ClusterJob, policy: ClusterPolicy | None, teams: Mapping[str, TeamName]
    ) -> JobId:
        metadata = found.get("metadata") or {}
        namespace, name = metadata.get("namespace", "default"), metadata.get("name", "")
        group = is_pod_group(found)
        if group:
            _check_gated(found)
            first = ranked_pods(found)[0][1] if _readable(found) else pods_of(found)[0]
            labels = (first.get("metadata") or {}).get("labels") or {}
        elif not (found.get("spec") or {}).get("suspend"):
            raise Refusal(
                "NotSuspended",
                "topoq starts only Jobs created suspended: create it with spec.suspend: true "
                "(topoq unsuspends it once it is admitted)",
            )
        else:
            labels = metadata.get("labels") or {}
        queue = labels.get(QUEUE_LABEL, "")
        team = self._team_of(namespace, queue, teams)
        request = SubmitJobRequest(format=JobFormat.KUBERNETES, document=dict(found), team=team)
        try:
            spec = job_from_request(
                request,
                policy=policy,
                topology=self.topology,
                largest_node=self.node_sizes.largest(),
                user=ACTOR,
                now=self.clock(),
                stored_phases=self.store.phases_of,
            )
            self.limits.check(spec)
            refuse_unshareable(spec.workload, self.executor)
        except InvalidInputError as error:
            where = f" ({error.where.removeprefix('document.')})" if error.where else ""
            hint = f": {error.hint}" if error.hint else ""
            raise Refusal("InvalidJob", f"{error.message}{where}{hint}") from None
        if group:
            source = group_source(found, namespace, name)
            retries = spec.max_retry  # topoq makes the pods again for a later attempt
        else:
            source = SourceObject("Job", namespace, name, metadata.get("uid", ""))
            retries = 0  # the Job's backoffLimit retries pods
        spec = replace(spec, source=source, max_retry=retries)
        try:
            self.intake.submit(spec, actor=f"{ACTOR} ({_what(found)} {namespace}/{name})")
        except DuplicateJob:
            held = self.store.job(spec.id)
            stored = held.spec.source
            if stored is None or stored.uid != source.uid:
                raise Refusal(
                    "NameTaken",
                    f"topoq has a job named {spec.id} already: give the {_what(found)} "
                    "another name",
                ) from None
            if held.phase.finished:  # a pod made again for a group whose job has ended
                raise Refusal(
                    "NameTaken",
                    f"topoq's job {spec.id} of this {_what(found)} has ended "
                    f"({held.phase.value}): to run it again, give it another name",
                ) from None
            # taken before a crash, not marked yet: marked now
        self.source.took(found, spec.id)
        log.info("took in %s %s/%s as %s (team %s)", _what(found), namespace, name, spec.id, team)
        return spec.id

    @staticmethod
    def _team_of(namespace: str, queue: str, teams: Mapping[str, TeamName]) -> TeamName:
        team = teams.get(namespace)
        if team is None:
            known = ", ".join(sorted(teams)) or "none: the cluster has no teams yet"
            raise Refusal(
                "UnknownQueue",
                f"queue {queue!r} in namespace {namespace!r} is not a topoq queue: no team's "
                f"namespace is {namespace!r} (the teams' namespaces: {known})",
            )
        accepted = queues_of(namespace, team)
        if queue not in accepted:
            raise Refusal(
                "UnknownQueue",
                f"queue {queue!r} is not a topoq queue: team {team}'s jobs in {namespace!r} "
                f"name the queue {' or '.join(repr(q) for q in accepted)}",
            )
        return team

    def _cancel(self, job_id: JobId) -> None:
        try:
            job = self.store.job(job_id)
        except UnknownJob:
            return
        if job.phase.finished:
            return
        try:
            self.intake.cancel(job_id, actor=f"{ACTOR} (its Job was deleted)")
        except InvalidInputError:
            return  # it ended meanwhile


def _name(found: ClusterJob) -> str:
    metadata = found.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def _what(found: ClusterJob) -> str:
    return "pod group" if is_pod_group(found) else "Job"


def _readable(found: ClusterJob) -> bool:
    try:
        ranked_pods(found)
    except InvalidInputError:
        return False
    return True


def _check_gated(found: ClusterJob) -> None:
    """Every pod of a group waits for topoq: created with its scheduling gate, not bound."""
    for pod in pods_of(found):
        metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        gates = {gate.get("name") for gate in spec.get("schedulingGates") or ()}
        if PLACEMENT_GATE not in gates or spec.get("nodeName"):
            raise Refusal(
                "NotGated",
                f"pod {metadata.get('name', '')!r} was not created waiting for topoq: topoq "
                "places only pods created with spec.schedulingGates: [{name: "
                f"{PLACEMENT_GATE}}}] (it lifts the gate on the placed node); delete the pods "
                "and create them again with it",
            )


def group_source(found: ClusterJob, namespace: str, name: str) -> SourceObject:
    """What topoq keeps of a pod group: the uid of its first pod, and every pod (rank order)
    as it was created, to make them again for a later attempt."""
    ranked = [pod for _, pod in ranked_pods(found)]
    uid = (ranked[0].get("metadata") or {}).get("uid", "")
    manifests = tuple(json.dumps(kept_manifest(pod), sort_keys=True) for pod in ranked)
    return SourceObject("PodGroup", namespace, name, uid, manifests)
