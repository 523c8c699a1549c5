"""What the API works on: the store, the executor and the controller, with the lock that
serialises every change against the controller loop."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Protocol

from topoq.domain.decisions import Diagnostic
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.engine.controller import Controller
from topoq.engine.metrics import ControlPlaneMetrics
from topoq.engine.ports import Executor, Store
from topoq.store.records import JobEvent, PolicyVersion, TokenRecord


class ServiceStore(Store, Protocol):
    """The engine's store plus the queries and tokens the API needs (``SqlStore`` has them)."""

    def list_jobs(
        self,
        *,
        team: str | Collection[str] | None = None,
        phase: JobPhase | Collection[JobPhase] | None = None,
        user: str | None = None,
        limit: int = 100,
        offset: int = 0,
        newest_first: bool = True,
    ) -> list[JobView]: ...

    def count_jobs(
        self,
        *,
        team: str | Collection[str] | None = None,
        phase: JobPhase | Collection[JobPhase] | None = None,
        user: str | None = None,
    ) -> int: ...

    def diagnostic(self, job_id: JobId) -> Diagnostic | None: ...

    def job_events_between(
        self, start_s: float, end_s: float, *, team: str | None = None
    ) -> list[JobEvent]: ...

    def job_history(self, job_id: JobId) -> list[JobEvent]: ...

    def policy_versions(self) -> list[PolicyVersion]: ...

    def create_token(
        self, name: str, role: str, teams: Collection[str] = (), *, now: float | None = None
    ) -> tuple[str, TokenRecord]: ...

    def token_for(self, plaintext: str) -> TokenRecord | None: ...

    def cached_token(self, plaintext: str) -> TokenRecord | None:
        """``token_for``'s answer if it is remembered and still trusted, without I/O."""

    def revoke_token(self, token_id: str, *, now: float | None = None) -> TokenRecord: ...

    def tokens(self, *, include_revoked: bool = False) -> list[TokenRecord]: ...


@dataclass
class Service:
    store: ServiceStore
    executor: Executor
    controller: Controller
    wake: Callable[[], None] = lambda: None
    """Asks the controller loop for a step now (after a submission or a node change)."""
    lock: threading.RLock = field(default_factory=threading.RLock)
    metrics: ControlPlaneMetrics | None = None
    """What ``GET /metrics`` exposes (the controller feeds it)."""
    """Held by the controller loop around each step and by every change the API makes, so
    that a cancel is never overwritten by a cycle that read the job before it."""

    @property
    def clock(self) -> Callable[[], float]:
        return self.controller.clock
