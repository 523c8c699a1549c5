"""Findings of a policy lint: what is wrong or suspicious in a policy, and how to fix it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from topoq.domain.quantity import CPU, MEMORY, NEURON_DEVICE, NVIDIA_GPU, byte_quantity

_HEADLINE_ORDER = (NVIDIA_GPU, NEURON_DEVICE, CPU, MEMORY)


class LintSeverity(StrEnum):
    ERROR = "error"
    """The policy cannot work as written: a guarantee that cannot be honoured, a gang that
    can never run."""
    WARNING = "warning"
    """The policy works, but probably not as meant: a setting that is ignored or has no effect."""


class LintCode(StrEnum):
    GUARANTEES_EXCEED_CAPACITY = "GUARANTEES_EXCEED_CAPACITY"
    """The teams' guarantees of a flavor and resource add up to more than the cluster has."""
    PARTIAL_GUARANTEE = "PARTIAL_GUARANTEE"
    """A team's guarantee of a flavor leaves out a resource other teams' guarantees there name:
    the team can use that resource only by borrowing."""
    FLAVOR_NOT_IN_CLUSTER = "FLAVOR_NOT_IN_CLUSTER"
    """A team has a quota for a flavor no node of the cluster is."""
    GANG_EXCEEDS_QUOTA = "GANG_EXCEEDS_QUOTA"
    """A team's typical gang needs more than its guarantee plus borrow limit in every flavor."""
    GANG_NEVER_PLACES = "GANG_NEVER_PLACES"
    """A team's typical gang does not fit the topology even on an empty cluster."""
    GANG_INVALID = "GANG_INVALID"
    """A typical gang cannot be evaluated (it names a level the topology does not have, …)."""
    GANG_UNKNOWN_TEAM = "GANG_UNKNOWN_TEAM"
    """A typical gang is given for a team the policy does not define."""
    UNKNOWN_PRIORITY_CLASS = "UNKNOWN_PRIORITY_CLASS"
    """A typical gang names a priority class the policy does not define."""
    ZERO_BORROW_LIMIT = "ZERO_BORROW_LIMIT"
    """A LendAndBorrow team whose borrow limit is zero everywhere: it can never borrow."""
    ZERO_FAIR_SHARE_WEIGHT = "ZERO_FAIR_SHARE_WEIGHT"
    """Under fair-share idle allocation, a team of weight 0 gets idle capacity last."""
    NO_QUOTA = "NO_QUOTA"
    """A team without a guarantee in any flavor."""
    IGNORED_BORROW_LIMIT = "IGNORED_BORROW_LIMIT"
    """A Lend or DontLend team has borrow limits; such a team never borrows."""
    IGNORED_LENDING_LIMIT = "IGNORED_LENDING_LIMIT"
    """A DontLend team has lending limits; such a team never lends."""
    IGNORED_PRIORITY_CLASSES = "IGNORED_PRIORITY_CLASSES"
    """Priority classes are defined but prioritization is fifo, so they do not order work."""
    SHORTEST_FIRST_WITHOUT_LIMITS = "SHORTEST_FIRST_WITHOUT_LIMITS"
    """Jobs are ordered shortest-first, but no priority class sets a time limit: only jobs
    that give their own go before the rest."""
    COHORT_WITHOUT_TEAMS = "COHORT_WITHOUT_TEAMS"
    """A cohort the policy declares has no team below it."""
    COHORT_LIMIT_CANNOT_HOLD = "COHORT_LIMIT_CANNOT_HOLD"
    """A cohort's borrow limit can never bind: its parent's limit and the rest of the parent's
    subtree let in less than it allows."""
    COHORT_LIMIT_UNREACHABLE = "COHORT_LIMIT_UNREACHABLE"
    """A cohort's borrow limit is larger than what the rest of the tree could ever lend it."""


@dataclass(frozen=True)
class LintFinding:
    severity: LintSeverity
    code: LintCode
    message: str
    """What is wrong, with the names and numbers behind it."""
    hint: str
    """What to change to fix it."""

    @property
    def is_error(self) -> bool:
        return self.severity is LintSeverity.ERROR


def readable_amount(resource: str, amount: int) -> str:
    """An amount as a finding shows it: ``2159.64 cpu``, ``1.85Ti memory`` (a Kubernetes
    quantity in the largest unit it reaches), ``64 nvidia.com/gpu``."""
    if resource == CPU:  # whole cores, or to the milli-core, never in exponent form
        return (
            f"{amount // 1000} cpu"
            if amount % 1000 == 0
            else f"{amount / 1000:.3f}".rstrip("0") + " cpu"
        )
    if resource == MEMORY:
        return f"{byte_quantity(amount)} memory"
    return f"{amount} {resource}"


def accelerators_first(resources: Iterable[str]) -> list[str]:
    """Resource names in the order a finding names them: accelerators, cpu, memory, the rest."""
    names = set(resources)
    first = [name for name in _HEADLINE_ORDER if name in names]
    return first + sorted(names - set(first))
