"""One admitted gang as one Slurm job, pinned to exactly the placed nodes: what ``sbatch`` is
given (pure; ``SlurmExecutor.start`` writes the files and runs it).

Every pod is one task of one ``srun`` step, so ``SLURM_PROCID`` is the pod's rank and a pod
that fails ends the step (``--kill-on-bad-exit``), the gang and the job:

- **Every pod asks for the same GPUs** (the usual gang): one job over the placed nodes, its
  tasks laid out rank by rank on the nodes the placement chose (``--distribution=arbitrary``
  with ``SLURM_HOSTFILE``, one line per rank), each task with its GPUs (``--gpus-per-task``).
- **Pods of different GPU counts** (a leader beside workers): a heterogeneous job with one
  component per placed node (``--nodelist=NODE --ntasks=PODS --gres=gpu:SUM``), and one
  heterogeneous step over all components; each pod takes its own share of the node's GPUs.
  Slurm numbers a heterogeneous step's tasks component by component, so ``SLURM_PROCID``
  follows the nodes in order of their first rank; the pod script maps it to topoq's rank.

``--exclusive`` when every placed node's GPUs all go to the gang; ``--no-requeue`` always:
a gang that loses a node is requeued by topoq (onto healthy nodes), not by Slurm. The job's
comment carries topoq's job id and attempt (``topoq:<attempt>:<job>``), by which a restarted
server finds and adopts it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from topoq.discovery.hostlist import compress_hostlist
from topoq.domain.job import JobId
from topoq.domain.quantity import NVIDIA_GPU
from topoq.engine.ports import ExecutorStartFailed, GangLaunch
from topoq.executors.environment import (
    GangContext,
    PodPlan,
    hosts_in_node_rank_order,
    launcher_environment,
)

COMMENT_PREFIX = "topoq:"
_JOB_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9._-]")
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MASTER_PORT_BASE, MASTER_PORT_SPAN = 29500, 2000


def comment_of(job: JobId, team: str, attempt: int) -> str:
    return f"{COMMENT_PREFIX}{attempt}:{team}:{job}"


def owner_of(comment: str) -> tuple[JobId, str, int] | None:
    """The topoq job, its team and the attempt a Slurm job's comment names (None: not
    topoq's)."""
    if not comment.startswith(COMMENT_PREFIX):
        return None
    attempt, _, rest = comment[len(COMMENT_PREFIX) :].partition(":")
    team, _, job = rest.partition(":")
    if not attempt.isdigit() or not team or not job:
        return None
    return JobId(job), team, int(attempt)


def started_marker(rank: int) -> str:
    """The file a pod's script makes in the attempt's directory once its command is found,
    just before running it: the gang has STARTED when every pod made its own."""
    return f"pod-{rank}.started"


def job_name_of(job: JobId) -> str:
    return "topoq-" + _JOB_NAME_CHARACTERS.sub("_", job)[:100]


@dataclass(frozen=True)
class Component:
    """A part of the job's allocation: nodes, tasks and GPUs."""

    nodes: tuple[str, ...]
    tasks: int
    gpus_per_task: int = 0
    gpus_per_node: int = 0
    """Heterogeneous components: the node's GPUs, shared by its pods in the pod script."""


@dataclass(frozen=True)
class BatchPlan:
    """What ``sbatch`` runs for one gang: its argv (before the script's path), the batch
    script, the pod script (what each task runs), and the host file of an arbitrary layout."""

    sbatch_options: tuple[str, ...]
    batch_script: str
    pod_script: str
    host_file: str | None
    """One node per line, in rank order (``SLURM_HOSTFILE``), for a job of one component."""
    task_ranks: tuple[int, ...]
    """topoq's rank of each Slurm task, by ``SLURM_PROCID``."""


def batch_plan(
    launch: GangLaunch,
    plans: Sequence[PodPlan],
    commands: Mapping[str, Sequence[str]],
    *,
    directory: str,
    partition: str,
    addresses: Mapping[str, str],
    node_gpus: Mapping[str, int],
) -> BatchPlan:
    """The job for ``launch`` (its pods in rank order, ``plans``; each pod set's argv,
    ``commands``), its files in ``directory`` (which every node sees), in ``partition``.
    ``addresses``: each node's address (``MASTER_ADDR`` is the first node's); ``node_gpus``:
    each node's GPUs (``--exclusive`` when the gang takes them all)."""
    _check_environment(launch.environment)
    _check_commands(commands)
    hosts = hosts_in_node_rank_order(plans)
    components = _components(plans)
    order = _task_order(plans, components)
    context = GangContext(
        job=launch.job.id,
        attempt=launch.attempt,
        world_size=len(plans),
        hosts=hosts,
        master_port=MASTER_PORT_BASE + _stable_hash(f"{launch.job.id}:{launch.attempt}"),
        node_labels=launch.node_labels,
    )
    whole_nodes = all(
        node_gpus.get(node, 0) > 0
        and sum(p.gpus for p in plans if p.node == node) >= node_gpus[node]
        for node in hosts
    )
    common = [
        f"--job-name={job_name_of(launch.job.id)}",
        f"--comment={comment_of(launch.job.id, str(launch.job.team), launch.attempt)}",
        f"--partition={partition}",
        "--no-requeue",
        f"--output={directory}/batch.log",
        *(["--exclusive"] if whole_nodes else []),
    ]
    options: list[str] = []
    for index, component in enumerate(components):
        if index:
            options.append(":")
        options += _component_options(component, single=len(components) == 1)
        if index == 0:
            options += common
    pod_script = _pod_script(launch, plans, order, commands, context, addresses, components)
    steps = " : ".join([f"bash {shlex.quote(directory + '/pods.sh')}"] * len(components))
    layout = "--distribution=arbitrary " if len(components) == 1 else ""
    batch = (
        "#!/bin/bash\n"
        f"# topoq job {launch.job.id} attempt {launch.attempt}: every pod one task of one step\n"
        + (f"export SLURM_HOSTFILE={shlex.quote(directory + '/hosts')}\n" if layout else "")
        + f"srun {layout}--kill-on-bad-exit=1 {steps}\n"
        + "status=$?\n"
        + f"here={shlex.quote(directory)}\n"
        + "# the gang's code is its first pod's to fail (the others were stopped after it)\n"
        + "first=$(cat \"$here\"/pod-*.exit 2>/dev/null | awk '$1 != 0' | sort -k2,2n"
        + " | head -n 1)\n"
        + "exit \"$(echo ${first:-$status} | cut -d' ' -f1)\"\n"
    )
    host_file = "".join(f"{p.node}\n" for p in plans) if len(components) == 1 else None
    return BatchPlan(
        tuple(options), batch, pod_script, host_file, tuple(plans[i].rank for i in order)
    )


def _components(plans: Sequence[PodPlan]) -> list[Component]:
    gpus = {plan.gpus for plan in plans}
    if len(gpus) == 1:
        nodes = hosts_in_node_rank_order(plans)
        return [Component(nodes, len(plans), gpus_per_task=gpus.pop())]
    return [
        Component(
            (node,),
            sum(1 for p in plans if p.node == node),
            gpus_per_node=sum(p.gpus for p in plans if p.node == node),
        )
        for node in hosts_in_node_rank_order(plans)
    ]


def _component_options(component: Component, *, single: bool) -> list[str]:
    options = [
        f"--nodelist={compress_hostlist(component.nodes)}",
        f"--nodes={len(component.nodes)}",
        f"--ntasks={component.tasks}",
    ]
    if single:
        options.append("--distribution=arbitrary")
    if component.gpus_per_task:
        options.append(f"--gpus-per-task={component.gpus_per_task}")
    if component.gpus_per_node:
        options.append(f"--gres=gpu:{component.gpus_per_node}")
    return options


def _task_order(plans: Sequence[PodPlan], components: Sequence[Component]) -> list[int]:
    """Which plan each Slurm task runs, by ``SLURM_PROCID``: rank order for one component;
    component by component (nodes in order of their first rank) for a heterogeneous job."""
    if len(components) == 1:
        return list(range(len(plans)))
    return [
        index
        for component in components
        for index, plan in enumerate(plans)
        if plan.node == component.nodes[0]
    ]


def _pod_script(
    launch: GangLaunch,
    plans: Sequence[PodPlan],
    order: Sequence[int],
    commands: Mapping[str, Sequence[str]],
    context: GangContext,
    addresses: Mapping[str, str],
    components: Sequence[Component],
) -> str:
    master = addresses.get(context.hosts[0], context.hosts[0])
    shared_gpus = len(components) > 1
    lines = [
        "#!/bin/bash",
        f"# topoq job {launch.job.id} attempt {launch.attempt}: the pod of each Slurm task",
        'here="$(dirname "$0")"',
        "run_pod() {  # the command as a child: SIGTERM passed on, its exit code kept with when",
        '  rank=$1; shift; "$@" & child=$!',
        "  trap 'kill -TERM \"$child\" 2>/dev/null' TERM",
        '  while wait "$child"; status=$?; kill -0 "$child" 2>/dev/null; do :; done',
        '  echo "$status $(date +%s%N)" > "$here/pod-$rank.exit"; exit "$status"',
        "}",
        'case "$SLURM_PROCID" in',
    ]
    for task, index in enumerate(order):
        plan = plans[index]
        environment = {
            **launch.environment,
            **launcher_environment(context, plan, range(plan.gpus)),
            "MASTER_ADDR": master,
        }
        del environment["CUDA_VISIBLE_DEVICES"]  # Slurm's, for the GPUs it gave the task
        argv = commands.get(plan.pod_set) or ()
        body = [f'exec >>"$here/pod-{plan.rank}.log" 2>&1']
        if shared_gpus:
            first = sum(p.gpus for p in plans[:index] if p.node == plan.node)
            body.append(_gpu_share(first, plan.gpus))
        body.append("export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in environment.items()))
        program = shlex.quote(argv[0]) if argv else "''"
        body.append(
            f"type -P -- {program} >/dev/null || "
            f'{{ echo "topoq: cannot run {_shown(argv[0] if argv else "")}" >&2; exit 127; }}'
        )
        body.append(f'touch "$here/{started_marker(plan.rank)}"')
        body.append(f"run_pod {plan.rank} " + " ".join(shlex.quote(a) for a in argv))
        lines.append(f"{task}) " + "\n  ".join(body) + " ;;")
    lines.append('*) echo "topoq: no pod for Slurm task $SLURM_PROCID" >&2; exit 1 ;;')
    lines.append("esac")
    return "\n".join(lines) + "\n"


def _gpu_share(first: int, count: int) -> str:
    """The pod's ``count`` GPUs from the ``first``-th of the node's (heterogeneous jobs)."""
    if count == 0:
        return "export CUDA_VISIBLE_DEVICES="
    return (
        'IFS=, read -ra gpus <<< "$CUDA_VISIBLE_DEVICES"; '
        f'export CUDA_VISIBLE_DEVICES="$(IFS=,; echo "${{gpus[*]:{first}:{count}}}")"'
    )


def _check_environment(environment: Mapping[str, str]) -> None:
    for name, value in environment.items():
        if not _VARIABLE_NAME.match(name):
            raise ExecutorStartFailed(
                f"environment variable name {name!r} cannot be set in a Slurm job",
                hint="use letters, digits and _ and start with a letter or _",
            )
        if "\0" in value:
            raise ExecutorStartFailed(
                f"environment variable {name} holds a NUL character", hint="remove it"
            )


def _check_commands(commands: Mapping[str, Sequence[str]]) -> None:
    for pod_set, argv in commands.items():
        if any("\0" in part for part in argv):
            raise ExecutorStartFailed(
                f"the command of pod set {pod_set!r} holds a NUL character", hint="remove it"
            )


def _shown(program: str) -> str:
    """A program's name for a message inside double quotes in the pod script."""
    short = program if len(program) <= 80 else program[:77] + "..."
    return "".join(c for c in short if c.isalnum() or c in "/._-+ ")


def _stable_hash(text: str) -> int:
    value = 0
    for character in text.encode():
        value = (value * 131 + character) % 1_000_003
    return value % MASTER_PORT_SPAN


def gpus_of(launch: GangLaunch, node: str) -> int:
    """The node's GPUs, from what the launch says it has (0 when unknown)."""
    allocatable = launch.node_allocatable.get(node)
    return int(allocatable.amount(NVIDIA_GPU)) if allocatable is not None else 0
