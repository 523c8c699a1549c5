"""Node flavors: nodes grouped by instance type, the unit quotas are given in."""

from __future__ import annotations

from topoq.domain.governance import FlavorName
from topoq.domain.node import INSTANCE_TYPE_LABEL, NodeSpec

SAGEMAKER_PREFIX = "ml."
DEFAULT_FLAVOR = FlavorName("default")


def normalize_flavor(name: str) -> FlavorName:
    """``ml.p5.48xlarge`` and ``p5.48xlarge`` are the same flavor."""
    name = name.strip()
    return FlavorName(name[len(SAGEMAKER_PREFIX) :] if name.startswith(SAGEMAKER_PREFIX) else name)


def flavor_of(node: NodeSpec, label: str = INSTANCE_TYPE_LABEL) -> FlavorName:
    value = node.labels.get(label)
    return normalize_flavor(value) if value else DEFAULT_FLAVOR
