"""Whether a policy may be put in force on an inventory (pure): the policy lint
(:mod:`topoq.core.policy_lint`, what ``topoq policy lint`` runs offline) decides. An error
refuses the policy, naming the first error and how many more there are; warnings are
returned, for the server to log and answer with."""

from __future__ import annotations

from collections.abc import Sequence

from topoq.core.policy_lint import lint_policy
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy
from topoq.domain.lint import LintFinding
from topoq.domain.node import NodeSpec
from topoq.domain.topology import TopologySpec

__all__ = ["policy_warnings"]


def policy_warnings(
    policy: ClusterPolicy,
    nodes: Sequence[NodeSpec],
    topology: TopologySpec,
    *,
    where: str | None = None,
) -> list[LintFinding]:
    """The lint's warnings about ``policy`` on ``nodes``. Raises ``InvalidInputError`` (at
    ``where``) when the lint finds an error: such a policy cannot work on this cluster. No
    nodes (yet) is no finding."""
    if not nodes:  # an executor that reports the nodes has not yet: nothing to lint against
        return []
    findings = lint_policy(policy, nodes, topology)
    errors = [finding for finding in findings if finding.is_error]
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more lint errors)" if len(errors) > 1 else ""
        raise InvalidInputError(
            f"the policy does not fit the cluster's {len(nodes)} nodes: {first.code.value}: "
            f"{first.message}{more}",
            where=where,
            hint=f"{first.hint}; `topoq policy lint --policy FILE --cluster CLUSTER` lists every "
            "finding",
        )
    return [finding for finding in findings if not finding.is_error]
