"""Where the Slurm executor's nodes get their topology: the cluster's topology.conf (its
switches become levels), or a topoq cluster file (``topoq server --cluster``: any format
``topoq place`` reads, e.g. the instance topology AWS reports) whose node labels then win.
Read by the server at start (its levels) and by the executor at each step, parsed again only
when the file changed."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from topoq.discovery.slurm import cluster_from_slurm, parse_topology_conf
from topoq.discovery.sources import load_cluster
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


def read_cluster_file(path: Path) -> Cluster:
    """A topoq cluster file's nodes (their labels: topology, instance type) and levels."""
    loaded = load_cluster(path)
    return list(loaded.nodes), loaded.topology


def file_stamp(path: Path) -> tuple[int, int]:
    """The file's modification time and size ((-1, -1) when it cannot be read)."""
    try:
        stat = path.stat()
    except OSError:
        return (-1, -1)
    return (stat.st_mtime_ns, stat.st_size)


class TopologyFile:
    """``read(path)`` (by default ``read_topology``), kept while the file's modification time
    and size stand: the same object until then."""

    def __init__(self, path: Path, read: Callable[[Path], Cluster] = read_topology) -> None:
        self.path = path
        self._reader = read
        self._read: tuple[tuple[int, int], Cluster] | None = None

    def cluster(self) -> Cluster:
        stamp = file_stamp(self.path)  # (-1, -1): the reader says what is wrong
        if self._read is None or self._read[0] != stamp:
            self._read = (stamp, self._reader(self.path))
        return self._read[1]
