"""Which nodes of the tree a pod set may use: node selector, required affinity, taints.

Eligibility depends only on the immutable tree and the pod set's constraints, so each distinct
constraint set is evaluated once per tree and memoized. Evaluation works per distinct label
value and per distinct taint set, not per node, so it stays cheap at thousands of nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from topoq.core.tree import TopologyTree
from topoq.domain.node import Taint
from topoq.domain.placement import ExclusionCause
from topoq.domain.workload import NodeSelectorTerm, PodSetSpec, SelectorRequirement, Toleration

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Eligibility:
    mask: BoolArray
    """True for nodes (in tree order) the pod set may use."""
    excluded: Mapping[str, int]
    """How many nodes each cause excludes (a node counts once, under its first cause)."""

    @property
    def all_eligible(self) -> bool:
        return not self.excluded


def eligibility_key(pod_set: PodSetSpec) -> tuple[object, ...]:
    """What a pod set's eligibility follows from (its selector, affinity and tolerations), as
    a key to remember answers that follow from it on the tree."""
    return (
        tuple(sorted(pod_set.node_selector.items())),
        pod_set.affinity_terms,
        pod_set.tolerations,
    )


def eligibility_of(tree: TopologyTree, pod_set: PodSetSpec) -> Eligibility:
    key = ("eligibility", *eligibility_key(pod_set))
    cached = tree.memo(key)
    if isinstance(cached, Eligibility):
        return cached
    tolerated = _tolerated_mask(tree, pod_set.tolerations)
    selected = _selected_mask(tree, pod_set.node_selector, pod_set.affinity_terms)
    excluded: dict[str, int] = {}
    untolerated = int(np.count_nonzero(~tolerated))
    if untolerated:
        excluded[ExclusionCause.TAINT_NOT_TOLERATED.value] = untolerated
    mismatched = int(np.count_nonzero(tolerated & ~selected))
    if mismatched:
        excluded[ExclusionCause.SELECTOR_MISMATCH.value] = mismatched
    mask = tolerated & selected
    mask.setflags(write=False)
    result = Eligibility(mask, excluded)
    tree.remember(key, result)
    return result


def _tolerated_mask(tree: TopologyTree, tolerations: tuple[Toleration, ...]) -> BoolArray:
    verdicts: dict[tuple[Taint, ...], bool] = {}
    mask = np.ones(len(tree.nodes), dtype=np.bool_)
    for index, node in enumerate(tree.nodes):
        if not node.taints:
            continue
        verdict = verdicts.get(node.taints)
        if verdict is None:
            verdict = all(
                not taint.effect.blocks_scheduling
                or any(toleration.tolerates(taint) for toleration in tolerations)
                for taint in node.taints
            )
            verdicts[node.taints] = verdict
        mask[index] = verdict
    return mask


def _selected_mask(
    tree: TopologyTree, selector: Mapping[str, str], terms: tuple[NodeSelectorTerm, ...]
) -> BoolArray:
    mask = np.ones(len(tree.nodes), dtype=np.bool_)
    for key, wanted in selector.items():
        mask &= _label_verdicts(tree, key, _equals(wanted))
    if terms:
        any_term = np.zeros(len(tree.nodes), dtype=np.bool_)
        for term in terms:
            term_mask = np.ones(len(tree.nodes), dtype=np.bool_)
            for requirement in term.requirements:
                term_mask &= _label_verdicts(tree, requirement.key, _satisfies(requirement))
            any_term |= term_mask
        mask &= any_term
    return mask


def _equals(wanted: str) -> Callable[[str | None], bool]:
    return lambda value: value == wanted


def _satisfies(requirement: SelectorRequirement) -> Callable[[str | None], bool]:
    return lambda value: requirement.matches({} if value is None else {requirement.key: value})


def _label_verdicts(tree: TopologyTree, key: str, test: Callable[[str | None], bool]) -> BoolArray:
    codes, values = _label_column(tree, key)
    verdict = np.asarray([test(value) for value in values], dtype=np.bool_)
    return verdict[codes] if len(codes) else np.ones(0, dtype=np.bool_)


def _label_column(tree: TopologyTree, key: str) -> tuple[npt.NDArray[np.int64], list[str | None]]:
    """Each node's value of label ``key`` as a code into the list of distinct values."""
    memo_key = ("label-column", key)
    cached = tree.memo(memo_key)
    if isinstance(cached, tuple):
        return cached
    positions: dict[str | None, int] = {}
    codes = np.empty(len(tree.nodes), dtype=np.int64)
    for index, node in enumerate(tree.nodes):
        codes[index] = positions.setdefault(node.labels.get(key), len(positions))
    column = (codes, list(positions))
    tree.remember(memo_key, column)
    return column
