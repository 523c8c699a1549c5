"""Topology levels: the ordered node labels that name network domains, broadest first."""

from __future__ import annotations

from dataclasses import dataclass

from topoq.domain.errors import TopologyError
from topoq.domain.node import HOSTNAME_LABEL

MAX_LEVELS = 16

AWS_NETWORK_LAYER_LABELS = tuple(f"topology.k8s.aws/network-node-layer-{i}" for i in (1, 2, 3, 4))
AWS_ULTRASERVER_LABEL = "topology.k8s.aws/ultraserver-id"


@dataclass(frozen=True)
class TopologySpec:
    """Levels from the highest (broadest, e.g. a spine) to the lowest (e.g. a host)."""

    name: str
    levels: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.levels:
            raise TopologyError(
                "the topology has no levels",
                where=f"topology {self.name!r}",
                hint="list at least one node label, e.g. kubernetes.io/hostname",
            )
        if len(self.levels) > MAX_LEVELS:
            raise TopologyError(
                f"the topology has {len(self.levels)} levels",
                where=f"topology {self.name!r}",
                hint=f"use at most {MAX_LEVELS}",
            )
        seen: set[str] = set()
        for level in self.levels:
            if not level:
                raise TopologyError(
                    "a level has an empty node label", where=f"topology {self.name!r}"
                )
            if level in seen:
                raise TopologyError(
                    f"level {level!r} is listed twice",
                    where=f"topology {self.name!r}",
                    hint="each level must be a distinct node label",
                )
            seen.add(level)
        if HOSTNAME_LABEL in self.levels[:-1]:
            raise TopologyError(
                f"{HOSTNAME_LABEL} is not the lowest level",
                where=f"topology {self.name!r}",
                hint="a host cannot contain other domains; move it to the end of the list",
            )

    @property
    def depth(self) -> int:
        return len(self.levels)

    @property
    def leaves_are_nodes(self) -> bool:
        """True when the lowest level is the hostname: each leaf is exactly one node."""
        return self.levels[-1] == HOSTNAME_LABEL

    def index_of(self, level: str) -> int | None:
        try:
            return self.levels.index(level)
        except ValueError:
            return None
