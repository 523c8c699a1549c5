"""A policy's quotas as fixed-order whole amounts, worked out once per policy and flavor.

The quota books add, subtract and compare amounts of a flavor's *covered* resources (those some
team's or cohort's quota names) thousands of times a cycle. As ``Resources`` mappings each step
builds and sorts a dict; here an amount is a tuple of ints, one per covered resource in sorted
order (``Amounts``), and every team's guarantee and limits, every cohort's own guarantee,
limits and subtree guarantee are such tuples, made once. Small tuples beat numpy arrays at
these sizes (a flavor covers one to four resources, and numpy pays up to a microsecond or more
per operation on them): see docs/adr/0008-quota-arithmetic-in-tuples.md.

**Shares of a GPU count against GPU quota** (docs/governance.md). A pod may ask for part of one
GPU, kept as its own resource ``topoq.io/gpu-milli`` (thousandths, ``domain.gpu_share``), while
quotas, inventories and stored jobs count whole GPUs as ``nvidia.com/gpu``. Inside the books
the ``nvidia.com/gpu`` column is kept in thousandths of a GPU: every guarantee and limit of it
is scaled by 1,000 once, when the terms are built (``_in_order``), as is the flavor's capacity
of whole devices (``quota_amounts``; a derived ``topoq.io/gpu-milli`` of capacity is not
counted again); ``amounts`` folds a usage's ``nvidia.com/gpu × 1000 + topoq.io/gpu-milli``
into that column, and ``resources`` unfolds a value ``v`` back into ``nvidia.com/gpu: v //
1000`` and ``topoq.io/gpu-milli: v % 1000`` (whole GPUs read exactly as before). So one GPU
of quota binds whole GPUs and shares together, through every sum, comparison and settlement
here and in ``core.quota_flow`` — all of which are the same in any unit, so decisions of work
without shares do not change. Shares are covered only where GPUs are: a flavor whose quotas
name no ``nvidia.com/gpu`` limits neither. Per call this costs a flavor that covers GPUs one
multiplication and one look-up in ``amounts`` and a ``divmod`` in ``resources``; a flavor
that does not, one test of ``gpu``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from operator import add, le, sub

from topoq.core.cohort_tree import CohortTree, levels
from topoq.domain.governance import (
    ClusterPolicy,
    CohortPath,
    FlavorName,
    FlavorQuota,
    TeamName,
    TeamSpec,
)
from topoq.domain.gpu_share import GPU_MILLI_PER_GPU, GPU_SHARE
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources

Amounts = tuple[int, ...]
"""Whole amounts of a flavor's covered resources, in the order of ``FlavorTerms.names``
(``nvidia.com/gpu`` in thousandths of a GPU: see the module's docstring)."""


def plus(left: Amounts, right: Amounts) -> Amounts:
    return tuple(map(add, left, right))


def minus(left: Amounts, right: Amounts) -> Amounts:
    return tuple(map(sub, left, right))


def above_zero(amounts: Amounts) -> Amounts:
    """The positive part (``core.quota.positive``)."""
    return tuple([value if value > 0 else 0 for value in amounts])


def smaller(left: Amounts, right: Amounts) -> Amounts:
    return tuple(map(min, left, right))


def fits(amounts: Amounts, limit: Amounts) -> bool:
    return all(map(le, amounts, limit))


def total(amounts: Iterable[Amounts], zero: Amounts) -> Amounts:
    summed = zero
    for amount in amounts:
        summed = plus(summed, amount)
    return summed


@dataclass(frozen=True)
class CohortLimits:
    """A cohort's borrowing and lending limits of one flavor; ``*_limited`` marks the
    resources each limit speaks about (others are unlimited)."""

    borrow_limit: Amounts
    borrow_limited: tuple[bool, ...]
    lending_limit: Amounts
    lend_limited: tuple[bool, ...]


@dataclass(frozen=True)
class FlavorTerms:
    """One flavor's quotas as ``Amounts``. ``counted`` is False for a flavor the cluster has
    no capacity of: the books then count none of its usage or cohort guarantees (nothing is
    covered there), while teams' guarantees and limits still read as the policy gives them."""

    names: tuple[str, ...]
    column: Mapping[str, int]
    counted: bool
    zero: Amounts
    guarantee: Mapping[TeamName, Amounts]
    borrow_limit: Mapping[TeamName, Amounts]
    lending_limit: Mapping[TeamName, Amounts | None]
    """None: no lending limit (the whole unused guarantee is lent)."""
    lends: Mapping[TeamName, bool]
    """Whether the team lends at all (active, lending, with a quota of the flavor)."""
    own: Mapping[CohortPath, Amounts]
    """Each cohort's own covered guarantee."""
    limits: Mapping[CohortPath, CohortLimits | None]
    subtree: Mapping[CohortPath, Amounts]
    """Each cohort's subtree guarantee (``CohortTree.guaranteed``)."""
    top_guaranteed: Amounts
    """What the top-level cohorts' subtrees are guaranteed together (the rest is idle)."""
    gpu: int | None = None
    """The column of ``nvidia.com/gpu``, kept in thousandths of a GPU (None: not covered)."""

    def amounts(self, resources: Resources) -> Amounts:
        """The covered part of a usage or demand ``resources`` (nothing for a flavor not
        counted), a share of a GPU (``topoq.io/gpu-milli``) folded into the GPU column."""
        if not self.counted:
            return self.zero
        found = [resources.amount(name) for name in self.names]
        gpu = self.gpu
        if gpu is not None:
            found[gpu] = found[gpu] * GPU_MILLI_PER_GPU + resources.amount(GPU_SHARE)
        return tuple(found)

    def quota_amounts(self, resources: Resources) -> Amounts:
        """A quota's amounts or a capacity of whole devices in the books' units, whether or
        not the flavor is counted (as guarantees read); ``resources`` must name only covered
        resources to be read whole."""
        return _in_order(self.names, resources, self.gpu)

    def covered(self, resources: Resources) -> Resources:
        """The part of ``resources`` the books count (nothing for a flavor not counted): the
        covered resources and, where GPUs are covered, a share of a GPU."""
        if not self.counted:
            return Resources()
        shares = GPU_SHARE if self.gpu is not None else None
        return resources.restricted_to(
            self.column if shares is None or shares not in resources else {*self.column, shares}
        )

    def resources(self, amounts: Amounts) -> Resources:
        """``amounts`` as ``Resources``: the GPU column as whole ``nvidia.com/gpu`` and, for a
        part of one, ``topoq.io/gpu-milli``."""
        gpu = self.gpu
        if gpu is None or not amounts[gpu]:  # no GPUs: nothing to unfold
            return Resources.of_amounts(self.names, amounts)
        listed = list(amounts)
        listed[gpu], part = divmod(listed[gpu], GPU_MILLI_PER_GPU)
        if not part:
            return Resources.of_amounts(self.names, listed)
        return Resources({**dict(zip(self.names, listed, strict=True)), GPU_SHARE: part})


class PolicyTerms:
    """A policy's cohort tree and, per flavor, its ``FlavorTerms`` (made when first asked)."""

    def __init__(self, policy: ClusterPolicy, tree: CohortTree) -> None:
        self.policy = policy
        self.tree = tree
        self._flavors: dict[tuple[FlavorName, bool], FlavorTerms] = {}

    def flavor(self, flavor: FlavorName, counted: bool) -> FlavorTerms:
        known = self._flavors.get((flavor, counted))
        if known is None:
            known = self._flavors[(flavor, counted)] = _flavor_terms(self, flavor, counted)
        return known

    def known(self, flavor: FlavorName, counted: bool) -> FlavorTerms | None:
        """The flavor's terms if they were worked out already."""
        return self._flavors.get((flavor, counted))

    def with_team_quota(
        self, policy: ClusterPolicy, team: TeamName, flavor: FlavorName
    ) -> PolicyTerms:
        """The terms of ``policy``, which differs from this one's only in ``team``'s quota of
        ``flavor``: the cohort tree and that flavor's terms adjusted for the one team instead
        of worked out again (a waiting job's remedies try such policies, dozens a cycle);
        the other flavors' terms are the same."""
        before, after = self.policy.by_team[team], policy.by_team[team]
        old, new = before.quota_for(flavor), after.quota_for(flavor)
        delta = (new.guarantee if new else Resources()) - (old.guarantee if old else Resources())
        moved = after.active and bool(delta)
        tree = self.tree.with_guarantee_moved(after.cohort, flavor, delta) if moved else self.tree
        made = PolicyTerms(policy, tree)
        old_covers = old.covers if old else frozenset()
        for (name, counted), terms in self._flavors.items():
            if name != flavor:
                made._flavors[(name, counted)] = terms
            elif new is not None and old_covers <= new.covers <= terms.column.keys():
                made._flavors[(name, counted)] = _with_team(terms, made, after, new)
        return made


_KNOWN: dict[int, PolicyTerms] = {}
"""Terms of the policies seen lately, by identity (each entry keeps its policy alive, so an
identity is never reused while it is here)."""
_MAX_KNOWN = 64


def terms_of(policy: ClusterPolicy, tree: CohortTree | None = None) -> PolicyTerms:
    """The policy's terms: worked out once per policy (a cycle builds several books of one
    policy, and each copy shares them), unless another cohort tree is given."""
    known = _KNOWN.get(id(policy))
    if known is not None and known.policy is policy and (tree is None or tree is known.tree):
        return known
    made = PolicyTerms(policy, tree if tree is not None else CohortTree.of(policy))
    if tree is None:
        if len(_KNOWN) >= _MAX_KNOWN:
            _KNOWN.clear()
        _KNOWN[id(policy)] = made
    return made


def _covered_names(policy: ClusterPolicy, flavor: FlavorName) -> tuple[str, ...]:
    names: set[str] = set()
    for team in policy.teams:
        quota = team.quota_for(flavor)
        if quota is not None:
            names.update(quota.covers)
    for cohort in policy.cohorts:
        cohort_quota = cohort.quota_for(flavor)
        if cohort_quota is not None:
            names.update(cohort_quota.covers)
    return tuple(sorted(names))


def _flavor_terms(terms: PolicyTerms, flavor: FlavorName, counted: bool) -> FlavorTerms:
    policy, tree = terms.policy, terms.tree
    names = _covered_names(policy, flavor)
    gpu = names.index(NVIDIA_GPU) if NVIDIA_GPU in names else None
    zero: Amounts = (0,) * len(names)
    guarantee, borrow_limit, lending_limit, lends = {}, {}, {}, {}
    for team in policy.teams:
        quota = team.quota_for(flavor)
        guarantee[team.name] = _in_order(names, quota.guarantee, gpu) if quota else zero
        borrow_limit[team.name] = _in_order(names, quota.borrow_limit, gpu) if quota else zero
        limit = quota.lending_limit if quota else None
        lending_limit[team.name] = _in_order(names, limit, gpu) if limit is not None else None
        lends[team.name] = quota is not None and team.sharing.lends and team.active
    own: dict[CohortPath, Amounts] = {}
    limits: dict[CohortPath, CohortLimits | None] = {}
    subtree: dict[CohortPath, Amounts] = {}
    for path in tree.order:
        guaranteed = tree.guaranteed.get(path, {}).get(flavor, Resources())
        subtree[path] = _in_order(names, guaranteed, gpu)
        cohort_quota = tree.quota(path, flavor)
        own[path] = (
            _in_order(names, cohort_quota.guarantee, gpu) if cohort_quota and counted else zero
        )
        limits[path] = (
            CohortLimits(
                _in_order(names, cohort_quota.borrow_limit, gpu),
                tuple(name in cohort_quota.borrow_limited for name in names),
                _in_order(names, cohort_quota.lending_limit, gpu),
                tuple(name in cohort_quota.lend_limited for name in names),
            )
            if cohort_quota is not None
            else None
        )
    return FlavorTerms(
        names,
        {name: column for column, name in enumerate(names)},
        counted,
        zero,
        guarantee,
        borrow_limit,
        lending_limit,
        lends,
        own,
        limits,
        subtree,
        top_guaranteed=total((subtree[path] for path in tree.order if len(path) <= 1), zero),
        gpu=gpu,
    )


def _in_order(names: tuple[str, ...], resources: Resources, gpu: int | None) -> Amounts:
    """Whole amounts of a quota (or a capacity) in order, GPUs (column ``gpu``) scaled to
    thousandths: the books' units (made once per policy, not per call)."""
    found = [resources.amount(name) for name in names]
    if gpu is not None:
        found[gpu] *= GPU_MILLI_PER_GPU
    return tuple(found)


def _with_team(
    terms: FlavorTerms, made: PolicyTerms, team: TeamSpec, quota: FlavorQuota
) -> FlavorTerms:
    """``terms`` with ``team``'s quota (naming only resources already covered) in force."""
    names, name, gpu = terms.names, team.name, terms.gpu
    limit = quota.lending_limit
    subtree = dict(terms.subtree)
    flavor = quota.flavor
    for level in levels(team.cohort):
        subtree[level] = _in_order(
            names, made.tree.guaranteed.get(level, {}).get(flavor, Resources()), gpu
        )
    return replace(
        terms,
        guarantee={**terms.guarantee, name: _in_order(names, quota.guarantee, gpu)},
        borrow_limit={**terms.borrow_limit, name: _in_order(names, quota.borrow_limit, gpu)},
        lending_limit={
            **terms.lending_limit,
            name: _in_order(names, limit, gpu) if limit is not None else None,
        },
        lends={**terms.lends, name: team.sharing.lends and team.active},
        subtree=subtree,
        top_guaranteed=total(
            (subtree[path] for path in made.tree.order if len(path) <= 1), terms.zero
        ),
    )
