"""Linting a policy against a cluster: each check, asserted by its code."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from topoq.core.policy_lint import capacity_of_flavors, lint_policy
from topoq.discovery.clusterfile import load_example_cluster
from topoq.discovery.policy import load_policy
from topoq.discovery.policy_hyperpod import load_hyperpod_policy
from topoq.domain.flavors import DEFAULT_FLAVOR
from topoq.domain.governance import (
    ClusterPolicy,
    FlavorName,
    FlavorQuota,
    IdleAllocation,
    Prioritization,
    PriorityClass,
    QueueOrder,
    SharingStrategy,
    TeamName,
    TeamSpec,
)
from topoq.domain.lint import LintCode, LintFinding, LintSeverity
from topoq.domain.node import INSTANCE_TYPE_LABEL, NodeSpec
from topoq.domain.quantity import EFA, NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec
from topoq.domain.workload import WorkloadSpec
from topoq.testing.builders import BLOCK, SPINE, cluster, gpu_pods, workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"
P5, A100 = FlavorName("p5.48xlarge"), FlavorName("a100")
NLP, CV = TeamName("nlp"), TeamName("cv")


def p5_cluster(
    shape: Sequence[int] = (2, 2, 4), flavor: str = P5
) -> tuple[list[NodeSpec], TopologySpec]:
    """2 spines × 2 blocks × 4 nodes of 8 GPUs (128 GPUs), all of one instance type."""
    return cluster(shape, labels={INSTANCE_TYPE_LABEL: flavor})


def two_flavor_cluster() -> tuple[list[NodeSpec], TopologySpec]:
    """Blocks b0, b1 of p5 nodes (4 each) and blocks b2, b3 of a100 nodes."""
    nodes, spec = cluster((2, 2, 4))
    labelled = [
        NodeSpec(
            node.name,
            dict(node.labels) | {INSTANCE_TYPE_LABEL: "ml.p5.48xlarge" if index < 8 else A100},
            node.allocatable,
        )
        for index, node in enumerate(nodes)
    ]
    return labelled, spec


def gpus(amount: int, **more: int) -> Resources:
    return Resources({NVIDIA_GPU: amount, **more})


def team(
    name: str,
    guarantee: int | Resources = 0,
    *,
    borrow: int | Resources | None = None,
    flavor: FlavorName = P5,
    sharing: SharingStrategy = SharingStrategy.LEND_AND_BORROW,
    weight: int = 1,
    lending: Resources | None = None,
    active: bool = True,
) -> TeamSpec:
    """A team with one quota; it may borrow half its guarantee unless ``borrow`` says."""
    guaranteed = gpus(guarantee) if isinstance(guarantee, int) else guarantee
    if borrow is None:
        borrow = Resources({name: amount // 2 for name, amount in guaranteed.items()})
    limit = gpus(borrow) if isinstance(borrow, int) else borrow
    quota = FlavorQuota(flavor, guaranteed, limit, lending)
    return TeamSpec(TeamName(name), (quota,), sharing, weight, active=active)


def policy(*teams: TeamSpec, **settings: object) -> ClusterPolicy:
    return ClusterPolicy(teams=teams, **settings)  # type: ignore[arg-type]  # test settings


def lint(
    spec: ClusterPolicy,
    gangs: dict[TeamName, WorkloadSpec] | None = None,
    shape: Sequence[int] = (2, 2, 4),
) -> list[LintFinding]:
    nodes, topology = p5_cluster(shape)
    return lint_policy(spec, nodes, topology, typical_gangs=gangs)


def codes(findings: Sequence[LintFinding]) -> list[LintCode]:
    return [finding.code for finding in findings]


def the(findings: Sequence[LintFinding], code: LintCode) -> LintFinding:
    matching = [finding for finding in findings if finding.code is code]
    assert len(matching) == 1, findings
    return matching[0]


# --- a sound policy -----------------------------------------------------------------------


def test_a_sound_policy_has_no_findings() -> None:
    spec = policy(team("nlp", 64, borrow=32), team("cv", 32, borrow=16))

    assert lint(spec, {NLP: workload(gpu_pods(8, required=SPINE))}) == []


def test_the_example_policy_is_clean_on_the_example_cluster() -> None:
    example = load_example_cluster()

    findings = lint_policy(load_policy(EXAMPLES / "policy.yaml"), example.nodes, example.topology)

    assert findings == []


def test_the_hyperpod_examples_are_clean_on_the_example_cluster() -> None:
    example = load_example_cluster()
    hyperpod = EXAMPLES / "hyperpod"
    spec = load_hyperpod_policy(
        hyperpod / "scheduler-config.json", sorted(hyperpod.glob("quota-*.json"))
    )

    assert lint_policy(spec, example.nodes, example.topology) == []


# --- guarantees and flavors ---------------------------------------------------------------


def test_guarantees_over_the_clusters_capacity_name_flavor_sum_capacity_and_teams() -> None:
    spec = policy(team("nlp", 96), team("cv", 64), team("idle", 64, active=False))

    finding = the(lint(spec), LintCode.GUARANTEES_EXCEED_CAPACITY)

    assert finding.severity is LintSeverity.ERROR
    assert "p5.48xlarge" in finding.message
    assert "160 nvidia.com/gpu guaranteed, the cluster has 128 nvidia.com/gpu" in finding.message
    assert "nlp 96 nvidia.com/gpu, cv 64 nvidia.com/gpu" in finding.message
    assert "idle" not in finding.message  # inactive teams hold no guarantee
    assert "32 nvidia.com/gpu" in finding.hint


def test_guarantees_that_add_up_to_the_capacity_exactly_are_fine() -> None:
    assert lint(policy(team("nlp", 64), team("cv", 64))) == []


def test_a_quota_for_a_flavor_the_cluster_lacks_is_an_error() -> None:
    spec = policy(team("nlp", 8, flavor=FlavorName("g5.12xlarge")))

    findings = lint(spec)

    assert codes(findings) == [LintCode.FLAVOR_NOT_IN_CLUSTER]
    assert "g5.12xlarge" in findings[0].message
    assert "p5.48xlarge" in findings[0].hint


def test_node_labels_with_the_sagemaker_prefix_are_the_same_flavor() -> None:
    nodes, topology = p5_cluster(flavor="ml.p5.48xlarge")

    assert lint_policy(policy(team("nlp", 64)), nodes, topology) == []
    assert set(capacity_of_flavors(nodes, INSTANCE_TYPE_LABEL)) == {P5}


def test_nodes_without_the_label_are_the_default_flavor() -> None:
    nodes, topology = cluster((2, 4))

    spec = policy(team("nlp", 32, flavor=DEFAULT_FLAVOR))

    assert lint_policy(spec, nodes, topology) == []
    assert capacity_of_flavors(nodes, INSTANCE_TYPE_LABEL)[DEFAULT_FLAVOR][NVIDIA_GPU] == 64


def test_a_guarantee_that_leaves_out_a_resource_others_name_can_use_it_only_by_borrowing() -> None:
    spec = policy(team("nlp", gpus(32, **{EFA: 4})), team("cv", 32))

    finding = the(lint(spec), LintCode.PARTIAL_GUARANTEE)

    assert finding.severity is LintSeverity.WARNING
    assert "cv" in finding.message and EFA in finding.message and "nlp" in finding.message


# --- teams --------------------------------------------------------------------------------


TEAM_CASES = [
    # (policy, the code expected, its severity, a word of the message)
    (policy(team("nlp", 16, borrow=0)), LintCode.ZERO_BORROW_LIMIT, "never borrows"),
    (
        policy(team("nlp", 16, borrow=8, weight=0), idle_allocation=IdleAllocation.FAIR_SHARE),
        LintCode.ZERO_FAIR_SHARE_WEIGHT,
        "weight 0",
    ),
    (policy(TeamSpec(TeamName("nlp"))), LintCode.NO_QUOTA, "can ever be admitted"),
    (policy(team("nlp", 0, borrow=16)), LintCode.NO_QUOTA, "only on borrowed capacity"),
    (
        policy(team("nlp", 16, borrow=8, sharing=SharingStrategy.LEND)),
        LintCode.IGNORED_BORROW_LIMIT,
        "Lend",
    ),
    (
        policy(team("nlp", 16, lending=gpus(8), sharing=SharingStrategy.DONT_LEND)),
        LintCode.IGNORED_LENDING_LIMIT,
        "DontLend",
    ),
    (
        policy(
            team("nlp", 16, borrow=8),
            prioritization=Prioritization.FIFO,
            priority_classes=(PriorityClass("a", 1),),
        ),
        LintCode.IGNORED_PRIORITY_CLASSES,
        "fifo",
    ),
    (
        policy(
            team("nlp", 16),
            queue_order=QueueOrder.SHORTEST_FIRST,
            priority_classes=(PriorityClass("a", 1),),
        ),
        LintCode.SHORTEST_FIRST_WITHOUT_LIMITS,
        "shortest-first",
    ),
]


@pytest.mark.parametrize(("spec", "code", "words"), TEAM_CASES, ids=lambda case: str(case)[:30])
def test_settings_that_are_ignored_or_lock_a_team_out_are_warnings(
    spec: ClusterPolicy, code: LintCode, words: str
) -> None:
    finding = the(lint(spec), code)

    assert finding.severity is LintSeverity.WARNING
    assert words in finding.message
    assert finding.hint


@pytest.mark.parametrize(
    "spec",
    [
        policy(team("nlp", 16, borrow=8, weight=0)),  # first-come: weights do not matter
        policy(
            team("nlp", 16, weight=0, sharing=SharingStrategy.LEND),
            idle_allocation=IdleAllocation.FAIR_SHARE,
        ),  # never borrows idle capacity
    ],
    ids=["first-come", "lender"],
)
def test_weight_zero_matters_only_for_a_borrower_under_fair_share(spec: ClusterPolicy) -> None:
    assert LintCode.ZERO_FAIR_SHARE_WEIGHT not in codes(lint(spec))


def test_shortest_first_with_a_class_time_limit_is_not_warned_of() -> None:
    spec = policy(
        team("nlp", 16),
        queue_order=QueueOrder.SHORTEST_FIRST,
        priority_classes=(PriorityClass("a", 1), PriorityClass("b", 1, 3600.0)),
    )

    assert LintCode.SHORTEST_FIRST_WITHOUT_LIMITS not in codes(lint(spec))


# --- typical gangs ------------------------------------------------------------------------


def test_a_gang_over_guarantee_plus_borrow_limit_is_an_error() -> None:
    spec = policy(team("nlp", 16, borrow=8))

    finding = the(lint(spec, {NLP: workload(gpu_pods(4, name="big"))}), LintCode.GANG_EXCEEDS_QUOTA)

    assert finding.severity is LintSeverity.ERROR
    assert "needs 32 nvidia.com/gpu of p5.48xlarge" in finding.message
    assert "at most 24 nvidia.com/gpu (16 guaranteed + 8 borrowed)" in finding.message


def test_a_gang_within_guarantee_plus_borrow_limit_is_fine() -> None:
    assert lint(policy(team("nlp", 16, borrow=8)), {NLP: workload(gpu_pods(3))}) == []


def test_a_team_that_does_not_borrow_has_its_guarantee_only() -> None:
    spec = policy(team("nlp", 16, sharing=SharingStrategy.LEND))

    assert LintCode.GANG_EXCEEDS_QUOTA in codes(lint(spec, {NLP: workload(gpu_pods(3))}))


def test_a_gang_may_run_in_a_flavor_no_quota_covers() -> None:
    nodes, topology = two_flavor_cluster()
    spec = policy(team("nlp", 16, borrow=8))

    findings = lint_policy(spec, nodes, topology, typical_gangs={NLP: workload(gpu_pods(4))})

    assert LintCode.GANG_EXCEEDS_QUOTA not in codes(findings)


def test_a_gang_larger_than_any_domain_of_its_level_never_places() -> None:
    spec = policy(team("nlp", 64, borrow=64))

    findings = lint(spec, {NLP: workload(gpu_pods(5, required=BLOCK))})

    finding = the(findings, LintCode.GANG_NEVER_PLACES)
    assert finding.severity is LintSeverity.ERROR
    assert "even when the cluster is empty" in finding.message
    assert finding.hint


def test_a_gang_larger_than_the_cluster_never_places() -> None:
    spec = policy(team("nlp", 128, borrow=128))

    assert codes(lint(spec, {NLP: workload(gpu_pods(17))})) == [LintCode.GANG_NEVER_PLACES]


def test_a_gang_is_placed_only_in_flavors_its_quota_allows() -> None:
    nodes, topology = two_flavor_cluster()
    # p5 blocks have 4 nodes; the quota covers a100 too and allows 40 GPUs only of p5
    spec = policy(team("nlp", 40), team("cv", 8, flavor=A100))

    findings = lint_policy(
        spec, nodes, topology, typical_gangs={NLP: workload(gpu_pods(5, required=BLOCK))}
    )

    assert LintCode.GANG_NEVER_PLACES in codes(findings)


@pytest.mark.parametrize(
    ("selectors", "words"),
    [
        (["g5.12xlarge"], "no such node"),
        (["ml.p5.48xlarge", A100], "a gang runs in one flavor"),
    ],
)
def test_a_gang_that_selects_no_single_flavor_of_the_cluster_never_places(
    selectors: list[str], words: str
) -> None:
    nodes, topology = two_flavor_cluster()
    pod_sets = [
        gpu_pods(1, name=f"p{index}", node_selector={INSTANCE_TYPE_LABEL: selector})
        for index, selector in enumerate(selectors)
    ]
    spec = policy(team("nlp", 32, borrow=32))

    findings = lint_policy(spec, nodes, topology, typical_gangs={NLP: workload(*pod_sets)})

    assert words in the(findings, LintCode.GANG_NEVER_PLACES).message


def test_a_gang_that_selects_its_flavor_by_the_sagemaker_name_is_placed() -> None:
    nodes, topology = two_flavor_cluster()
    pod_set = gpu_pods(2, node_selector={INSTANCE_TYPE_LABEL: "ml.p5.48xlarge"})

    findings = lint_policy(
        policy(team("nlp", 32)), nodes, topology, typical_gangs={NLP: workload(pod_set)}
    )

    assert findings == []


def test_a_gang_that_asks_for_an_unknown_level_is_reported() -> None:
    findings = lint(policy(team("nlp", 64)), {NLP: workload(gpu_pods(2, required="rack"))})

    assert codes(findings) == [LintCode.GANG_INVALID]
    assert "rack" in findings[0].message


def test_a_gang_of_an_unknown_team_is_reported() -> None:
    findings = lint(policy(team("nlp", 64)), {CV: workload(gpu_pods(1))})

    assert codes(findings) == [LintCode.GANG_UNKNOWN_TEAM]
    assert "nlp" in findings[0].hint


def test_a_gang_with_an_undefined_priority_class_is_reported() -> None:
    spec = policy(team("nlp", 64), priority_classes=(PriorityClass("training", 10),))
    gang = WorkloadSpec("job", (gpu_pods(1),), priority_class="trainng")

    finding = the(lint(spec, {NLP: gang}), LintCode.UNKNOWN_PRIORITY_CLASS)

    assert "trainng" in finding.message
    assert "training" in finding.hint


def test_a_gangs_hyperpod_class_name_is_the_policys_class_as_at_submission() -> None:
    """HyperPod's ``training-priority`` is the policy's ``training`` (core.priority_classes)."""
    spec = policy(team("nlp", 64), priority_classes=(PriorityClass("training", 10),))
    gang = WorkloadSpec("job", (gpu_pods(1),), priority_class="training-priority")

    assert LintCode.UNKNOWN_PRIORITY_CLASS not in codes(lint(spec, {NLP: gang}))


def test_errors_come_before_warnings() -> None:
    spec = policy(team("nlp", 16, borrow=0), team("cv", 200))

    findings = lint(spec)

    assert codes(findings) == [LintCode.GUARANTEES_EXCEED_CAPACITY, LintCode.ZERO_BORROW_LIMIT]


def test_the_same_inputs_give_the_same_findings() -> None:
    spec = policy(team("nlp", 96, borrow=0), team("cv", 64, weight=0))
    gangs = {NLP: workload(gpu_pods(5, required=BLOCK)), CV: workload(gpu_pods(40))}

    assert lint(spec, gangs) == lint(spec, gangs)
