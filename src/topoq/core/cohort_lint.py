"""Lint findings about the cohort tree (see :mod:`topoq.core.policy_lint`).

- ``COHORT_WITHOUT_TEAMS`` (warning): a declared cohort no team is under; its guarantee and
  limits govern nothing.
- ``COHORT_LIMIT_CANNOT_HOLD`` (warning): a child cohort's borrow limit of a resource is larger
  than what may reach it through its parent: the parent's own borrow limit plus what the rest
  of the parent's subtree is guaranteed. The parent's limit binds first.
- ``COHORT_LIMIT_UNREACHABLE`` (warning): a cohort's borrow limit is larger than everything the
  rest of its top-level cohort is guaranteed plus the idle capacity (none without idle
  sharing): the subtree can never borrow that much.
"""

from __future__ import annotations

from collections.abc import Mapping

from topoq.core.cohort_tree import CohortTree
from topoq.domain.governance import ClusterPolicy, CohortPath, CohortSpec, FlavorName
from topoq.domain.lint import LintCode, LintFinding, LintSeverity, readable_amount
from topoq.domain.resources import Resources


def cohort_findings(
    policy: ClusterPolicy, capacity: Mapping[FlavorName, Resources]
) -> list[LintFinding]:
    tree = CohortTree.of(policy)
    findings: list[LintFinding] = []
    for cohort in policy.cohorts:
        if not _has_teams(tree, cohort.path):
            findings.append(
                LintFinding(
                    LintSeverity.WARNING,
                    LintCode.COHORT_WITHOUT_TEAMS,
                    f"cohort {_name(cohort.path)} has no team below it, so its quotas and "
                    "limits govern nothing",
                    f"put teams under it (cohort: [{', '.join(cohort.path)}]), or remove it",
                )
            )
        findings += _limit_findings(policy, tree, cohort, capacity)
    return findings


def _has_teams(tree: CohortTree, path: CohortPath) -> bool:
    return any(team_path[: len(path)] == path for team_path in tree.teams)


def _limit_findings(
    policy: ClusterPolicy,
    tree: CohortTree,
    cohort: CohortSpec,
    capacity: Mapping[FlavorName, Resources],
) -> list[LintFinding]:
    findings: list[LintFinding] = []
    for quota in cohort.quotas:
        flavor = quota.flavor
        mine = _guaranteed(tree, cohort.path, flavor)
        top = _guaranteed(tree, cohort.path[:1], flavor)
        idle = Resources()
        if policy.idle_resource_sharing:
            guaranteed = Resources()
            for path in tree.order:
                if len(path) <= 1:
                    guaranteed = guaranteed + _guaranteed(tree, path, flavor)
            idle = capacity.get(flavor, Resources()) - guaranteed
        parent = tree.quota(cohort.parent, flavor) if cohort.parent else None
        for name in sorted(quota.borrow_limited):
            limit = quota.borrow_limit.amount(name)
            if parent is not None and name in parent.borrow_limited:
                through = parent.borrow_limit.amount(name) + (
                    _guaranteed(tree, cohort.parent, flavor).amount(name) - mine.amount(name)
                )
                if limit > through:
                    findings.append(_cannot_hold(cohort, flavor, name, limit, through))
                    continue
            available = top.amount(name) - mine.amount(name) + max(0, idle.amount(name))
            if limit > available:
                findings.append(_unreachable(cohort, flavor, name, limit, available))
    return findings


def _guaranteed(tree: CohortTree, path: CohortPath, flavor: FlavorName) -> Resources:
    return tree.guaranteed.get(path, {}).get(flavor, Resources())


def _cannot_hold(
    cohort: CohortSpec, flavor: FlavorName, name: str, limit: int, through: int
) -> LintFinding:
    return LintFinding(
        LintSeverity.WARNING,
        LintCode.COHORT_LIMIT_CANNOT_HOLD,
        f"cohort {_name(cohort.path)} may borrow {readable_amount(name, limit)} of {flavor} "
        f"(absoluteBorrowLimits), but its parent {_name(cohort.parent)}'s borrow limit and the "
        f"rest of the parent's guarantee let in at most {readable_amount(name, through)}",
        f"lower the cohort's {flavor} {name} borrow limit to {readable_amount(name, through)}, "
        f"or raise {_name(cohort.parent)}'s",
    )


def _unreachable(
    cohort: CohortSpec, flavor: FlavorName, name: str, limit: int, available: int
) -> LintFinding:
    return LintFinding(
        LintSeverity.WARNING,
        LintCode.COHORT_LIMIT_UNREACHABLE,
        f"cohort {_name(cohort.path)} may borrow {readable_amount(name, limit)} of {flavor} "
        f"(absoluteBorrowLimits), more than the rest of the tree can lend it "
        f"({readable_amount(name, max(available, 0))}: others' guarantees in "
        f"{_name(cohort.path[:1])} and idle capacity)",
        f"lower the limit to {readable_amount(name, max(available, 0))}, or leave it out "
        "(no limit)",
    )


def _name(path: CohortPath) -> str:
    return "/".join(path) or "(teams without a cohort)"
