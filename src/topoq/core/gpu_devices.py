"""GPU devices inside nodes: which device a pod that asks for part of one GPU is packed on, and
how much of the cluster's idle GPU a placement leaves fragmented (docs/gpu-sharing.md).

A node's GPUs are devices, each with a free share in thousandths (``WHOLE_GPU_MILLI`` when
nothing runs on it). A pod asks for ``count`` whole devices (each entirely free) or for a share
of one (``count`` 1, ``milli`` below a whole GPU), packed onto one device that has that much
free. A node fits a pod when its CPU and memory hold the pod's, its GPU model is one the pod
accepts, and its devices hold the pod's ask.

**Fragmentation** is measured as Weng et al. define it (FGD, USENIX ATC'23) against a mix of
typical tasks ``TaskMix``: for a task class a node can host, the free share of the devices too
small for the class's share of one GPU (for whole-GPU classes, every partly used device); for a
class it cannot host (CPU, GPU model or devices short, or a class that asks no GPU), all of the
node's idle GPU. A node's fragmentation is the mix's expectation of that. Placing a pod where it
raises the cluster's fragmentation least (``fragmentation_growth``) keeps the idle GPU usable by
the pods that typically come.

Everything here is a pure function of arrays; memory is not part of fragmentation (as in FGD).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from topoq.domain.errors import InvalidInputError

WHOLE_GPU_MILLI = 1000
"""Thousandths of one GPU in a whole device."""
TYPICAL_SHARE = 0.95
"""The typical tasks are the most common classes that together make this share of all tasks."""

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class GpuAsk:
    """What one pod asks of a node: CPU (millicores), memory (any unit, the node's), GPU
    devices (``count`` of them, each ``milli`` thousandths: below ``WHOLE_GPU_MILLI`` only
    for a share of one device) and the GPU models it accepts (indexes; empty: any)."""

    cpu: int = 0
    memory: int = 0
    count: int = 0
    milli: int = 0
    models: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if self.count < 0 or self.cpu < 0 or self.memory < 0:
            raise InvalidInputError(
                "a negative request", hint="ask for 0 or more CPU, memory and GPUs"
            )
        if self.count and not 0 < self.milli <= WHOLE_GPU_MILLI:
            raise InvalidInputError(
                f"a GPU share of {self.milli} thousandths",
                hint=f"a pod asks for 1 to {WHOLE_GPU_MILLI} thousandths of each GPU",
            )
        if self.count > 1 and self.milli != WHOLE_GPU_MILLI:
            raise InvalidInputError(
                f"part ({self.milli} thousandths) of each of {self.count} GPUs",
                hint="a pod asks for whole GPUs, or for part of one GPU",
            )
        if not self.count and self.milli:
            raise InvalidInputError(
                f"{self.milli} thousandths of no GPU", hint="give the GPU count as well"
            )

    @property
    def shares_a_device(self) -> bool:
        """It asks for part of one device (and may share it with others)."""
        return self.count == 1 and self.milli < WHOLE_GPU_MILLI

    @property
    def gpu_milli(self) -> int:
        """All the GPU it asks for, in thousandths."""
        return self.count * self.milli


@dataclass(frozen=True)
class DeviceRoom:
    """What is free on each node (one row per node): CPU, memory, each GPU device's share in
    thousandths (``devices``: a column per device slot; a slot a node lacks stays 0), and the
    node's GPU model (an index)."""

    cpu: IntArray
    memory: IntArray
    devices: IntArray
    model: IntArray
    capacity_milli: int
    """All the GPU in the cluster, in thousandths (what ``devices`` held with nothing run)."""

    @classmethod
    def empty(
        cls,
        cpu: Sequence[int],
        memory: Sequence[int],
        gpus: Sequence[int],
        model: Sequence[int],
    ) -> DeviceRoom:
        """Nodes on which nothing runs: each with ``gpus`` whole devices."""
        slots = max(gpus, default=0)
        devices = np.zeros((len(gpus), slots), dtype=np.int64)
        for row, count in enumerate(gpus):
            devices[row, :count] = WHOLE_GPU_MILLI
        return cls(
            np.asarray(cpu, dtype=np.int64),
            np.asarray(memory, dtype=np.int64),
            devices,
            np.asarray(model, dtype=np.int64),
            int(devices.sum()),
        )

    @property
    def allocated_milli(self) -> int:
        """The GPU taken, in thousandths, over the whole cluster."""
        return self.capacity_milli - int(self.devices.sum())

    def fits(self, ask: GpuAsk) -> BoolArray:
        """The nodes that can host the pod now."""
        room = (self.cpu >= ask.cpu) & (self.memory >= ask.memory)
        if ask.models:
            room &= np.isin(self.model, list(ask.models))
        if ask.count:
            holding = (self.devices >= ask.milli).sum(axis=1)
            room &= holding >= ask.count
        return room

    def devices_for(self, node: int, ask: GpuAsk, device: int | None = None) -> tuple[int, ...]:
        """The devices of ``node`` the pod takes (``devices_on``)."""
        return devices_on(self.devices[node], ask, device, where=f"node {node}")

    def taking(self, node: int, ask: GpuAsk, devices: Sequence[int]) -> DeviceRoom:
        """The room once the pod runs on ``node``'s ``devices`` (``devices_for``)."""
        cpu, memory, free = self.cpu.copy(), self.memory.copy(), self.devices.copy()
        cpu[node] -= ask.cpu
        memory[node] -= ask.memory
        for device in devices:
            free[node, device] -= ask.milli
        if cpu[node] < 0 or memory[node] < 0 or (free[node] < 0).any():
            raise InvalidInputError(
                f"node {node} cannot host the pod", hint="place a pod only where it fits"
            )
        return DeviceRoom(cpu, memory, free, self.model, self.capacity_milli)


def devices_on(
    free: IntArray, ask: GpuAsk, device: int | None = None, where: str = "the node"
) -> tuple[int, ...]:
    """The devices a pod takes on a node whose devices have ``free`` thousandths each: whole
    ones, the first entirely free in slot order; a share, on ``device`` when given, else on
    the device with the least free that holds it (the first of those in slot order), which
    keeps whole devices whole for the pods that need them."""
    if not ask.count:
        return ()
    if ask.shares_a_device:
        if device is not None:
            if free[device] < ask.milli:
                raise InvalidInputError(
                    f"device {device} of {where} has {free[device]} thousandths free, "
                    f"not {ask.milli}",
                    hint="pack the pod onto a device that holds it",
                )
            return (device,)
        holding = np.flatnonzero(free >= ask.milli)
        if not len(holding):
            raise InvalidInputError(
                f"no device of {where} has {ask.milli} thousandths free",
                hint="place the pod on a node that fits it",
            )
        return (int(holding[np.argmin(free[holding])]),)
    whole = np.flatnonzero(free == WHOLE_GPU_MILLI)
    if len(whole) < ask.count:
        raise InvalidInputError(
            f"{where} has {len(whole)} whole GPUs free, not {ask.count}",
            hint="place the pod on a node that fits it",
        )
    return tuple(int(slot) for slot in whole[: ask.count])


def pods_on_devices(devices: IntArray, ask: GpuAsk) -> IntArray:
    """Per row of device shares (a node's devices, in thousandths free), how many pods of
    ``ask`` its devices hold: for a share, each device's ``free // milli`` summed; for whole
    GPUs, the entirely free devices in ``count``s."""
    if not ask.count:
        return np.full(len(devices), np.iinfo(np.int64).max, dtype=np.int64)
    if ask.shares_a_device:
        return np.asarray((devices // ask.milli).sum(axis=1), dtype=np.int64)
    whole = (devices == WHOLE_GPU_MILLI).sum(axis=1)
    return np.asarray(whole // ask.count, dtype=np.int64)


def devices_for_pods(
    free: IntArray, ask: GpuAsk, pods: int, where: str = "the node", device: int | None = None
) -> tuple[tuple[tuple[int, ...], ...], IntArray]:
    """The devices each of ``pods`` pods of ``ask`` takes on one node (``devices_on``, pod
    after pod; ``device``: the one a single share takes, where it was chosen), and what they
    take of each device in all."""
    left = free.copy()
    picks = []
    for _ in range(pods):
        taken = devices_on(left, ask, device if pods == 1 else None, where=where)
        left[list(taken)] -= ask.milli
        picks.append(taken)
    return tuple(picks), free - left


@dataclass(frozen=True)
class TaskMix:
    """Typical tasks, a class per row: CPU, GPU count, share of each GPU, the models it
    accepts (a row of ``accepts``, a column per model index) and how common it is (``weight``,
    adding up to 1)."""

    cpu: IntArray
    count: IntArray
    milli: IntArray
    accepts: BoolArray
    weight: FloatArray

    def __len__(self) -> int:
        return len(self.weight)


def typical_tasks(asks: Iterable[GpuAsk], models: int, share: float = TYPICAL_SHARE) -> TaskMix:
    """The most common classes of ``asks`` (by CPU, GPU count, share and models; memory is
    not part of a class) that together make ``share`` of them, each weighted by how many
    there are among those kept (FGD's typical pods)."""
    counted = Counter((ask.cpu, ask.count, ask.milli, ask.models) for ask in asks)
    return typical_of_counts(counted, models, share)


def typical_of_counts(
    counted: Mapping[tuple[int, int, int, frozenset[int]], int],
    models: int,
    share: float = TYPICAL_SHARE,
) -> TaskMix:
    """``typical_tasks`` of asks already counted by class (CPU, GPU count, share, models)."""
    if not counted:
        raise InvalidInputError("no task to learn the mix from", hint="give tasks")
    enough = share * sum(counted.values())
    ordered = sorted(
        counted.items(),
        key=lambda item: (item[1], item[0][:3], sorted(item[0][3])),
        reverse=True,
    )
    kept: list[tuple[tuple[int, int, int, frozenset[int]], int]] = []
    made = 0
    for item in ordered:
        kept.append(item)
        made += item[1]
        if made >= enough:
            break
    accepts = np.ones((len(kept), max(models, 1)), dtype=np.bool_)
    for row, ((_, _, _, allowed), _) in enumerate(kept):
        if allowed:
            accepts[row] = False
            accepts[row, sorted(allowed)] = True
    weight = np.asarray([number for _, number in kept], dtype=np.float64)
    return TaskMix(
        np.asarray([key[0] for key, _ in kept], dtype=np.int64),
        np.asarray([key[1] for key, _ in kept], dtype=np.int64),
        np.asarray([key[2] for key, _ in kept], dtype=np.int64),
        accepts,
        weight / weight.sum(),
    )


def fragmentation(room: DeviceRoom, mix: TaskMix, nodes: IntArray | None = None) -> FloatArray:
    """Each node's expected fragmented GPU, in thousandths, against ``mix`` (all nodes, or
    those of ``nodes``)."""
    rows = np.arange(len(room.cpu)) if nodes is None else nodes
    small, holding = _per_class(room.devices[rows], mix)
    idle = room.devices[rows].sum(axis=1)
    return _expected(room.cpu[rows], room.model[rows], idle, small, holding, mix)


def fragmentation_growth(
    room: DeviceRoom, ask: GpuAsk, mix: TaskMix, nodes: IntArray
) -> tuple[FloatArray, IntArray]:
    """For each of ``nodes`` (each of which fits ``ask``), how much placing the pod there
    grows the node's fragmentation against ``mix`` (negative: it shrinks), on the device that
    grows it least (the first such in slot order; -1 for a pod of no share of a device: whole
    devices are taken first in slot order, as ``devices_for`` takes them)."""
    free = room.devices[nodes]
    small, holding = _per_class(free, mix)
    idle = free.sum(axis=1)
    cpu, model = room.cpu[nodes], room.model[nodes]
    before = _expected(cpu, model, idle, small, holding, mix)
    after_cpu = cpu - ask.cpu
    if not ask.shares_a_device:
        # whole devices are entirely free: no class finds them too small before or after
        # (the too-small sums stay), and every class holds on that many fewer devices
        after = _expected(
            after_cpu,
            model,
            idle - ask.gpu_milli,
            small,
            holding - ask.count,
            mix,
        )
        return after - before, np.full(len(nodes), -1, dtype=np.int64)
    # a share: one option per device slot; a slot that cannot hold it is never the best
    share = ask.milli
    was = free[:, :, None]  # node, slot, class
    now = was - share
    need = mix.milli[None, None, :]
    small_after = small[:, None, :] - np.where(was < need, was, 0) + np.where(now < need, now, 0)
    holding_after = holding[:, None, :] - (was >= need) + (now >= need)
    slots = free.shape[1]
    after = _expected(
        np.repeat(after_cpu, slots),
        np.repeat(model, slots),
        np.repeat(idle - share, slots),
        small_after.reshape(-1, len(mix)),
        holding_after.reshape(-1, len(mix)),
        mix,
    ).reshape(len(nodes), slots)
    after = np.where(free >= share, after, np.inf)
    best = np.argmin(after, axis=1)
    return after[np.arange(len(nodes)), best] - before, best.astype(np.int64)


def fragmentation_points(growth: FloatArray) -> IntArray:
    """FGD's score of a placement, 0 to 100 whole points: the logistic function of the fall in
    fragmentation (in whole GPUs), truncated. A point is about 40 thousandths of a GPU near no
    change; placements that grow it by more than ~4.6 GPUs all score 0, those that shrink it
    by as much all score 99."""
    return np.trunc(100.0 / (1.0 + np.exp(growth / WHOLE_GPU_MILLI))).astype(np.int64)


def least_fragmenting(growth: FloatArray, slack: FloatArray | None) -> int:
    """Which placement to take (an index into the arrays): the best ``fragmentation_points``,
    ties to the least ``slack`` (what the node has left after it: the tightest fit) when it
    is given, then the first."""
    return best_scored(fragmentation_points(growth), slack)


def best_scored(points: IntArray, slack: FloatArray | None) -> int:
    """``least_fragmenting`` of placements already scored (``fragmentation_points``)."""
    if slack is None:
        return int(np.argmax(points))
    return int(np.lexsort((slack, -points))[0])


def ties_to_tightest(ask: GpuAsk, mix: TaskMix) -> bool:
    """Whether ``least_fragmenting`` should break the ties of ``ask``'s placement by the
    tightest fit. It should, except for a pod that accepts any GPU model when some typical
    tasks accept only some models: the tightest nodes are then often the small ones of the
    models those tasks need (openb's T4s), and filling them leaves those tasks nowhere to go;
    such a pod's ties go to the first node instead. On Alibaba's openb lists, tightness gains
    up to 2 points of the cluster's GPU where no task names a model and, where tasks do,
    loses up to 4.4 (docs/gpu-sharing.md)."""
    return bool(ask.models) or bool(mix.accepts.all())


def _per_class(free: IntArray, mix: TaskMix) -> tuple[IntArray, IntArray]:
    """Per node (row of ``free``) and class: the free share of devices too small for the
    class's share of one GPU, and how many devices hold that share."""
    need = mix.milli[None, None, :]
    device = free[:, :, None]
    too_small = device < need
    small = np.where(too_small, device, 0).sum(axis=1)
    holding = (~too_small).sum(axis=1)
    return small, holding


def _expected(
    cpu: IntArray,
    model: IntArray,
    idle: IntArray,
    small: IntArray,
    holding: IntArray,
    mix: TaskMix,
) -> FloatArray:
    """Σ over classes of weight × (the too-small share where the node hosts the class, all
    idle GPU where it does not)."""
    hosts = (
        (cpu[:, None] >= mix.cpu[None, :])
        & mix.accepts[:, model].T
        & (holding >= mix.count[None, :])
        & (mix.count[None, :] > 0)
    )
    per_class = np.where(hosts, small, idle[:, None])
    return per_class @ mix.weight
