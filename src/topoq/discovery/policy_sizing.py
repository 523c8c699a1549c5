"""Guarantees and borrow limits sized from instance types, the way HyperPod task governance
sizes a compute quota.

* whole instances: per instance, its accelerators, its EFA interfaces, and the vCPUs and memory
  it can allocate (its capacity less the reservation HyperPod assumes for the kubelet and system
  daemons, see :mod:`topoq.discovery.instance_sizing`), times the number of instances;
* accelerators: vCPU, memory and EFA interfaces in the same proportion of an instance, unless
  given (HyperPod's rule names vCPU and memory; EFA follows too, or a team with an accelerator
  quota could never run an EFA job once another team's whole-instance quota governs EFA);
* only vCPU, or only memory: the other in the same proportion of an instance.

A borrow limit resolves per resource: the absolute limit where one is given, else the borrow
percentage of the guarantee, rounded down.
"""

from __future__ import annotations

from collections.abc import Mapping

from topoq.discovery.instance_sizing import (
    max_allocatable_cpu_millis,
    max_allocatable_memory_bytes,
)
from topoq.discovery.instance_types import InstanceType
from topoq.domain.quantity import CPU, EFA, MEMORY
from topoq.domain.resources import Resources

PERCENT = 100
MAX_BORROW_LIMIT_PERCENT = 10_000
"""HyperPod's upper bound for ``BorrowLimit``."""


def instance_quota(instance: InstanceType, instances: int = 1) -> Resources:
    """What ``instances`` whole instances of ``instance`` contribute to a guarantee."""
    per_instance = Resources(
        {
            CPU: max_allocatable_cpu_millis(instance),
            MEMORY: max_allocatable_memory_bytes(instance),
            instance.accelerator_resource: instance.accelerators,
            EFA: instance.efa_interfaces,
        }
    )
    return per_instance.scaled(instances)


def instance_amounts(instance: InstanceType, sized: Resources) -> dict[str, int]:
    """``sized`` with every resource an instance has named, zeros included (a quota of 0
    instances still speaks about, and limits, each of them)."""
    return {name: sized.amount(name) for name in instance_quota(instance)}


def share_quota(
    instance: InstanceType,
    *,
    accelerators: int = 0,
    cpu_millis: int | None = None,
    memory_bytes: int | None = None,
) -> Resources:
    """Accelerators, vCPU and memory; what is not given follows in proportion of an instance
    (EFA interfaces with the accelerators)."""
    whole = instance_quota(instance)
    whole_cpu, whole_memory = whole.amount(CPU), whole.amount(MEMORY)
    if accelerators and instance.accelerators:
        if cpu_millis is None:
            cpu_millis = whole_cpu * accelerators // instance.accelerators
        if memory_bytes is None:
            memory_bytes = whole_memory * accelerators // instance.accelerators
    elif cpu_millis is None and memory_bytes is not None:
        cpu_millis = memory_bytes * whole_cpu // whole_memory
    elif memory_bytes is None and cpu_millis is not None:
        memory_bytes = cpu_millis * whole_memory // whole_cpu
    efa = 0
    if accelerators and instance.accelerators:
        efa = instance.efa_interfaces * accelerators // instance.accelerators
    return Resources(
        {
            CPU: cpu_millis or 0,
            MEMORY: memory_bytes or 0,
            instance.accelerator_resource: accelerators,
            EFA: efa,
        }
    )


def resolved_borrow_limit(
    guarantee: Resources, percent: int, absolute: Mapping[str, int] | None = None
) -> Resources:
    """Per resource: ``absolute`` where it names the resource (0 included), else ``percent`` of
    the guarantee, rounded down."""
    absolute = absolute or {}
    names = set(guarantee) | set(absolute)
    return Resources(
        {
            name: absolute[name]
            if name in absolute
            else guarantee.amount(name) * percent // PERCENT
            for name in names
        }
    )


def resolved_lending_limit(guarantee: Resources, given: Mapping[str, int]) -> Resources:
    """Per resource: the given limit, else the whole guarantee (a resource left out may all be
    lent)."""
    names = set(guarantee) | set(given)
    return Resources({name: given.get(name, guarantee.amount(name)) for name in names})
