"""``topoq server --executor slurm --write-topology``: keep the cluster's topology.conf in step
with topoq's view of the network (its ``--cluster`` file's levels), so that Slurm's own
placement — of jobs outside topoq, and ``--switches`` — sees the same switches topoq places by.

When the wanted file differs from the one on disk (at start, when Slurm's node set changes, or
when someone edits the file), the new text is checked before anything is written:

- it parses as Slurm reads it (``topoq.discovery.slurm.parse_topology_conf``);
- it names every node Slurm knows, each once, and no node Slurm does not know (a node left out
  of topology.conf can no longer be given to a multi-node job);
- one switch reaches every node (Slurm refuses a job that spans switches with no common
  ancestor: "Requested node configuration is not available"), so when topoq's top level has
  several domains a root switch joins them.

Then the old file is kept beside it (``topology.conf.topoq-previous``), the new one replaces it
atomically, ``scontrol reconfigure`` makes slurmctld read it, and ``scontrol show topology`` must
show its switches. When Slurm does not take it, the previous file is put back and reconfigured.
Each outcome is one event in the server log."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from dataclasses import replace
from pathlib import Path

from topoq.discovery.hostlist import expand_hostlist
from topoq.discovery.slurm import cluster_from_slurm, parse_topology_conf
from topoq.discovery.slurm_export import render_topology_conf
from topoq.domain.errors import TopoqError
from topoq.domain.node import HOSTNAME_LABEL, NodeSpec
from topoq.domain.resources import Resources
from topoq.engine.event_log import ServerEvent, write_event
from topoq.executors.slurm.commands import SlurmCommandFailed, SlurmCommands
from topoq.executors.slurm.topology import Cluster, file_stamp

log = logging.getLogger("topoq.server")

ROOT_LEVEL = "topology.topoq.io/slurm-root"
ROOT_SWITCH = "topoq-root"
PREVIOUS_SUFFIX = ".topoq-previous"


def wanted_topology_conf(cluster: Cluster) -> str:
    """topology.conf for ``cluster``'s nodes and levels (tree plugin), every node in it whatever
    its state (a drained node stays in the tree), its top domains joined by one root switch."""
    nodes, topology = cluster
    as_named = [
        NodeSpec(
            node.name, labels={**node.labels, HOSTNAME_LABEL: node.name, ROOT_LEVEL: ROOT_SWITCH}
        )
        for node in nodes
    ]
    top = topology.levels[0] if topology.levels else HOSTNAME_LABEL
    if top != HOSTNAME_LABEL and len({node.labels.get(top) for node in nodes}) > 1:
        topology = replace(topology, levels=(ROOT_LEVEL, *topology.levels))
    return render_topology_conf(as_named, topology)


def problems_with(text: str, slurm_nodes: frozenset[str]) -> list[str]:
    """What is wrong with ``text`` as the topology.conf of a cluster of ``slurm_nodes``."""
    try:
        nodes, levels = cluster_from_slurm(parse_topology_conf(text), node_resources=Resources())
    except TopoqError as error:
        return [str(error)]
    named = [node.name for node in nodes]
    found: list[str] = []
    twice = sorted({name for name in named if named.count(name) > 1})
    if twice:
        found.append(f"nodes under two switches: {', '.join(twice)}")
    unknown = sorted(set(named) - slurm_nodes)
    if unknown:
        found.append(f"nodes Slurm does not know: {', '.join(unknown[:10])}")
    missing = sorted(slurm_nodes - set(named))
    if missing:
        found.append(
            f"{len(missing)} node(s) of the Slurm cluster missing from topoq's topology: "
            f"{', '.join(missing[:10])} (add them to the --cluster file)"
        )
    top = levels.levels[0]
    if top != HOSTNAME_LABEL and len({node.labels.get(top) for node in nodes}) > 1:
        found.append("no switch reaches every node")
    return found


def leaf_switches(text: str) -> dict[str, frozenset[str]]:
    """The switches that name nodes, from topology.conf or ``scontrol show topology``."""
    found: dict[str, frozenset[str]] = {}
    for line in text.splitlines():
        words = dict(word.split("=", 1) for word in line.split() if "=" in word)
        if "SwitchName" in words and "Nodes" in words and "Switches" not in words:
            found[words["SwitchName"]] = frozenset(expand_hostlist(words["Nodes"]))
    return found


class TopologyConfKeeper:
    """Keeps ``path`` (the cluster's topology.conf) in step with topoq's view."""

    def __init__(self, path: Path, slurm: SlurmCommands) -> None:
        self.path = path
        self._slurm = slurm
        self._checked: tuple[int, frozenset[str], tuple[int, int]] | None = None

    def keep(self, cluster: Cluster, slurm_nodes: frozenset[str]) -> None:
        """Write topology.conf anew if it differs from ``cluster``'s (checked, then applied,
        as the module says); a no-op while neither side changed."""
        key = (id(cluster), slurm_nodes, file_stamp(self.path))
        if key == self._checked:
            return
        self._keep(cluster, slurm_nodes)
        self._checked = (id(cluster), slurm_nodes, file_stamp(self.path))

    def _keep(self, cluster: Cluster, slurm_nodes: frozenset[str]) -> None:
        wanted = wanted_topology_conf(cluster)
        try:
            current = self.path.read_text()
        except OSError:
            current = ""
        if wanted == current:
            return
        problems = problems_with(wanted, slurm_nodes)
        if problems:
            self._event("slurm_topology_refused", "; ".join(problems), logging.WARNING)
            return
        previous = self.path.with_name(self.path.name + PREVIOUS_SUFFIX)
        previous.write_text(current)
        _replace(self.path, wanted)
        try:
            self._apply(wanted)
        except SlurmCommandFailed as error:
            _replace(self.path, current)
            with contextlib.suppress(SlurmCommandFailed):  # said below; read again at start
                self._slurm.run(["scontrol", "reconfigure"])
            self._event("slurm_topology_refused", f"Slurm did not take it: {error}", logging.ERROR)
            return
        switches = sum(1 for line in wanted.splitlines() if line.startswith("SwitchName="))
        self._event(
            "slurm_topology_written",
            f"{switches} switches, {len(slurm_nodes)} nodes; the previous file is {previous}",
            logging.INFO,
        )

    def _apply(self, wanted: str) -> None:
        self._slurm.run(["scontrol", "reconfigure"])
        shown = leaf_switches(self._slurm.topology())
        if shown != leaf_switches(wanted):
            raise SlurmCommandFailed("scontrol show topology does not show the new switches")

    def _event(self, name: str, detail: str, level: int) -> None:
        message = f"topology.conf {self.path}: {detail}"
        fields = {"path": str(self.path), "detail": detail}
        write_event(log, ServerEvent(name, message, fields, level))


def _replace(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a temporary file beside it, then a rename)."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    try:
        with os.fdopen(handle, "w") as written:
            written.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
