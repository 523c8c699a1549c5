"""The policy file's ``cohorts:``: reading, clear refusals, writing back and storing."""

from __future__ import annotations

from typing import Any

import pytest

from topoq.core.policy_lint import lint_policy
from topoq.discovery.policy import policy_document, policy_from_document
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import FlavorName
from topoq.domain.lint import LintCode
from topoq.domain.quantity import CPU, NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.store.policy_codec import decode_policy, encode_policy
from topoq.testing.governance import gpu_cluster

P5 = FlavorName("p5.48xlarge")
SOURCE = "policy.yaml"


def document(*cohorts: dict[str, Any], paths: tuple[list[str], ...] = (["org", "x"],)) -> Any:
    teams = [
        {"name": f"t{i}", "cohort": path, "quotas": [{"flavor": "p5.48xlarge", "instances": 1}]}
        for i, path in enumerate(paths)
    ]
    return {"apiVersion": "topoq.io/v1", "kind": "Policy", "teams": teams, "cohorts": list(cohorts)}


def test_a_cohort_reads_with_its_quota_limits_and_weight() -> None:
    policy = policy_from_document(
        document(
            {
                "name": "x",
                "parent": "org",
                "fairShareWeight": 3,
                "quotas": [{"flavor": "ml.p5.48xlarge", "resources": {"nvidia.com/gpu": 8}}],
                "absoluteBorrowLimits": {"p5.48xlarge": {"nvidia.com/gpu": 0}},
                "lending_limits": {"p5.48xlarge": {"nvidia.com/gpu": 4}},
            },
            {"name": "org"},
        ),
        source=SOURCE,
    )
    x = policy.by_cohort[("org", "x")]
    assert (x.name, x.parent, x.fair_share_weight) == ("x", ("org",), 3)
    quota = x.quota_for(P5)
    assert quota is not None
    assert quota.guarantee == Resources({NVIDIA_GPU: 8})
    assert quota.borrow_limited == {NVIDIA_GPU} and not quota.borrow_limit
    assert quota.lend_limited == {NVIDIA_GPU} and quota.lending_limit == Resources({NVIDIA_GPU: 4})
    assert CPU not in quota.borrow_limited  # a resource no limit names is not limited
    assert policy.by_cohort[("org",)].quotas == ()


def test_cohorts_survive_writing_back_and_storing() -> None:
    policy = policy_from_document(
        document(
            {
                "name": "x",
                "parent": ["org"],
                "quotas": [{"flavor": "p5.48xlarge", "resources": {"nvidia.com/gpu": 0}}],
                "absoluteBorrowLimits": {"p5.48xlarge": {"nvidia.com/gpu": 16}},
            }
        ),
        source=SOURCE,
    )
    assert policy_from_document(policy_document(policy), source=SOURCE) == policy
    assert decode_policy(encode_policy(policy)) == policy
    no_cohorts = policy_from_document(document(), source=SOURCE)
    assert "cohorts" not in policy_document(no_cohorts)


@pytest.mark.parametrize(
    ("cohorts", "paths", "expected"),
    [
        (
            [{"name": "z", "parent": "orgg"}],
            (["org", "x"],),
            "cohort orgg/z: parent orgg of cohort z is not a cohort",
        ),
        (
            [{"name": "x", "parent": "org"}],
            (["x"],),
            "team t0: cohort path x puts cohort x under the top, but it is declared under org "
            "(write the path as org/x)",
        ),
        (
            [{"name": "x", "parent": "org"}, {"name": "x"}],
            (["org", "x"],),
            "cohort x is declared twice",
        ),
        ([{"name": "x", "parent": ["x"]}], (["x"],), "cohort x is its own ancestor"),
        ([{"name": "x", "parnet": "org"}], (["org", "x"],), "parnet"),
        ([{"name": "X"}], (["org", "x"],), "cohorts[0].name"),
    ],
)
def test_a_wrong_cohort_tree_is_refused_with_what_to_fix(
    cohorts: list[dict[str, Any]], paths: tuple[list[str], ...], expected: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        policy_from_document(document(*cohorts, paths=paths), source=SOURCE)
    assert expected in str(caught.value)
    assert str(caught.value).startswith(SOURCE)


def test_lint_names_cohorts_without_teams_and_limits_that_cannot_bind() -> None:
    policy = policy_from_document(
        document(
            {"name": "org", "absoluteBorrowLimits": {"p5.48xlarge": {"nvidia.com/gpu": 8}}},
            {
                "name": "x",
                "parent": "org",
                "absoluteBorrowLimits": {"p5.48xlarge": {"nvidia.com/gpu": 40}},
            },
            {"name": "lonely", "parent": "org"},
            {"name": "lab", "absoluteBorrowLimits": {"p5.48xlarge": {"nvidia.com/gpu": 500}}},
            paths=(["org", "x"], ["org", "y"], ["lab"]),
        ),
        source=SOURCE,
    )
    nodes, topology = gpu_cluster([1, 2, 4])
    findings = {f.code: f for f in lint_policy(policy, nodes, topology)}
    assert (
        "cohort org/lonely has no team below it" in findings[LintCode.COHORT_WITHOUT_TEAMS].message
    )
    cannot = findings[LintCode.COHORT_LIMIT_CANNOT_HOLD]
    assert "cohort org/x may borrow 40 nvidia.com/gpu of p5.48xlarge" in cannot.message
    assert "let in at most 16 nvidia.com/gpu" in cannot.message  # org's 8 + y's 8
    unreachable = findings[LintCode.COHORT_LIMIT_UNREACHABLE]
    assert "cohort lab may borrow 500 nvidia.com/gpu" in unreachable.message
    assert "(40 nvidia.com/gpu:" in unreachable.message  # 64 - 24 guaranteed


def test_a_cohorts_own_guarantee_counts_against_the_clusters_capacity() -> None:
    policy = policy_from_document(
        document(
            {
                "name": "x",
                "parent": "org",
                "quotas": [{"flavor": "p5.48xlarge", "resources": {"nvidia.com/gpu": 60}}],
            }
        ),
        source=SOURCE,
    )
    nodes, topology = gpu_cluster([1, 2, 4])
    findings = {f.code: f for f in lint_policy(policy, nodes, topology)}
    over = findings[LintCode.GUARANTEES_EXCEED_CAPACITY].message
    assert "68 nvidia.com/gpu guaranteed, the cluster has 64" in over
    assert "t0 8 nvidia.com/gpu, cohort org/x 60 nvidia.com/gpu" in over


def test_more_cohorts_than_a_policy_holds_are_refused_before_reading_them() -> None:
    many = [{"name": f"c{i}"} for i in range(1001)]
    with pytest.raises(InvalidInputError, match="1,001 cohorts"):
        policy_from_document(document(*many), source=SOURCE)
