"""The Slurm cluster's topology.conf, read into topoq's nodes and levels: by the server at start
(its levels) and by the executor at each step (its nodes' switches), parsed again only when
the file changed."""

from __future__ import annotations

import os
from pathlib import Path

from topoq.discovery.slurm import cluster_from_slurm, parse_topology_conf
from topoq.domain.errors import InvalidInputError
from topoq.domain.node import NodeSpec
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec

Cluster = tuple[list[NodeSpec], TopologySpec]


def topology_conf_of(slurm_conf: Path | str | None) -> Path:
    """The topology.conf slurmctld reads beside ``slurm_conf`` (``$SLURM_CONF``, else
    /etc/slurm/slurm.conf)."""
    conf = slurm_conf or os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
    return Path(conf).parent / "topology.conf"


def read_topology(path: Path) -> Cluster:
    """The nodes topology.conf names, labelled with their switches (or blocks), and the levels:
    the switch tiers, then the node."""
    try:
        text = path.read_text()
    except OSError as error:
        raise InvalidInputError(
            f"cannot read the Slurm cluster's topology.conf ({path}): {error.strerror}",
            where="--slurm-conf",
            hint="topoq places by the switches of topology.conf beside slurm.conf "
            "(TopologyPlugin=topology/tree)",
        ) from None
    return cluster_from_slurm(
        parse_topology_conf(text, source=str(path)), node_resources=Resources()
    )


class TopologyFile:
    """``read_topology(path)``, kept while the file's modification time and size stand."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._read: tuple[tuple[int, int], Cluster] | None = None

    def cluster(self) -> Cluster:
        try:
            stat = self.path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            stamp = (-1, -1)  # read_topology says what is wrong
        if self._read is None or self._read[0] != stamp:
            self._read = (stamp, read_topology(self.path))
        return self._read[1]
