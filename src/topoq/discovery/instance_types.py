"""A built-in table of the GPU and Trainium instance types topoq knows the capacity of.

Figures are the published EC2 specifications: accelerators, vCPUs, memory (GiB) and the number
of EFA interfaces the instance exposes to pods (``vpc.amazonaws.com/efa``). SageMaker names
(``ml.p5.48xlarge``) are accepted wherever an EC2 name is.
"""

from __future__ import annotations

from dataclasses import dataclass

from topoq.domain.flavors import normalize_flavor
from topoq.domain.quantity import CPU, EFA, MEMORY, NEURON_DEVICE, NVIDIA_GPU, PODS
from topoq.domain.resources import Resources

GIB = 2**30


@dataclass(frozen=True)
class InstanceType:
    name: str
    accelerators: int
    accelerator_resource: str
    vcpus: int
    memory_gib: int
    efa_interfaces: int
    max_pods: int = 110

    def allocatable(self) -> Resources:
        """The whole instance as Kubernetes would advertise it (no system reservation)."""
        return Resources(
            {
                CPU: self.vcpus * 1000,
                MEMORY: self.memory_gib * GIB,
                self.accelerator_resource: self.accelerators,
                EFA: self.efa_interfaces,
                PODS: self.max_pods,
            }
        )

    def share(self, accelerators: int) -> Resources:
        """vCPU and memory in proportion to ``accelerators`` of this instance (HyperPod's rule)."""
        if self.accelerators == 0:
            return Resources()
        fraction_cpu = self.vcpus * 1000 * accelerators // self.accelerators
        fraction_mem = self.memory_gib * GIB * accelerators // self.accelerators
        return Resources(
            {CPU: fraction_cpu, MEMORY: fraction_mem, self.accelerator_resource: accelerators}
        )


def _gpu(name: str, gpus: int, vcpus: int, memory_gib: int, efa: int) -> InstanceType:
    return InstanceType(name, gpus, NVIDIA_GPU, vcpus, memory_gib, efa)


def _neuron(name: str, devices: int, vcpus: int, memory_gib: int, efa: int) -> InstanceType:
    return InstanceType(name, devices, NEURON_DEVICE, vcpus, memory_gib, efa)


INSTANCE_TYPES: dict[str, InstanceType] = {
    instance.name: instance
    for instance in (
        _gpu("p4d.24xlarge", 8, 96, 1152, 4),
        _gpu("p4de.24xlarge", 8, 96, 1152, 4),
        _gpu("p5.48xlarge", 8, 192, 2048, 32),
        _gpu("p5.4xlarge", 1, 16, 256, 0),
        _gpu("p5e.48xlarge", 8, 192, 2048, 32),
        _gpu("p5en.48xlarge", 8, 192, 2048, 16),
        _gpu("p6-b200.48xlarge", 8, 192, 2048, 8),
        _gpu("p6e-gb200.36xlarge", 4, 144, 960, 8),
        _gpu("g5.12xlarge", 4, 48, 192, 0),
        _gpu("g5.48xlarge", 8, 192, 768, 1),
        _gpu("g6e.48xlarge", 8, 192, 1536, 4),
        _neuron("trn1.2xlarge", 1, 8, 32, 0),
        _neuron("trn1.32xlarge", 16, 128, 512, 8),
        _neuron("trn1n.32xlarge", 16, 128, 512, 16),
        _neuron("trn2.48xlarge", 16, 192, 2048, 16),
        _neuron("trn2u.48xlarge", 16, 192, 2048, 16),
    )
}


def normalize_instance_type(name: str) -> str:
    """``ml.p5.48xlarge`` → ``p5.48xlarge``: the flavor of nodes of that type
    (:func:`topoq.domain.flavors.normalize_flavor`)."""
    return normalize_flavor(name)


def find_instance_type(name: str) -> InstanceType | None:
    return INSTANCE_TYPES.get(normalize_instance_type(name))


def known_instance_types() -> list[str]:
    return sorted(INSTANCE_TYPES)
