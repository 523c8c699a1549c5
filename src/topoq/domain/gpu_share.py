"""Shares of one GPU: how a pod asks for part of a GPU, and the resources that count it.

A pod asks for whole GPUs (``nvidia.com/gpu: 2``) or for a share of one
(``nvidia.com/gpu: 0.5`` or ``500m``). A share is kept as a resource of its own,
``topoq.io/gpu-milli`` (thousandths of one GPU, 1 to 999), so that whole GPUs stay counted in
whole devices wherever they are counted now (quotas, inventories, stored jobs, metrics).

Nodes an admin opens to shares carry the label ``topoq.io/gpu-sharing: "true"``. Only on
those nodes does the scheduler keep each GPU device's free share, as the derived resources
``topoq.io/gpu-device-<i>`` (1,000 on a free device), and offer ``topoq.io/gpu-milli`` (1,000
per GPU, taken by shares only); a share is packed onto one device and a whole-GPU pod takes
entirely free devices. What anything holds in GPUs is always its ``nvidia.com/gpu`` plus its
``topoq.io/gpu-milli`` / 1,000 (``gpus_held``). See docs/gpu-sharing.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from topoq.domain.errors import InvalidInputError, InvalidRequestError
from topoq.domain.quantity import NVIDIA_GPU, quantity_value
from topoq.domain.resources import Resources

GPU_SHARE = "topoq.io/gpu-milli"
"""A pod's share of one GPU, in thousandths (1 to 999); derived from ``nvidia.com/gpu``."""
GPU_MILLI_PER_GPU = 1000
GPU_DEVICE_PREFIX = "topoq.io/gpu-device-"
"""``topoq.io/gpu-device-<i>``: the free share of device ``i`` of a node open to shares."""
GPU_SHARING_LABEL = "topoq.io/gpu-sharing"
"""A node label: ``"true"`` opens the node's GPUs to pods that ask for a share of one."""
GPU_MODEL_LABEL = "nvidia.com/gpu.product"
"""The node label naming a node's GPU model (as NVIDIA's GPU feature discovery sets it)."""
MAX_DEVICES_PER_NODE = 64
"""Devices a node open to shares may have (GPU nodes have 1 to 16)."""

_SHARE_HINT = (
    "a pod asks for whole GPUs (1, 2, ...) or for a share of one GPU between 0.001 and 0.999 "
    "(e.g. 0.5 or 500m); for more than one GPU's worth, ask whole GPUs or run more pods"
)


def device_resource(index: int) -> str:
    """The derived resource of device ``index`` of a node open to shares."""
    return f"{GPU_DEVICE_PREFIX}{index}"


def is_device_resource(name: str) -> bool:
    return name.startswith(GPU_DEVICE_PREFIX)


def is_derived_gpu_resource(name: str) -> bool:
    """Resources the scheduler derives for GPU shares (users never write the devices)."""
    return name == GPU_SHARE or is_device_resource(name)


def opens_gpus_to_shares(labels: Mapping[str, str]) -> bool:
    """Whether a node's labels open its GPUs to shares."""
    return labels.get(GPU_SHARING_LABEL, "").lower() == "true"


def per_pod_gpu_ask(text: str | int | float, where: str) -> tuple[str, int]:
    """A pod's ``nvidia.com/gpu`` as written, as ``(resource, amount)``: whole GPUs as
    ``nvidia.com/gpu``, a share of one as ``topoq.io/gpu-milli`` in thousandths. Refuses
    what is neither (1.5, 0.0005, negative) with what to write instead."""
    value = quantity_value(text)
    if value < 0:
        raise InvalidInputError(
            f"{NVIDIA_GPU}: {text!r} is negative", where=where, hint="ask for 0 or more GPUs"
        )
    if value == value.to_integral_value():
        return NVIDIA_GPU, int(value)
    milli = value * GPU_MILLI_PER_GPU
    if value > 1 or milli != milli.to_integral_value() or milli < 1:
        raise InvalidInputError(
            f"{NVIDIA_GPU}: {text!r} is neither whole GPUs nor a share of one GPU in thousandths",
            where=where,
            hint=_SHARE_HINT,
        )
    return GPU_SHARE, int(milli)


MAX_GPUS_ASKED = 1_000_000
"""The most whole GPUs a count a user writes in a scenario or a trace may ask for (far above
any node's or cluster's)."""


def bounded_gpu_ask(text: str | int | float, where: str) -> tuple[str, int] | None:
    """``per_pod_gpu_ask``, or None for whole GPUs outside 1 to ``MAX_GPUS_ASKED`` (its own
    refusals stand)."""
    resource, amount = per_pod_gpu_ask(text, where)
    if resource == NVIDIA_GPU and not 1 <= amount <= MAX_GPUS_ASKED:
        return None
    return resource, amount


def check_pod_gpu_ask(requests: Resources, where: str) -> None:
    """A pod's GPU ask is whole GPUs or a share of one below a whole GPU, never both, and
    never a device's resource (those the scheduler derives on nodes open to shares)."""
    share = requests.amount(GPU_SHARE)
    if share >= GPU_MILLI_PER_GPU:
        raise InvalidRequestError(
            f"{GPU_SHARE}: {share} is a whole GPU or more", where=where, hint=_SHARE_HINT
        )
    if share and requests.amount(NVIDIA_GPU):
        raise InvalidRequestError(
            f"a pod asks for {requests.amount(NVIDIA_GPU)} whole GPUs and a share of another "
            f"({gpus_text(0, share)} GPU)",
            where=where,
            hint=_SHARE_HINT,
        )
    derived = sorted(name for name in requests if is_device_resource(name))
    if derived:
        raise InvalidRequestError(
            f"{derived[0]} is kept by the scheduler, not asked for",
            where=where,
            hint="ask for nvidia.com/gpu (whole GPUs, or a share such as 0.5); the scheduler "
            "picks the device",
        )


def gpus_held(resources: Resources) -> float:
    """GPUs in whole devices plus shares: 1.5 for three pods of 0.5."""
    share = resources.amount(GPU_SHARE)
    whole = resources.amount(NVIDIA_GPU)
    return whole + share / GPU_MILLI_PER_GPU if share else whole


def gpu_number(gpus: float) -> int | float:
    """GPUs as a whole number when they are whole (8, not 8.0), else as they are (1.5)."""
    return int(gpus) if float(gpus).is_integer() else gpus


def gpus_text(gpus: int, milli: int = 0) -> str:
    """Whole GPUs plus thousandths as a readable number: ``2``, ``0.5``, ``3.25``."""
    total = Decimal(gpus) + Decimal(milli) / GPU_MILLI_PER_GPU
    text = f"{total:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
