"""A real Slurm cluster on this machine: munged, slurmctld and one slurmd per node, every node on
127.0.0.1 with a port of its own and 8 fake GPUs (``/dev/null`` symlinks), under a
``topology/tree`` of leaf switches, spines and a root. For topoq's tests, demos and benchmarks
(``topoq dev slurm up|down``); see docs/executors.md.

Everything the bed needs lives in its directory: ``slurm.conf``, ``gres.conf`` and
``topology.conf``, a munge key of its own (the system's munge is left alone), state, logs, and
``processes.json`` with the PID and start time of each daemon — but munged's socket and the
slurmds' spools, which hold Unix sockets whose paths must stay short: those are under the
system's temporary directory, named for the bed's directory, and removed by ``tear_down``.
Every daemon runs in the foreground of a session of its own (``-D``/``-F``), so ``tear_down``
stops exactly what ``bring_up`` started, by PID: the slurmds, then slurmctld, then munged (and,
first, every job the bed still runs is cancelled). Slurm's commands
reach the bed with ``SLURM_CONF=DIR/slurm.conf`` (``SlurmBed.environment``).

The Debian packages (``slurmctld slurmd slurm-client munge``, Slurm 22.05) are installed when
missing and this process may (root, apt-get), with their services kept from starting; else the
error says what to install.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from topoq.discovery.hostlist import compress_hostlist as compress
from topoq.testbeds.daemons import (
    BedError,
    check_alive,
    free_listen_port,
    port_in_use,
    read_bed_record,
    recorded,
    start_daemon,
    stop_daemons,
    wait_for_daemon,
    wait_until,
)

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
PROGRAMS = {
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sbatch": "slurm-client",
    "munged": "munge",
    "mungekey": "munge",
}
INSTALL_HINT = (
    "install Debian's packages as root: apt-get install slurmctld slurmd slurm-client munge "
    "(never slurm-wlm-emulator)"
)
BED_FILE = "bed.json"
PARTITION = "topoq"
"""The partition the bed's nodes are in: the one topoq's Slurm executor submits to."""
STOP_ORDER = (("slurmd",), ("slurmctld",), ("munged",))
CPUS_PER_NODE = 32
MEMORY_MB_PER_NODE = 262_144
NODE_PREFIX = "n"
NODE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,62}")


@dataclass(frozen=True)
class SlurmShape:
    """``leaves`` leaf switches of ``nodes_per_leaf`` nodes each, grouped ``leaves_per_spine``
    to a spine; spines (when more than one) under a root switch."""

    leaves: int = 4
    nodes_per_leaf: int = 4
    leaves_per_spine: int = 2
    gpus_per_node: int = 8
    names: tuple[str, ...] = ()
    """The nodes' names, leaf by leaf (default ``n00``, ``n01``, …): the demo names them as its
    cluster file does."""

    def __post_init__(self) -> None:
        for name in ("leaves", "nodes_per_leaf", "leaves_per_spine"):
            value = getattr(self, name)
            if not 1 <= value <= 1024:
                raise BedError(f"{name.replace('_', '-')} must be 1 to 1024, not {value}")
        if not 0 <= self.gpus_per_node <= 64:
            raise BedError(f"gpus must be 0 to 64, not {self.gpus_per_node}")
        if self.nodes > 4096:
            raise BedError(
                f"{self.nodes} nodes is more than this machine can run as slurmd processes",
                hint="at most 4,096 nodes (leaves x nodes-per-leaf)",
            )
        if self.names and (len(self.names) != self.nodes or len(set(self.names)) != self.nodes):
            raise BedError(
                f"{len(self.names)} node names for {self.nodes} nodes",
                hint="give one distinct name per node, or none",
            )
        bad = [name for name in self.names if not NODE_NAME.fullmatch(name)]
        if bad:
            raise BedError(
                f"{bad[0]!r} is not a Slurm node name here",
                hint="letters, digits and '-', starting with a letter",
            )

    @property
    def nodes(self) -> int:
        return self.leaves * self.nodes_per_leaf

    def node_names(self) -> list[str]:
        if self.names:
            return list(self.names)
        width = max(2, len(str(self.nodes - 1)))  # as topoq.testing's clusters name them
        return [f"{NODE_PREFIX}{index:0{width}d}" for index in range(self.nodes)]

    def switches(self) -> list[tuple[str, str, str]]:
        """``(name, "Nodes"|"Switches", host list)`` for topology.conf, leaves first."""
        names = self.node_names()
        per = self.nodes_per_leaf
        leaves = [f"leaf{i:02d}" for i in range(1, self.leaves + 1)]
        lines = [
            (leaf, "Nodes", compress(names[i * per : (i + 1) * per]))
            for i, leaf in enumerate(leaves)
        ]
        spines = [
            leaves[start : start + self.leaves_per_spine]
            for start in range(0, self.leaves, self.leaves_per_spine)
        ]
        spine_names = [f"spine{i:02d}" for i in range(1, len(spines) + 1)]
        lines += [
            (name, "Switches", compress(group))
            for name, group in zip(spine_names, spines, strict=True)
        ]
        if len(spine_names) > 1:  # a common root: else jobs across spines are refused
            lines.append(("root", "Switches", compress(spine_names)))
        return lines


@dataclass(frozen=True)
class SlurmBed:
    directory: Path
    nodes: tuple[str, ...]
    controller_port: int
    first_node_port: int
    partition: str = PARTITION

    @property
    def slurm_conf(self) -> Path:
        return self.directory / "slurm.conf"

    @property
    def topology_conf(self) -> Path:
        return self.directory / "topology.conf"

    @property
    def munge_socket(self) -> Path:
        """munged's socket: in a directory of its own under the system's temporary directory,
        because munged wants every directory above its socket open to all (a test's temporary
        directory is not)."""
        digest = hashlib.sha256(str(self.directory).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir(), f"topoq-munge-{digest}", "munge.socket")

    @property
    def spool(self) -> Path:
        """The slurmds' spool directories (one per node): under the system's temporary
        directory too, because slurmstepd makes a Unix socket there named for the node, job
        and step, and a socket's path must stay under 108 bytes whatever the bed's directory
        (a test's temporary directory is deep enough to break every job)."""
        digest = hashlib.sha256(str(self.directory).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir(), f"topoq-slurmd-{digest}")

    @property
    def environment(self) -> dict[str, str]:
        """What Slurm's commands need to reach this bed (beside the process's own)."""
        return {"SLURM_CONF": str(self.slurm_conf)}


def missing_programs() -> list[str]:
    return sorted({package for program, package in PROGRAMS.items() if not _found(program)})


def _found(program: str) -> bool:
    return shutil.which(program) is not None or Path("/usr/sbin", program).exists()


def ensure_packages() -> None:
    """Install Slurm's and munge's Debian packages when a program is missing (as root, with
    apt-get, their services kept from starting); else a ``BedError`` that says what to do."""
    missing = missing_programs()
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise BedError(f"Slurm is not installed here ({', '.join(missing)})", hint=INSTALL_HINT)
    policy = Path("/usr/sbin/policy-rc.d")
    ours = not policy.exists()
    if ours:  # keep the packages' services from starting: the bed starts its own daemons
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        for command in (
            ["apt-get", "update", "-qq"],
            ["apt-get", "install", "-y", "-qq", *PACKAGES],
        ):
            done = subprocess.run(
                command, env=environment, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                raise BedError(
                    f"{' '.join(command)} failed: {done.stderr.strip()[-400:]}", hint=INSTALL_HINT
                )
    finally:
        if ours:
            policy.unlink(missing_ok=True)
    if missing_programs():
        raise BedError(f"still missing after install: {', '.join(missing_programs())}")


def bed_in(directory: Path) -> SlurmBed | None:
    """The bed brought up in ``directory``, while its record is there."""
    found = read_bed_record(directory / BED_FILE)
    if found is None:
        return None
    return SlurmBed(
        Path(found["directory"]),
        tuple(found["nodes"]),
        int(found["controller_port"]),
        int(found["first_node_port"]),
        found.get("partition", PARTITION),
    )


def bring_up(
    directory: Path, shape: SlurmShape | None = None, *, timeout_s: float = 120.0
) -> SlurmBed:
    """Start the cluster in ``directory`` (made if missing; it must hold no running bed) and
    return it once slurmctld answers and every node is idle. On any failure what was started
    is stopped again before the error is raised."""
    shape = shape or SlurmShape()
    ensure_packages()  # first: what to install is the first thing to say
    if os.geteuid() != 0:
        raise BedError(
            "the Slurm test bed runs its daemons as root (slurmd starts jobs as their user)",
            hint="run it as root, or point topoq at an existing Slurm cluster",
        )
    directory = directory.expanduser().resolve()
    directory.mkdir(parents=True, exist_ok=True)
    if recorded(directory):
        raise BedError(
            f"{directory} records a bed already",
            hint=f"run topoq dev slurm down {directory} first",
        )
    names = shape.node_names()
    bed = SlurmBed(directory, tuple(names), free_listen_port(), _free_port_range(len(names)))
    deadline = time.monotonic() + timeout_s
    try:
        _write_files(bed, shape)
        (directory / BED_FILE).write_text(json.dumps({**asdict(bed), "directory": str(directory)}))
        _start(bed, deadline)
    except BaseException:
        tear_down(directory)
        raise
    return bed


def tear_down(directory: Path) -> list[str]:
    """Stop what ``bring_up`` started in ``directory`` (by its recorded PIDs: the slurmds,
    then slurmctld, then munged); the names of the daemons stopped. Files stay."""
    directory = directory.expanduser().resolve()
    bed = bed_in(directory)
    if bed is not None:
        _cancel_every_job(bed)
    stopped = stop_daemons(directory, _stop_groups(directory))
    if bed is not None:
        shutil.rmtree(bed.munge_socket.parent, ignore_errors=True)
        shutil.rmtree(bed.spool, ignore_errors=True)
    (directory / BED_FILE).unlink(missing_ok=True)
    return stopped


def _cancel_every_job(bed: SlurmBed, timeout_s: float = 15.0) -> None:
    """Cancel every job of the bed and wait until they ended: a job's processes (slurmstepd and
    its tasks) outlive the slurmd that started them."""
    if run_slurm(bed, ["scancel", "--full", "--partition", bed.partition], check=False).returncode:
        return  # slurmctld is not answering: nothing to cancel through it
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        listed = run_slurm(bed, ["squeue", "--noheader", "--states=PD,R,CG,S"], check=False)
        if listed.returncode or not listed.stdout.strip():
            return
        time.sleep(0.2)


def _stop_groups(directory: Path) -> list[list[str]]:
    names = list(recorded(directory))
    return [[n for n in names if n.startswith(prefix)] for (prefix,) in STOP_ORDER]


def run_slurm(
    bed: SlurmBed, argv: Sequence[str], *, timeout_s: float = 30.0, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """A Slurm command against the bed (``SLURM_CONF`` set)."""
    done = subprocess.run(
        list(argv),
        env={**os.environ, **bed.environment},
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if check and done.returncode != 0:
        raise BedError(f"{' '.join(argv)} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done


def node_states(bed: SlurmBed) -> dict[str, str]:
    """Each node's state as ``sinfo`` prints it (``idle``, ``alloc``, ``down*``, …)."""
    out = run_slurm(bed, ["sinfo", "-h", "-N", "-o", "%N %t"], check=False).stdout
    states: dict[str, str] = {}
    for line in out.splitlines():
        name, _, state = line.strip().partition(" ")
        if name:
            states[name] = state.strip()
    return states


def wait_until_idle(bed: SlurmBed, timeout_s: float = 60.0) -> None:
    """Return once every node of the bed is idle."""
    wait_until(
        lambda: _all_idle(bed),
        time.monotonic() + timeout_s,
        "every node to be idle",
        bed.directory / "slurmctld.log",
    )


def reset(bed: SlurmBed) -> None:
    """The bed as it came up: every job of its partition cancelled, every node that is down or
    drained resumed, and every node idle again (between tests)."""
    run_slurm(bed, ["scancel", f"--partition={bed.partition}"], check=False)
    for node, state in node_states(bed).items():
        if state.startswith(("down", "drain")):
            run_slurm(bed, ["scontrol", "update", f"NodeName={node}", "State=RESUME"])
    wait_until_idle(bed)


def _all_idle(bed: SlurmBed) -> bool:
    states = node_states(bed)
    return len(states) == len(bed.nodes) and all(s == "idle" for s in states.values())


def _free_port_range(count: int, tries: int = 50) -> int:
    """The first of ``count`` consecutive free loopback ports."""
    for _ in range(tries):
        first = free_listen_port()
        if first + count < 32768 and not any(port_in_use(first + i) for i in range(count)):
            return first
    raise BedError(f"found no {count} consecutive free loopback ports", hint="free some ports")


def _write_files(bed: SlurmBed, shape: SlurmShape) -> None:
    directory = bed.directory
    for sub in ("state", "run", "fakedev"):
        (directory / sub).mkdir(exist_ok=True)
    bed.munge_socket.parent.mkdir(exist_ok=True)
    bed.munge_socket.parent.chmod(0o755)  # munged wants its socket's directories open to all
    for name in bed.nodes:
        (bed.spool / name).mkdir(parents=True, exist_ok=True)
    (directory / "munge-key").mkdir(mode=0o700, exist_ok=True)
    for index in range(shape.gpus_per_node):
        device = directory / "fakedev" / f"nvidia{index}"
        if not device.is_symlink():
            device.symlink_to("/dev/null")  # a GPU that is no file is dropped by Slurm 22.05
    key = directory / "munge-key" / "munge.key"
    if not key.exists():
        subprocess.run(["mungekey", "--create", "--keyfile", str(key)], check=True)
    bed.slurm_conf.write_text(_slurm_conf(bed, shape))
    (directory / "gres.conf").write_text(_gres_conf(bed, shape))
    bed.topology_conf.write_text(
        "".join(f"SwitchName={name} {kind}={members}\n" for name, kind, members in shape.switches())
    )


def _slurm_conf(bed: SlurmBed, shape: SlurmShape) -> str:
    d = bed.directory
    last_port = bed.first_node_port + len(bed.nodes) - 1
    nodes = compress(bed.nodes)
    gres = f" Gres=gpu:{shape.gpus_per_node}" if shape.gpus_per_node else ""
    return f"""# written by topoq's Slurm test bed (topoq dev slurm up); stop it with topoq dev slurm down
ClusterName=topoq
SlurmctldHost={socket.gethostname().split(".")[0]}(127.0.0.1)
SlurmctldPort={bed.controller_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={bed.munge_socket},cred_expire=10
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={bed.spool}/%n
SlurmctldPidFile={d}/run/slurmctld.pid
SlurmdPidFile={d}/run/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
TopologyPlugin=topology/tree
GresTypes=gpu
ReturnToService=1
SlurmdTimeout=10
KillWait=2
MinJobAge=600
JobCompType=jobcomp/filetxt
JobCompLoc={d}/jobcomp.txt
MpiDefault=none
MailProg=/bin/true
SlurmdParameters=config_overrides
NodeName={nodes} NodeHostname={nodes} NodeAddr=127.0.0.1 Port=[{bed.first_node_port}-{last_port}] CPUs={CPUS_PER_NODE} RealMemory={MEMORY_MB_PER_NODE}{gres} State=UNKNOWN
PartitionName={bed.partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""  # noqa: E501 - the node line is one line of slurm.conf


def _gres_conf(bed: SlurmBed, shape: SlurmShape) -> str:
    if not shape.gpus_per_node:
        return "AutoDetect=off\n"
    devices = f"{bed.directory}/fakedev/nvidia[0-{shape.gpus_per_node - 1}]"
    return f"AutoDetect=off\nNodeName={compress(bed.nodes)} Name=gpu File={devices}\n"


def _start(bed: SlurmBed, deadline: float) -> None:
    d = bed.directory
    environment = {**os.environ, **bed.environment}
    munged = start_daemon(
        d,
        "munged",
        [
            _program("munged"),
            "--foreground",
            f"--key-file={d}/munge-key/munge.key",
            f"--socket={bed.munge_socket}",
            f"--pid-file={d}/run/munged.pid",
            f"--seed-file={d}/munge-key/munged.seed",
            f"--log-file={d}/munged-file.log",
        ],
    )
    wait_for_daemon(munged, bed.munge_socket.exists, deadline, "munged", d / "munged.log")
    controller = start_daemon(
        d,
        "slurmctld",
        [_program("slurmctld"), "-D", "-c", "-i", "-f", str(bed.slurm_conf)],
        environment=environment,
    )
    wait_for_daemon(
        controller,
        lambda: "is UP" in run_slurm(bed, ["scontrol", "ping"], check=False).stdout,
        deadline,
        "slurmctld to answer",
        d / "slurmctld.log",
    )
    for name in bed.nodes:
        start_daemon(
            d,
            f"slurmd-{name}",
            [_program("slurmd"), "-D", "-N", name, "-f", str(bed.slurm_conf)],
            environment=environment,
        )
    daemons = ["munged", "slurmctld", *(f"slurmd-{name}" for name in bed.nodes)]

    def all_idle() -> bool:
        check_alive(d, daemons)  # a daemon gone is an error now, not at the deadline
        return _all_idle(bed)

    wait_until(all_idle, deadline, "every node to be idle", d / "slurmctld.log")


def _program(name: str) -> str:
    found = shutil.which(name)
    if found is not None:
        return found
    if Path("/usr/sbin", name).exists():
        return str(Path("/usr/sbin", name))
    raise BedError(f"{name} is not installed", hint=INSTALL_HINT)


def describe(bed: SlurmBed, processes: Mapping[str, int] | None = None) -> str:
    """What a user needs to use the bed, in a few lines."""
    lines = [
        f"slurmctld    127.0.0.1:{bed.controller_port}, partition {bed.partition}",
        f"nodes        {len(bed.nodes)} ({compress(bed.nodes)}), topology {bed.topology_conf}",
        f"use it with  export SLURM_CONF={bed.slurm_conf}; sinfo",
        f"stop with    topoq dev slurm down {bed.directory}",
    ]
    if processes:
        daemons = len(processes)
        lines.insert(0, f"started      {daemons} daemons (munged, slurmctld, {daemons - 2} slurmd)")
    return "\n".join(lines)
