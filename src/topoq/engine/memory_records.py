"""What a store keeps besides jobs — policy versions, nodes, fair-share usage, the audit log —
in memory: the part the test store (``topoq.testing.fakes.MemoryStore``) and the simulated
control plane's store (``topoq.sim.controlled.ReplayStore``) share. No durability."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from topoq.core.fair_share import TeamUsage
from topoq.domain.governance import ClusterPolicy, TeamName
from topoq.domain.node import NodeSpec
from topoq.engine.ports import AuditEntry


class MemoryRecords:
    def __init__(self) -> None:
        self.policies: list[ClusterPolicy] = []
        self.node_rows: list[NodeSpec] = []
        self.usage_rows: dict[TeamName, TeamUsage] = {}
        self.audit_rows: list[AuditEntry] = []

    def policy(self) -> ClusterPolicy | None:
        return self.policies[-1] if self.policies else None

    def save_policy(self, policy: ClusterPolicy, *, actor: str, now: float) -> int:
        self.policies.append(policy)
        return len(self.policies)

    def nodes(self) -> list[NodeSpec]:
        return list(self.node_rows)

    def save_nodes(self, nodes: Sequence[NodeSpec], *, actor: str, now: float) -> None:
        self.node_rows = list(nodes)

    def update_node(
        self,
        name: str,
        *,
        ready: bool | None = None,
        unschedulable: bool | None = None,
        now: float,
    ) -> NodeSpec | None:
        for index, node in enumerate(self.node_rows):
            if node.name == name:
                self.node_rows[index] = replace(
                    node,
                    ready=node.ready if ready is None else ready,
                    unschedulable=node.unschedulable if unschedulable is None else unschedulable,
                )
                return self.node_rows[index]
        return None

    def fair_share_usage(self) -> dict[TeamName, TeamUsage]:
        return dict(self.usage_rows)

    def save_fair_share_usage(self, usage: Mapping[TeamName, TeamUsage]) -> None:
        self.usage_rows = dict(usage)

    def audit(self, entry: AuditEntry) -> None:
        self.audit_rows.append(entry)

    def audit_log(
        self, *, limit: int = 100, since_s: float | None = None, actor: str | None = None
    ) -> list[AuditEntry]:
        found = [
            entry
            for entry in reversed(self.audit_rows)
            if (since_s is None or entry.at_s >= since_s)
            and (actor is None or entry.actor == actor)
        ]
        return found[:limit]
