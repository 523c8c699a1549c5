"""The Kubernetes executor: each pod of an admitted gang becomes a Pod that topoq binds to its
placed node, and the API server's watches say what became of them (docs/executors.md).

It also starts the cluster's own suspended ``batch/v1`` Jobs that topoq took in (a third
informer watches the Jobs that name a queue, ``kueue.x-k8s.io/queue-name``): it offers the
ones not taken yet (``cluster_jobs``), marks them taken or says why not (``took``, ``refuse``:
a Warning Event), and starts, pins, and suspends them as docs/adr/0009-starting-kubernetes-jobs.md
says (``cluster_jobs``).

Threads: the informers (``informer.Informer``) list and watch every Pod and the chosen Nodes;
a small pool makes and deletes objects, at most ``qps`` requests a second (bursts of
``burst``) over ``concurrency`` connections; everything else — the gangs' state, the events —
happens in the caller's thread (the controller's), in ``poll``, ``inventory_changes``,
``cancel`` and ``stop``, which take the watches' changes off their queues first. No call
waits on a pod but ``cancel``, which returns once the pods are gone.
"""

from __future__ import annotations

import json
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from topoq.discovery.pod_groups import is_pod_group, pods_of
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobId
from topoq.domain.node import NodeSpec
from topoq.engine.ports import (
    ClusterJob,
    ExecutorEvent,
    ExecutorEventKind,
    GangLaunch,
)
from topoq.executors.environment import refuse_gpu_shares
from topoq.executors.kubernetes.client import client_from_kubeconfig
from topoq.executors.kubernetes.cluster_jobs import (
    CLEAR_START_TIME,
    QUEUE_LABEL,
    SUSPEND_PATCH,
    completion_index,
    free_rank,
    gated,
    job_outcome,
    owner_job,
    pin_patch,
    placed_nodes,
    start_patch,
    warning_event,
)
from topoq.executors.kubernetes.gangs import VANISHED_EXIT_CODE, GangPods, attempt_of, pod_seen
from topoq.executors.kubernetes.informer import RELISTED, Informer, drain, wait_for
from topoq.executors.kubernetes.inventory import inventory
from topoq.executors.kubernetes.manifests import (
    JOB_ID_ANNOTATION,
    PODS_ANNOTATION,
    GangManifests,
    PodOptions,
    gang_manifests,
    job_id_of,
    job_selector,
)
from topoq.executors.kubernetes.plugin import KUBERNETES_CAPABILITIES
from topoq.executors.kubernetes.pod_groups import (
    MakePod,
    PinPod,
    group_key,
    group_of_made,
    is_candidate,
    offered_group,
    start_steps,
    taken_by,
    versions,
)
from topoq.executors.local.executor import DEFAULT_POD_SCRIPT

log = logging.getLogger(__name__)

SYNC_TIMEOUT_S = 30.0
CANCEL_TIMEOUT_S = 60.0
NEW_NAMESPACE_WAIT_S = 15.0
"""How long a pod refused for want of its new namespace's ServiceAccount is asked again."""
DELETE_RETRY_S = 10.0
"""How long pods asked to go with no grace may stay before they are asked again."""
EVENTS_PER_GROUP = 16
"""A refused pod group's Warning Event goes on its first pods (by name), at most this many."""
PodKey = tuple[str, str]
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


def _default_workload() -> str:
    return DEFAULT_POD_SCRIPT.read_text()


class RateLimiter:
    """At most ``qps`` calls a second on average, ``burst`` at once (a token bucket)."""

    def __init__(self, qps: float, burst: int) -> None:
        self._rate, self._burst = qps, max(1, burst)
        self._tokens, self._at = float(self._burst), time.monotonic()
        self._lock = threading.Lock()

    def take(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
                self._at = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                wait = (1 - self._tokens) / self._rate
            time.sleep(wait)


@dataclass
class _Making:
    gang: GangPods
    halt: threading.Event
    future: Future[None] | None = None


class KubernetesExecutor:
    """Runs placed gangs as Pods on a Kubernetes cluster (``kubeconfig``, or ``api_client``)."""

    capabilities = KUBERNETES_CAPABILITIES

    def __init__(
        self,
        kubeconfig: Path | str | None = None,
        *,
        api_client: Any = None,
        pod_options: PodOptions | None = None,
        node_selector: str = "",
        qps: float = 50.0,
        burst: int = 100,
        concurrency: int = 8,
        stop_grace_s: float = 3.0,
        start_deadline_s: float = 300.0,
        create_namespaces: bool = True,
        cluster_jobs: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._api = (
            api_client
            if api_client is not None
            else client_from_kubeconfig(kubeconfig, connections=concurrency + 4)
        )
        self._core: Any = client.CoreV1Api(self._api)
        self._batch: Any = client.BatchV1Api(self._api)
        self._options = pod_options or PodOptions()
        self._default_workload = _default_workload()
        self._limiter = RateLimiter(qps, burst)
        self._pool = ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="topoq-k8s")
        self._stop_grace_s = stop_grace_s
        self._start_deadline_s = start_deadline_s
        self._create_namespaces = create_namespaces
        self._clock = clock
        self._pods: dict[PodKey, dict[str, Any]] = {}
        self._attempt_pods: dict[tuple[JobId, int], set[PodKey]] = {}
        """The pods topoq made, by job and attempt (so a gang's pods are found without going
        through every pod of the cluster)."""
        self._nodes: dict[str, dict[str, Any]] = {}
        self._gangs: dict[JobId, GangPods] = {}
        self._making: dict[JobId, _Making] = {}
        self._retired: list[GangPods] = []
        """Attempts replaced, cancelled or lost with a node: their pods are being deleted and
        nothing more is reported of them."""
        self._pending: list[ExecutorEvent] = []
        self._made: queue.SimpleQueue[tuple[JobId, int, str | None]] = queue.SimpleQueue()
        self._namespaces: set[str] = set()
        self._inventory_changed = True
        self._reported: list[NodeSpec] | None = None
        self._pod_informer = Informer("pods", self._core.list_pod_for_all_namespaces)
        self._node_informer = Informer("nodes", self._core.list_node, label_selector=node_selector)
        self._jobs: dict[PodKey, dict[str, Any]] = {}
        """The cluster's Jobs that name a queue, by namespace and name."""
        self._refused: dict[str, str] = {}
        """Jobs refused (uid → the resourceVersion refused): not offered again unless changed."""
        self._jobs_gone: list[JobId] = []
        self._groups: dict[PodKey, dict[str, dict[str, Any]]] = {}
        """The user's pods that name a queue and no controller owns (candidates for a pod
        group), by namespace and group, then by name."""
        self._refused_groups: dict[PodKey, frozenset[tuple[str, str]]] = {}
        """Pod groups refused, as their pods were then: not offered again unless changed."""
        self._group_of: dict[PodKey, PodKey] = {}
        self._gone_told: set[JobId] = set()
        """The jobs said gone (a group's pods go one by one: said once)."""
        self._pinning: dict[PodKey, tuple[float, int]] = {}
        """Gated pods of cluster Jobs being pinned: when it was asked, and the rank given."""
        self._job_informer = (
            Informer("jobs", self._batch.list_job_for_all_namespaces, label_selector=QUEUE_LABEL)
            if cluster_jobs
            else None
        )
        informers = [self._pod_informer, self._node_informer, *self._job_informers()]
        for informer in informers:
            informer.start()
        if not wait_for(informers, SYNC_TIMEOUT_S):
            self.close()
            raise InvalidInputError(
                "could not list pods, nodes and jobs from the API server within "
                f"{SYNC_TIMEOUT_S:g} s",
                where="executor kubernetes",
                hint="check the kubeconfig's server and that its user may list and watch "
                "pods, nodes and jobs (deploy/kubernetes/rbac.yaml)",
            )
        self._drain()

    # --- the protocol -----------------------------------------------------------------
    def start(self, launch: GangLaunch) -> None:
        refuse_gpu_shares(launch.job.workload, self.capabilities)
        source = launch.job.source
        if source is not None and source.kind == "Job":
            self._start_cluster_job(launch)
            return
        if source is not None and source.kind == "PodGroup":
            self._start_pod_group(launch)
            return
        manifests = gang_manifests(launch, self._options, self._default_workload)
        job = launch.job.id
        self._drain()
        self._retire(job, grace_s=0.0, wait=False)  # a replaced attempt: start returns at once
        gang = GangPods(
            job,
            launch.attempt,
            manifests.namespace,
            expected=len(manifests.pods),
            since=self._clock(),
            nodes=frozenset(pod.plan.node for pod in manifests.pods),
        )
        for key in self._pods_of(gang):  # made before a crash: found, not made again
            gang.saw(pod_seen(self._pods[key]))
        self._gangs[job] = gang
        making = _Making(gang, threading.Event())
        making.future = self._pool.submit(self._make, manifests, making.halt, job, gang.attempt)
        self._making[job] = making

    def _start_cluster_job(self, launch: GangLaunch) -> None:
        source = launch.job.source
        assert source is not None
        patch, nodes = start_patch(launch)
        job = launch.job.id
        self._drain()
        self._retire(job, grace_s=0.0, wait=False)
        gang = GangPods(
            job,
            launch.attempt,
            source.namespace,
            expected=len(nodes),
            since=self._clock(),
            nodes=frozenset(nodes),
            source=source.name,
            placed=nodes,
        )
        for key in self._pods_of(gang):  # started before a crash
            gang.saw(pod_seen(self._pods[key]))
        self._gangs[job] = gang
        making = _Making(gang, threading.Event())
        making.future = self._pool.submit(
            self._unsuspend, source.namespace, source.name, patch, job, launch.attempt
        )
        self._making[job] = making

    def _start_pod_group(self, launch: GangLaunch) -> None:
        source = launch.job.source
        assert source is not None
        job = launch.job.id
        self._drain()
        self._retire(job, grace_s=0.0, wait=False)
        gang = GangPods(
            job, launch.attempt, source.namespace, expected=len(source.manifests), since=0.0
        )
        made = [self._pods[key] for key in self._pods_of(gang)]  # started before a crash
        ranks = frozenset(pod_seen(pod).rank for pod in made)
        live = self._groups.get((source.namespace, source.name), {})
        nodes, steps = start_steps(launch, source.namespace, live, ranks)
        gang.since, gang.nodes = self._clock(), frozenset(nodes)
        for pod in made:
            gang.saw(pod_seen(pod))
        self._gangs[job] = gang
        gone = [step.replaces for step in steps if isinstance(step, MakePod)]
        if launch.attempt == 1 and gone:  # deleted by the user before its first start
            gang.creating = False
            gang.create_error = f"pod {source.namespace}/{gone[0]} of the group was deleted"
            self._tell_gone(job)
            return
        making = _Making(gang, threading.Event())
        making.future = self._pool.submit(
            self._make_group, source.namespace, steps, making.halt, job, launch.attempt
        )
        self._making[job] = making

    def cancel(self, job: JobId) -> None:
        self.cancel_all([job])

    def cancel_all(self, jobs: Sequence[JobId]) -> None:
        """Every gang's pods are asked to go at once (with the stop grace, then without), and
        the call returns once none is left."""
        self._drain()
        gangs = [gang for job in jobs if (gang := self._gangs.get(job)) is not None]
        if not gangs:
            return
        for gang in gangs:
            self._halt(gang.job)
            self._retire(gang.job, grace_s=self._stop_grace_s, wait=False)
        deadline = time.monotonic() + self._stop_grace_s
        while any(self._pods_of(g) for g in gangs) and time.monotonic() < deadline:
            time.sleep(0.05)
            self._drain()
        for gang in gangs:
            if self._pods_of(gang):
                self._submit_delete(gang, 0.0)
        deadline = time.monotonic() + CANCEL_TIMEOUT_S
        while any(self._pods_of(g) for g in gangs) and time.monotonic() < deadline:
            time.sleep(0.05)
            self._drain()

    def stop(self, job: JobId, grace_s: float) -> None:
        self._drain()
        gang = self._gangs.get(job)
        if gang is None or gang.ended:
            nothing = GangPods(job, 0, "", expected=0, since=self._clock(), creating=False)
            nothing.stop_deadline = self._clock()
            self._gangs[job] = nothing
            return
        if gang.stop_deadline is not None:
            return  # a second stop keeps the first deadline
        gang.stop_deadline = self._clock() + grace_s
        self._halt(job, wait=False)
        self._submit_delete(gang, grace_s)

    def poll(self) -> list[ExecutorEvent]:
        self._drain()
        now = self._clock()
        events, self._pending = self._pending, []
        for job, gang in list(self._gangs.items()):
            if gang.source is not None:
                self._follow_cluster_job(gang, now)
            found = gang.events(now, self._start_deadline_s)
            events.extend(found)
            if gang.source is not None and gang.outcome is not None:
                continue  # the Job ended by itself: its pods are its own
            if any(e.kind is ExecutorEventKind.EXITED and e.exit_code for e in found):
                self._submit_delete(gang, self._stop_grace_s)  # a gang fails as a whole
            if gang.stop_deadline is not None:
                if gang.stop_reported:
                    del self._gangs[job]
                    self._making.pop(job, None)
                elif now >= gang.stop_deadline and not gang.forced and self._pods_of(gang):
                    gang.forced = True
                    self._submit_delete(gang, 0.0)  # past its grace: killed
        self._retired = [gang for gang in self._retired if self._pods_of(gang)]
        for gang in [*self._retired, *(g for g in self._gangs.values() if g.forced)]:
            if self._pods_of(gang) and now - (gang.delete_asked_at or now) > DELETE_RETRY_S:
                self._submit_delete(gang, 0.0)  # the last delete failed or did not take
        return events

    def recover_node(self, node: str) -> None:
        """Nothing to undo: ``fail_node`` changed no object of the cluster."""

    def fail_node(self, node: str) -> None:
        self._drain()
        now = self._clock()
        self._pending.append(ExecutorEvent(ExecutorEventKind.NODE_LOST, now, node=node))
        for job, gang in list(self._gangs.items()):
            if node in gang.nodes and not gang.ended and gang.stop_deadline is None:
                self._pending.append(
                    ExecutorEvent(
                        ExecutorEventKind.NODE_LOST, now, job=job, attempt=gang.attempt, node=node
                    )
                )
                self._halt(job, wait=False)
                self._retire(job, grace_s=0.0)

    def logs(self, job: JobId, pod: int | None = None) -> str:
        return ""  # not captured: read them with kubectl logs (docs/executors.md)

    def close(self) -> None:
        """Stop watching and making; the pods run on (a restarted executor adopts them)."""
        for making in self._making.values():
            making.halt.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
        for informer in (self._pod_informer, self._node_informer, *self._job_informers()):
            informer.stop()

    def __enter__(self) -> KubernetesExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- beyond running gangs ---------------------------------------------------------
    @property
    def pod_relists(self) -> int:
        """How often the pods were listed anew (at start, after 410 Gone or a lost watch)."""
        return self._pod_informer.relists

    def inventory_changes(self) -> list[NodeSpec] | None:
        """The nodes when they changed since the last call (the first call: always)."""
        self._drain()
        if not self._inventory_changed:
            return None
        self._inventory_changed = False
        nodes = inventory(self._nodes.values(), self._pods.values())
        if nodes == self._reported:
            return None
        self._reported = nodes
        return nodes

    def adopt(self, holding: Mapping[JobId, int]) -> set[JobId]:
        """After a restart: keep watching the gangs of ``holding`` (job → attempt) whose pods
        are all still there; delete every other pod topoq made (of finished, requeued or
        unknown jobs, of other attempts, or of a gang not whole). The jobs kept."""
        self._drain()
        found: dict[tuple[JobId, int], list[dict[str, Any]]] = {}
        for pod in self._pods.values():
            job = job_id_of(pod)
            if job is not None and job not in self._gangs:
                found.setdefault((job, attempt_of(pod)), []).append(pod)
        kept = set()
        now = self._clock()
        for (job, attempt), pods in sorted(found.items()):
            metadata = pods[0]["metadata"]
            expected = int((metadata.get("annotations") or {}).get(PODS_ANNOTATION, 0))
            seen = [pod_seen(pod) for pod in pods]
            gang = GangPods(
                job,
                attempt,
                metadata.get("namespace", ""),
                expected=expected,
                since=now,
                nodes=frozenset(p.node for p in seen if p.node),
                creating=False,
                source=owner_job(pods[0]) if placed_nodes(pods[0]) else None,
                placed=placed_nodes(pods[0]),
            )
            for one in seen:
                gang.saw(one)
            if gang.source is not None:  # a cluster Job's: whole while the Job runs it
                gang.nodes = frozenset(gang.placed)
                live = [p for p in seen if p.phase != "Failed" and not p.deleting]
                whole = len(live) == expected
            else:
                whole = len(seen) == expected and not any(p.deleting for p in seen)
            if holding.get(job) == attempt and whole:
                self._gangs[job] = gang
                kept.add(job)
            else:
                self._retired.append(gang)
                self._submit_delete(gang, 0.0)
        return kept

    # --- the cluster's own Jobs -------------------------------------------------------
    def cluster_jobs(self) -> list[ClusterJob]:
        """The cluster's Jobs that name a queue, and its groups of plain Pods that do (each a
        ``v1`` ``List`` of its pods, once they are all there), that topoq has neither taken
        (annotation ``topoq.io/job-id``) nor refused as they are now, oldest first."""
        self._drain()
        found: list[ClusterJob] = []
        if self._job_informer is None:  # the cluster's own objects are left alone
            return found
        for job in self._jobs.values():
            metadata = job.get("metadata") or {}
            if (metadata.get("annotations") or {}).get(JOB_ID_ANNOTATION) is not None:
                continue
            if metadata.get("deletionTimestamp") is not None:
                continue
            if self._refused.get(metadata.get("uid", "")) == metadata.get("resourceVersion"):
                continue
            found.append(job)
        for key, pods in self._groups.items():
            group = offered_group(key, list(pods.values()))
            if group is not None and self._refused_groups.get(key) != versions(group):
                found.append(group)
        found.sort(key=lambda j: (j["metadata"].get("creationTimestamp") or "", _key_of(j)))
        return found

    def took(self, job: ClusterJob, job_id: JobId) -> None:
        """Mark the cluster's ``job`` as taken in as topoq's ``job_id`` (so that it is never
        taken twice, also after a restart)."""
        namespace, name = _key_of(job)
        patch = {"metadata": {"annotations": {JOB_ID_ANNOTATION: job_id}}}
        if is_pod_group(job):  # each pod of the group, by the pool (a group may be large)
            members = self._groups.get((namespace, name), {})
            for pod in pods_of(job):
                if taken_by(pod) is None:
                    pod_name = pod["metadata"]["name"]
                    _mark_taken(members.get(pod_name), job_id)
                    self._pool.submit(self._mark_pod, namespace, pod_name, patch)
            return
        self._limiter.take()
        _send(self._batch.patch_namespaced_job, name, namespace, patch, _content_type=MERGE_PATCH)
        _mark_taken(self._jobs.get((namespace, name)), job_id)

    def _mark_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """Annotate a taken pod (a retry after a crash or a failure: the group is offered
        again, found taken in the store, and marked again)."""
        self._limiter.take()
        try:
            _send(
                self._core.patch_namespaced_pod, name, namespace, patch, _content_type=MERGE_PATCH
            )
        except Exception as error:  # the pod deleted meanwhile, the API server away
            log.warning("could not mark pod %s/%s taken: %s", namespace, name, error)

    def refuse(self, job: ClusterJob, reason: str, message: str) -> None:
        """Say on the cluster's ``job`` (a Warning Event) why topoq does not take it; it is
        not offered again until it changes."""
        metadata = job.get("metadata") or {}
        if is_pod_group(job):  # said on every pod of the group
            self._refused_groups[_key_of(job)] = versions(job)
            told = pods_of(job)[:EVENTS_PER_GROUP]
        else:
            self._refused[metadata.get("uid", "")] = metadata.get("resourceVersion", "")
            told = [dict(job)]
        for found in told:
            event = warning_event(found, reason, message, self._clock())
            self._limiter.take()
            try:
                _send(self._core.create_namespaced_event, event["metadata"]["namespace"], event)
            except ApiException as error:
                what = found.get("kind", "Job")
                log.warning("could not tell %s %s/%s: %s", what, *_key_of(found), _api_error(error))

    def cluster_jobs_gone(self) -> list[JobId]:
        """The topoq jobs whose cluster Job was deleted since the last call, or a pod of whose
        pod group the user deleted (before it started, or while it ran)."""
        self._drain()
        gone, self._jobs_gone = self._jobs_gone, []
        return gone

    def _job_informers(self) -> list[Informer]:
        return [self._job_informer] if self._job_informer is not None else []

    def _follow_cluster_job(self, gang: GangPods, now: float) -> None:
        """A started Job's gang: its outcome from the Job, and each new gated pod pinned."""
        if gang.ended or gang.stop_deadline is not None or gang.creating:
            return
        found = self._jobs.get((gang.namespace, gang.source or ""))
        if found is None:
            gang.outcome = (VANISHED_EXIT_CODE, f"Job {gang.namespace}/{gang.source} was deleted")
            return
        gang.outcome = job_outcome(found)
        if gang.outcome is not None:
            return
        keys = self._pods_of(gang)
        taken = []
        for key in keys:
            pod = self._pods[key]
            seen = pod_seen(pod)
            if seen.phase == "Failed" or seen.deleting:
                continue
            if key in self._pinning:
                taken.append(self._pinning[key][1])
            elif seen.rank >= 0:
                taken.append(seen.rank)
        for key in sorted(keys):
            pod = self._pods[key]
            if not gated(pod) or pod_seen(pod).deleting:
                continue
            asked = self._pinning.get(key)
            if asked is not None and now - asked[0] < DELETE_RETRY_S:
                continue
            index = completion_index(pod)
            rank = index if index is not None else free_rank(taken, len(gang.placed))
            if rank is None or rank >= len(gang.placed):
                log.warning("pod %s/%s of %s has no rank to take", *key, gang.job)
                continue
            taken.append(rank)
            self._pinning[key] = (now, rank)
            self._pool.submit(self._pin, key, pin_patch(pod, gang.placed[rank], rank))

    def _pin(self, key: PodKey, patch: list[dict[str, Any]]) -> None:
        namespace, name = key
        self._limiter.take()
        try:
            _send(self._core.patch_namespaced_pod, name, namespace, patch, _content_type=JSON_PATCH)
        except ApiException as error:
            log.warning("could not pin pod %s/%s: %s", namespace, name, _api_error(error))
        except Exception as error:  # the API server unreachable: asked again (``poll``)
            log.warning("could not pin pod %s/%s: %s", namespace, name, error)

    def _unsuspend(
        self, namespace: str, name: str, patch: dict[str, Any], job: JobId, attempt: int
    ) -> None:
        self._making_done(job, attempt, partial(self._unsuspend_now, namespace, name, patch))

    def _unsuspend_now(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self._limiter.take()
        found = self._batch.read_namespaced_job(name, namespace)
        if found.status is not None and found.status.start_time is not None:
            # started before: its template is patchable again only without a start time
            self._limiter.take()
            _send(
                self._batch.patch_namespaced_job_status,
                name,
                namespace,
                CLEAR_START_TIME,
                _content_type=MERGE_PATCH,
            )
        self._limiter.take()
        _send(
            self._batch.patch_namespaced_job,
            name,
            namespace,
            patch,
            _content_type=STRATEGIC_MERGE,
        )

    def _suspend(self, gang: GangPods) -> None:
        self._limiter.take()
        try:
            _send(
                self._batch.patch_namespaced_job,
                gang.source,
                gang.namespace,
                SUSPEND_PATCH,
                _content_type=MERGE_PATCH,
            )
        except ApiException as error:
            if error.status != 404:  # a Job deleted has no pods to stop
                raise

    # --- making and deleting ----------------------------------------------------------
    def _making_done(self, job: JobId, attempt: int, work: Callable[[], None]) -> None:
        """Do ``work`` (in the pool), then say the attempt is made, or why it could not be."""
        error = None
        try:
            work()
        except ApiException as failure:
            error = _api_error(failure)
        except Exception as failure:  # the API server unreachable, say
            error = f"{type(failure).__name__}: {failure}"
        self._made.put((job, attempt, error))

    def _make(
        self, manifests: GangManifests, halt: threading.Event, job: JobId, attempt: int
    ) -> None:
        self._making_done(job, attempt, partial(self._make_now, manifests, halt))

    def _make_now(self, manifests: GangManifests, halt: threading.Event) -> None:
        self._ensure_namespace(manifests.namespace)
        self._create(
            partial(
                _send,
                self._core.create_namespaced_service,
                manifests.namespace,
                manifests.service,
            )
        )
        for pod in manifests.pods:
            if halt.is_set():
                break
            self._create(
                partial(_send, self._core.create_namespaced_pod, manifests.namespace, pod.manifest)
            )
            if halt.is_set():
                break
            self._bind(manifests.namespace, pod.name, pod.plan.node)

    def _make_group(
        self,
        namespace: str,
        steps: Sequence[PinPod | MakePod],
        halt: threading.Event,
        job: JobId,
        attempt: int,
    ) -> None:
        self._making_done(job, attempt, partial(self._make_group_now, namespace, steps, halt))

    def _make_group_now(
        self, namespace: str, steps: Sequence[PinPod | MakePod], halt: threading.Event
    ) -> None:
        for step in steps:
            if halt.is_set():
                return
            if isinstance(step, PinPod):
                self._limiter.take()
                _send(
                    self._core.patch_namespaced_pod,
                    step.key[1],
                    namespace,
                    step.patch,
                    _content_type=JSON_PATCH,
                )
            else:
                self._create(
                    partial(_send, self._core.create_namespaced_pod, namespace, step.manifest)
                )

    def _create(self, call: Callable[[], Any]) -> None:
        deadline = time.monotonic() + NEW_NAMESPACE_WAIT_S
        while True:
            self._limiter.take()
            try:
                call()
                return
            except ApiException as error:
                if error.status == 409:  # made before (a retry after a crash): fine
                    return
                if not (_no_service_account_yet(error) and time.monotonic() < deadline):
                    raise
            time.sleep(0.2)  # a namespace just made: its default ServiceAccount comes soon

    def _bind(self, namespace: str, name: str, node: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self._limiter.take()
        try:
            # the server answers with a Status, not a Binding: read raw (docs/executors.md)
            _send(self._core.create_namespaced_pod_binding, name, namespace, body)
        except ApiException as error:
            if error.status != 409:  # bound before (a retry after a crash)
                raise

    def _ensure_namespace(self, namespace: str) -> None:
        if namespace in self._namespaces or not self._create_namespaces:
            return
        self._limiter.take()
        try:
            self._core.read_namespace(namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            self._create(lambda: self._core.create_namespace({"metadata": {"name": namespace}}))
        self._namespaces.add(namespace)

    def _submit_delete(self, gang: GangPods, grace_s: float) -> None:
        gang.delete_asked_at = self._clock()
        self._pool.submit(self._delete_pods, gang, grace_s)

    def _delete_pods(self, gang: GangPods, grace_s: float) -> None:
        selector = job_selector(gang.job, gang.attempt)
        seconds = math.ceil(grace_s)
        try:
            if gang.source is not None:
                self._suspend(gang)  # else the Job controller makes them again
            self._limiter.take()
            _send(
                self._core.delete_collection_namespaced_pod,
                gang.namespace,
                label_selector=selector,
                grace_period_seconds=seconds,
            )
            self._limiter.take()
            _send(
                self._core.delete_collection_namespaced_service,
                gang.namespace,
                label_selector=selector,
            )
        except ApiException as error:
            if error.status != 404:
                log.warning("could not delete the pods of %s: %s", gang.job, _api_error(error))
        except Exception as error:  # the API server unreachable: asked again (``poll``)
            log.warning("could not delete the pods of %s: %s", gang.job, error)

    def _halt(self, job: JobId, *, wait: bool = True) -> None:
        making = self._making.get(job)
        if making is None:
            return
        making.halt.set()
        if wait and making.future is not None:
            making.future.result()
            self._drain()

    def _retire(self, job: JobId, *, grace_s: float, wait: bool = True) -> None:
        """The job's running attempt is gone for the engine: its pods are deleted (by the
        pool when not ``wait``) and nothing more is said of it."""
        gang = self._gangs.pop(job, None)
        if gang is None:
            return
        self._halt(job, wait=False)
        gang.ended = True
        self._retired.append(gang)
        if not wait:
            self._submit_delete(gang, grace_s)
            return
        gang.delete_asked_at = self._clock()
        self._delete_pods(gang, grace_s)

    # --- what the watches said --------------------------------------------------------
    def _drain(self) -> None:
        for job, attempt, error in drain(self._made):
            gang = self._gangs.get(job)
            if gang is not None and gang.attempt == attempt:
                gang.creating = False
                gang.create_error = error
        for kind, found in drain(self._pod_informer.changes):
            if kind == RELISTED:
                self._relisted_pods(found)
                continue
            metadata = found.get("metadata") or {}
            key = (metadata.get("namespace", ""), metadata.get("name", ""))
            if kind == "DELETED":
                self._pods.pop(key, None)
            else:
                self._pods[key] = found
            self._index(key, found, deleted=kind == "DELETED")
            self._index_group(key, found, deleted=kind == "DELETED")
            self._pod_changed(found, deleted=kind == "DELETED")
        if self._job_informer is not None:
            for kind, found in drain(self._job_informer.changes):
                self._job_changed(kind, found)
        for kind, found in drain(self._node_informer.changes):
            self._inventory_changed = True
            if kind == RELISTED:
                self._nodes = {n["metadata"]["name"]: n for n in found}
            elif kind == "DELETED":
                self._nodes.pop(found["metadata"]["name"], None)
            else:
                self._nodes[found["metadata"]["name"]] = found

    def _job_changed(self, kind: str, found: Any) -> None:
        if kind == RELISTED:
            before = self._jobs
            self._jobs = {_key_of(job): job for job in found}
            for key, job in before.items():
                if key not in self._jobs:
                    self._job_deleted(job)
            return
        key = _key_of(found)
        if kind == "DELETED":
            self._jobs.pop(key, None)
            self._job_deleted(found)
        else:
            self._jobs[key] = found

    def _job_deleted(self, job: Mapping[str, Any]) -> None:
        taken = ((job.get("metadata") or {}).get("annotations") or {}).get(JOB_ID_ANNOTATION)
        if taken is not None:
            self._jobs_gone.append(JobId(taken))

    def _relisted_pods(self, pods: Sequence[dict[str, Any]]) -> None:
        before = self._pods
        self._pods = {(p["metadata"].get("namespace", ""), p["metadata"]["name"]): p for p in pods}
        self._attempt_pods, self._groups, self._group_of = {}, {}, {}
        for key, pod in self._pods.items():
            self._index(key, pod, deleted=False)
            self._index_group(key, pod, deleted=False)
        for key, pod in before.items():
            if key not in self._pods:
                self._pod_changed(pod, deleted=True)
        for pod in self._pods.values():
            self._pod_changed(pod, deleted=False)

    def _pod_changed(self, pod: dict[str, Any], *, deleted: bool) -> None:
        if self._pinning:
            metadata = pod.get("metadata") or {}
            key = (metadata.get("namespace", ""), metadata.get("name", ""))
            if key in self._pinning and (deleted or not gated(pod)):
                del self._pinning[key]
        job = job_id_of(pod)
        going = deleted or bool((pod.get("metadata") or {}).get("deletionTimestamp"))
        if job is None:
            if (pod.get("spec") or {}).get("nodeName"):
                self._inventory_changed = True  # what other pods use changed
            taken = taken_by(pod)
            if going and taken is not None and is_candidate(pod) and self._job_informer:
                self._tell_gone(JobId(taken))  # a pod group deleted before it started
            return
        gang = self._gangs.get(job)
        if gang is None or not self._belongs(pod, gang):
            return
        if going and group_of_made(pod) is not None and _unasked(gang):
            self._tell_gone(job)  # the user deleted a pod of a running pod group
        if deleted:
            gang.gone(pod["metadata"]["name"])
        else:
            gang.saw(pod_seen(pod))

    def _tell_gone(self, job: JobId) -> None:
        if job not in self._gone_told:
            self._gone_told.add(job)
            self._jobs_gone.append(job)

    def _index_group(self, key: PodKey, pod: Mapping[str, Any], *, deleted: bool) -> None:
        before = self._group_of.pop(key, None)
        if before is not None:
            members = self._groups.get(before, {})
            members.pop(key[1], None)
            if not members:
                self._groups.pop(before, None)
        if not deleted and is_candidate(pod):
            group = group_key(pod)
            self._group_of[key] = group
            self._groups.setdefault(group, {})[key[1]] = dict(pod)

    @staticmethod
    def _belongs(pod: Mapping[str, Any], gang: GangPods) -> bool:
        return attempt_of(pod) == gang.attempt and job_id_of(pod) == gang.job

    def _index(self, key: PodKey, pod: Mapping[str, Any], *, deleted: bool) -> None:
        job = job_id_of(pod)
        if job is None:
            return
        attempt = (job, attempt_of(pod))
        if deleted:
            keys = self._attempt_pods.get(attempt)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._attempt_pods[attempt]
        else:
            self._attempt_pods.setdefault(attempt, set()).add(key)

    def _pods_of(self, gang: GangPods) -> list[PodKey]:
        found = self._attempt_pods.get((gang.job, gang.attempt), ())
        return [key for key in found if key[0] == gang.namespace]


def _send(call: Callable[..., Any], *args: Any, **options: Any) -> bytes:
    """One request, its answer read raw (no model objects) and its connection given back to
    the pool: a raw answer left unread keeps its connection, and every later request would
    open a new one (a TLS handshake each)."""
    response = call(*args, _preload_content=False, **options)
    try:
        return bytes(response.data)
    finally:
        response.release_conn()


def _unasked(gang: GangPods) -> bool:
    """The gang runs and topoq never asked its pods to go (so the user did)."""
    return not gang.ended and gang.stop_deadline is None and gang.delete_asked_at is None


def _mark_taken(found: dict[str, Any] | None, job_id: JobId) -> None:
    """Taken, as topoq's copy says until the watch shows it."""
    if found is not None:
        annotations = found.setdefault("metadata", {}).setdefault("annotations", {})
        annotations[JOB_ID_ANNOTATION] = job_id


def _no_service_account_yet(error: ApiException) -> bool:
    """The API server refused a pod because its namespace's ServiceAccount is not there yet
    (the controller-manager makes ``default`` just after the namespace)."""
    return error.status == 403 and "serviceaccount" in (error.body or "").lower()


def _key_of(job: Mapping[str, Any]) -> PodKey:
    metadata = job.get("metadata") or {}
    return metadata.get("namespace", ""), metadata.get("name", "")


def _api_error(error: ApiException) -> str:
    try:
        message = json.loads(error.body or "{}").get("message")
    except ValueError:
        message = None
    return f"{error.status} {error.reason}: {message or error.body or ''}".strip()
