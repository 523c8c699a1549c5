"""The controller process's log of policy changes: each new policy version, with who set it,
once the process's store sees it (an admin's ``PUT /policy`` or rollback lands in an API
process; the controller applies it at its next step)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from topoq.domain.governance import ClusterPolicy
from topoq.engine.event_log import policy_changed, write_event

log = logging.getLogger("topoq.engine.policy")


class KeptVersion(Protocol):
    @property
    def version(self) -> int: ...

    @property
    def actor(self) -> str: ...


class PolicyHistory(Protocol):
    def policy(self) -> ClusterPolicy | None: ...

    def policy_versions(self) -> Sequence[KeptVersion]: ...


class PolicyWatch:
    """``check`` (after each controller step) logs a ``policy_changed`` event per version
    newer than the last one it told. The store hands out the same policy object until a new
    version is read, so an unchanged policy costs no query."""

    def __init__(self, store: PolicyHistory) -> None:
        self.store = store
        self._policy = store.policy()
        self.version = latest_version(store.policy_versions())

    def check(self) -> None:
        policy = self.store.policy()
        if policy is self._policy:
            return
        self._policy = policy
        for kept in self.store.policy_versions():
            if kept.version > self.version:
                write_event(log, policy_changed(kept.version, kept.actor))
                self.version = kept.version


def latest_version(versions: Sequence[KeptVersion]) -> int:
    """The newest version's number (0: none)."""
    return versions[-1].version if versions else 0
