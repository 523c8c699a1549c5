"""Per-pod requests sized from an instance type, the way SageMaker HyperPod sizes them.

* nothing but the instance type: the whole instance (all accelerators, vCPUs and memory);
* accelerators: vCPU and memory in the same proportion of the instance (``InstanceType.share``),
  unless given;
* only vCPU, or only memory: the other in the same proportion of the instance.

Then vCPU and memory are capped at what the instance can allocate: its capacity less the
reservation HyperPod assumes for the kubelet and system daemons (see :func:`cpu_reservation_millis`
and :func:`memory_reservation_gib`). Without the cap a whole-instance pod would never fit on a
node, whose allocatable is always below its capacity.
"""

from __future__ import annotations

from decimal import ROUND_FLOOR, Decimal

from topoq.discovery.instance_types import (
    GIB,
    InstanceType,
    find_instance_type,
    known_instance_types,
)
from topoq.domain.errors import InvalidInputError
from topoq.domain.quantity import CPU, EFA, MEMORY
from topoq.domain.resources import Resources

_MEMORY_RESERVATION_BASE_GIB = Decimal("0.5")
_MEMORY_RESERVATION_TIERS = (  # (GiB in the tier, fraction reserved), from the first GiB up
    (Decimal(4), Decimal("0.30")),
    (Decimal(4), Decimal("0.25")),
    (Decimal(8), Decimal("0.20")),
    (Decimal(112), Decimal("0.17")),
)
_MEMORY_RESERVATION_REST = Decimal("0.07")


def known_instance_type(name: str, *, where: str) -> InstanceType:
    """The instance type named ``name`` (EC2 or ``ml.`` name); unknown names list the known ones."""
    instance = find_instance_type(name)
    if instance is None:
        raise InvalidInputError(
            f"unknown instance type {name!r}",
            where=where,
            hint=f"use one of {', '.join(known_instance_types())} (an ml. prefix is allowed)",
        )
    return instance


def instance_requests(
    instance: InstanceType,
    *,
    accelerators: int | None = None,
    cpu_millis: int | None = None,
    memory_bytes: int | None = None,
    efa: int | None = None,
) -> Resources:
    """The requests of one pod on ``instance``; ``None`` means "derive it" (see the module)."""
    if accelerators is None and cpu_millis is None and memory_bytes is None:
        accelerators = instance.accelerators
    instance_cpu, instance_memory = instance.vcpus * 1000, instance.memory_gib * GIB
    if accelerators:
        share = instance.share(accelerators)
        cpu_millis = share.amount(CPU) if cpu_millis is None else cpu_millis
        memory_bytes = share.amount(MEMORY) if memory_bytes is None else memory_bytes
    elif cpu_millis is None and memory_bytes is not None:
        cpu_millis = memory_bytes * instance_cpu // instance_memory
    elif memory_bytes is None and cpu_millis is not None:
        memory_bytes = cpu_millis * instance_memory // instance_cpu
    amounts = {
        CPU: min(cpu_millis or 0, max_allocatable_cpu_millis(instance)),
        MEMORY: min(memory_bytes or 0, max_allocatable_memory_bytes(instance)),
        instance.accelerator_resource: accelerators or 0,
        EFA: efa or 0,
    }
    return Resources(amounts)


def max_allocatable_cpu_millis(instance: InstanceType) -> int:
    return instance.vcpus * 1000 - cpu_reservation_millis(instance.vcpus)


def max_allocatable_memory_bytes(instance: InstanceType) -> int:
    allocatable_gib = instance.memory_gib - memory_reservation_gib(instance.memory_gib)
    return int((allocatable_gib * GIB).to_integral_value(rounding=ROUND_FLOOR))


def cpu_reservation_millis(vcpus: int) -> int:
    """100m, then 30% of the first core, 15% of the second, 10% of the next two, 6% of the rest."""
    reserved = 100
    reserved += 300 if vcpus >= 1 else 0
    reserved += 150 if vcpus >= 2 else 0
    reserved += 100 * min(2, max(0, vcpus - 2))
    reserved += 60 * max(0, vcpus - 4)
    return reserved


def memory_reservation_gib(memory_gib: int) -> Decimal:
    """0.5 GiB, then 30% of the first 4 GiB, 25% of the next 4, 20% of the next 8, 17% of the
    next 112 and 7% of the rest."""
    reserved, remaining = _MEMORY_RESERVATION_BASE_GIB, Decimal(memory_gib)
    for tier, fraction in _MEMORY_RESERVATION_TIERS:
        portion = min(tier, remaining)
        reserved += portion * fraction
        remaining -= portion
    return reserved + max(remaining, Decimal(0)) * _MEMORY_RESERVATION_REST
