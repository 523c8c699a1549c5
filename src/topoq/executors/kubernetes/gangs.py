"""What the pods of one attempt say about the gang (pure): the Kubernetes executor keeps each
attempt's pods as the API server last showed them and asks ``GangPods.events`` what happened.

- **STARTED** once every pod of the attempt runs (Running, or already Succeeded);
- **EXITED 0** once every pod Succeeded;
- **EXITED** with the first failed pod's exit code (1 when it has none, e.g. the kubelet
  rejected it: ``OutOfnvidia.com/gpu``) and its reason; or 137 for a pod that went away
  while nobody asked for it (deleted by someone else, evicted); or 1 for a pod that did not
  start within the start deadline (an image that cannot be pulled, say);
- **STOPPED** once a stop was asked and none of the attempt's pods is left;
- nothing more after the gang ended.

The gang of a cluster's Job (``source``; docs/adr/0009-starting-kubernetes-jobs.md) ends by
the Job's own conditions instead (``outcome``): the Job controller replaces a pod that failed
or went away within the Job's ``backoffLimit``, and topoq pins the replacement to its rank's
node again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from topoq.domain.job import JobId
from topoq.engine.ports import ExecutorEvent, ExecutorEventKind
from topoq.executors.kubernetes.manifests import ATTEMPT_LABEL, NODE_ANNOTATION, RANK_LABEL

VANISHED_EXIT_CODE = 137
"""A pod that went away unasked ends its gang as a killed process would."""
NO_EXIT_CODE = 1


@dataclass(frozen=True)
class PodSeen:
    """One pod as the API server last showed it."""

    name: str
    rank: int
    phase: str
    node: str | None
    deleting: bool
    exit_code: int | None
    reason: str

    @property
    def running(self) -> bool:
        return self.phase in ("Running", "Succeeded")


def pod_seen(pod: Mapping[str, Any]) -> PodSeen:
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    labels = metadata.get("labels") or {}
    exit_code, reason = None, status.get("reason") or ""
    message = status.get("message") or ""
    for container in status.get("containerStatuses") or ():
        state = container.get("state") or {}
        terminated = state.get("terminated")
        if terminated is not None and (
            exit_code is None or (exit_code == 0 and terminated.get("exitCode"))
        ):
            exit_code = int(terminated.get("exitCode", NO_EXIT_CODE))
            reason = terminated.get("reason") or reason
            message = terminated.get("message") or message
        waiting = state.get("waiting")
        if waiting is not None and not reason:
            reason = waiting.get("reason") or ""
            message = waiting.get("message") or message
    said = ": ".join(part for part in (reason, message) if part)
    return PodSeen(
        name=metadata.get("name", ""),
        rank=int(labels.get(RANK_LABEL, -1)),
        phase=status.get("phase") or "Pending",
        node=spec.get("nodeName") or (metadata.get("annotations") or {}).get(NODE_ANNOTATION),
        deleting=metadata.get("deletionTimestamp") is not None,
        exit_code=exit_code,
        reason=said,
    )


def attempt_of(pod: Mapping[str, Any]) -> int:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    try:
        return int(labels.get(ATTEMPT_LABEL, 0))
    except ValueError:
        return 0


@dataclass
class GangPods:
    """One attempt's pods, and what has been reported of it."""

    job: JobId
    attempt: int
    namespace: str
    expected: int
    """How many pods the attempt has."""
    since: float
    """When the attempt was started (or adopted)."""
    nodes: frozenset[str] = frozenset()
    pods: dict[str, PodSeen] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    """Pods that have shown up at least once."""
    creating: bool = True
    """Pods are still being made (a pod not seen yet is not missing)."""
    create_error: str | None = None
    started: bool = False
    ended: bool = False
    stop_deadline: float | None = None
    """Set once a stop (or a cancel) was asked: pods going away are expected."""
    stop_reported: bool = False
    forced: bool = False
    delete_asked_at: float | None = None
    """When its pods were last asked to go (so that a delete that failed is asked again)."""
    source: str | None = None
    """The name of the cluster's Job this gang starts (in ``namespace``), if it is one."""
    placed: tuple[str, ...] = ()
    """The placed nodes by rank (a cluster Job's pods are pinned to them as they come)."""
    outcome: tuple[int, str] | None = None
    """How the cluster's Job ended (exit code, message), once it did."""

    def saw(self, pod: PodSeen) -> None:
        self.pods[pod.name] = pod
        self.seen.add(pod.name)

    def gone(self, name: str) -> None:
        self.pods.pop(name, None)
        self.seen.add(name)

    def events(self, now: float, start_deadline_s: float) -> list[ExecutorEvent]:
        """What happened since the last call (the gang's state moves on with it)."""
        if self.stop_deadline is not None:
            if not self.stop_reported and not self.creating and not self._holding():
                self.stop_reported = self.ended = True
                return [self._event(ExecutorEventKind.STOPPED, now)]
            return []
        if self.ended:
            return []
        if self.create_error is not None:
            self.ended = True
            what = (
                f"could not start Job {self.namespace}/{self.source}"
                if self.source is not None
                else "could not make its pods"
            )
            return [self._exited(now, NO_EXIT_CODE, f"{what}: {self.create_error}")]
        if self.source is not None:
            return self._job_events(now, start_deadline_s)
        found: list[ExecutorEvent] = []
        pods = sorted(self.pods.values(), key=lambda pod: pod.rank)
        failed = next((pod for pod in pods if pod.phase == "Failed"), None)
        vanished = sorted(self.seen - set(self.pods))
        if not self.started and len(pods) == self.expected and all(p.running for p in pods):
            self.started = True
            found.append(self._event(ExecutorEventKind.STARTED, now))
        if failed is not None:
            self.ended = True
            code = failed.exit_code if failed.exit_code not in (None, 0) else NO_EXIT_CODE
            what = f"pod {failed.name} (rank {failed.rank}) failed"
            found.append(
                self._exited(now, code, f"{what}: {failed.reason}" if failed.reason else what)
            )
        elif vanished and not self.creating:
            self.ended = True
            found.append(
                self._exited(now, VANISHED_EXIT_CODE, f"pod {vanished[0]} was deleted or evicted")
            )
        elif len(pods) == self.expected and all(p.phase == "Succeeded" for p in pods):
            self.ended = True
            found.append(self._exited(now, 0, "every pod succeeded"))
        elif not self.started and now - self.since > start_deadline_s:
            self.ended = True
            waiting = next((p for p in pods if not p.running), None)
            why = f" ({waiting.name}: {waiting.reason})" if waiting and waiting.reason else ""
            found.append(
                self._exited(
                    now, NO_EXIT_CODE, f"its pods did not start within {start_deadline_s:g} s{why}"
                )
            )
        return found

    def _holding(self) -> bool:
        """Some pod of the attempt may still hold its node (a cluster Job keeps the pods that
        ended, which hold nothing)."""
        if self.source is None:
            return bool(self.pods)
        return any(p.phase not in ("Succeeded", "Failed") for p in self.pods.values())

    def _job_events(self, now: float, start_deadline_s: float) -> list[ExecutorEvent]:
        found: list[ExecutorEvent] = []
        live = [p for p in self.pods.values() if not p.deleting and p.phase != "Failed"]
        if not self.started and len(live) >= self.expected and all(p.running for p in live):
            self.started = True
            found.append(self._event(ExecutorEventKind.STARTED, now))
        if self.outcome is not None:
            self.ended = True
            found.append(self._exited(now, *self.outcome))
        elif not self.started and now - self.since > start_deadline_s:
            self.ended = True
            waiting = next((p for p in sorted(live, key=lambda p: p.rank) if not p.running), None)
            why = f" ({waiting.name}: {waiting.reason})" if waiting and waiting.reason else ""
            found.append(
                self._exited(
                    now, NO_EXIT_CODE, f"its pods did not start within {start_deadline_s:g} s{why}"
                )
            )
        return found

    def _event(self, kind: ExecutorEventKind, now: float) -> ExecutorEvent:
        return ExecutorEvent(kind, now, job=self.job, attempt=self.attempt)

    def _exited(self, now: float, code: int, message: str) -> ExecutorEvent:
        return ExecutorEvent(
            ExecutorEventKind.EXITED,
            now,
            job=self.job,
            attempt=self.attempt,
            exit_code=code,
            message=message,
        )
