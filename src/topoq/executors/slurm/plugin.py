"""The Slurm executor's plugin record: its capabilities as data, its factory (which checks that
Slurm's commands are here and the partition exists before anything starts), and the topology
levels its nodes carry (from the cluster's topology.conf)."""

from __future__ import annotations

import shutil
from pathlib import Path

from topoq.domain.errors import InvalidInputError
from topoq.domain.topology import TopologySpec
from topoq.executors.slurm.commands import SlurmCommandFailed, SlurmCommands
from topoq.executors.slurm.executor import SLURM_CAPABILITIES, SlurmExecutor
from topoq.executors.slurm.topology import read_topology, topology_conf_of

__all__ = ["SLURM_CAPABILITIES", "slurm_executor", "slurm_topology", "topology_conf_of"]

SLURM_COMMANDS = ("sbatch", "squeue", "scancel", "sinfo", "scontrol")
INSTALL_HINT = (
    "install Slurm's client commands (Debian: apt-get install slurm-client) and point "
    "SLURM_CONF or --slurm-conf at the cluster's slurm.conf"
)


def slurm_topology(slurm_conf: Path | str | None) -> TopologySpec:
    """The levels the server places by: the cluster's switches (``topology/tree``) or blocks,
    then the node."""
    return read_topology(topology_conf_of(slurm_conf))[1]


def slurm_executor(
    work_dir: Path | str,
    slurm_conf: Path | str | None = None,
    *,
    partition: str = "topoq",
    topology_file: Path | str | None = None,
    write_topology: bool = False,
    start_deadline_s: float = 60.0,
) -> SlurmExecutor:
    """The executor on the Slurm cluster of ``slurm_conf`` (default ``$SLURM_CONF``), in
    ``partition``, its scripts and logs under ``work_dir`` (which every node must see)."""
    if write_topology and topology_file is None:
        raise InvalidInputError(
            "--write-topology writes topoq's view of the network, which comes from a cluster file",
            where="--write-topology",
            hint="give --cluster FILE (any format `topoq place` reads); without it topoq "
            "reads topology.conf and has nothing to write back",
        )
    missing = [name for name in SLURM_COMMANDS if shutil.which(name) is None]
    if missing:
        raise InvalidInputError(
            f"the Slurm executor needs Slurm's commands ({', '.join(missing)} not found)",
            where="--executor slurm",
            hint=INSTALL_HINT,
        )
    commands = SlurmCommands(slurm_conf)
    try:
        partitions = {p for node in commands.nodes() for p in node.partitions}
    except SlurmCommandFailed as error:
        raise InvalidInputError(
            f"cannot reach the Slurm cluster: {error}", where="--slurm-conf", hint=INSTALL_HINT
        ) from None
    if partition not in partitions:
        raise InvalidInputError(
            f"the Slurm cluster has no partition {partition!r}",
            where="--slurm-partition",
            hint=f"its partitions: {', '.join(sorted(partitions)) or 'none'}; give topoq one of "
            "its own (jobs outside topoq must not use its nodes)",
        )
    return SlurmExecutor(
        work_dir,
        slurm_conf,
        partition=partition,
        topology_conf=topology_conf_of(slurm_conf),
        topology_file=topology_file,
        write_topology=write_topology,
        start_deadline_s=start_deadline_s,
    )
