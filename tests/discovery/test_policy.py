"""topoq's policy file: reading, sizing guarantees, resolving borrow limits, writing it back."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from topoq.discovery.instance_sizing import (
    max_allocatable_cpu_millis,
    max_allocatable_memory_bytes,
)
from topoq.discovery.instance_types import INSTANCE_TYPES, normalize_instance_type
from topoq.discovery.policy import load_policy, policy_document, policy_from_document
from topoq.discovery.policy_sizing import instance_quota, share_quota
from topoq.domain.errors import InvalidInputError
from topoq.domain.flavors import normalize_flavor
from topoq.domain.governance import (
    ClusterPolicy,
    FlavorName,
    FlavorQuota,
    IdleAllocation,
    PreemptTeamTasks,
    Prioritization,
    PriorityClass,
    QueueingStrategy,
    QueueOrder,
    SharingStrategy,
    TeamName,
    TeamSpec,
)
from topoq.domain.quantity import CPU, EFA, MEMORY, NVIDIA_GPU
from topoq.domain.resources import Resources

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"
P5, G5, P4D = FlavorName("p5.48xlarge"), FlavorName("g5.12xlarge"), FlavorName("p4d.24xlarge")
P5_TYPE, G5_TYPE = INSTANCE_TYPES["p5.48xlarge"], INSTANCE_TYPES["g5.12xlarge"]
GIB, TIB = 2**30, 2**40
SOURCE = "policy.yaml"

DOCUMENTED_EXAMPLE = """
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: prod}
scheduling:
  prioritization: priority
  queueOrder: shortest-first
  priorityClasses:
  - {name: inference, weight: 100}
  - {name: training, weight: 10}
  defaultPriorityClass: training
  idleAllocation: fair-share
  idleResourceSharing: true
  preemption: {gracePeriodS: 45}
  fairShare: {usageHalfLifeS: 43200}
teams:
- name: nlp
  cohort: [research, language]
  fairShareWeight: 50
  sharing: LendAndBorrow
  borrowLimitPercent: 50
  absoluteBorrowLimits: {ml.p5.48xlarge: {nvidia.com/gpu: 16}}
  lendingLimits: {ml.p5.48xlarge: {nvidia.com/gpu: 32}}
  preemptTeamTasks: LowerPriority
  queueing: best-effort-fifo
  quotas:
  - flavor: ml.p5.48xlarge
    instances: 4
  - flavor: ml.g5.12xlarge
    accelerators: 8
  - flavor: ml.p4d.24xlarge
    resources: {nvidia.com/gpu: 16, cpu: 192, memory: 2Ti}
"""


def documented() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(DOCUMENTED_EXAMPLE)
    return document


def minimal(**team: Any) -> dict[str, Any]:
    entry = {"name": "nlp", "quotas": [{"flavor": "p5.48xlarge", "instances": 2}], **team}
    return {"apiVersion": "topoq.io/v1", "kind": "Policy", "teams": [entry]}


def read(document: dict[str, Any]) -> ClusterPolicy:
    return policy_from_document(document, source=SOURCE)


def only_quota(policy: ClusterPolicy, flavor: FlavorName = P5) -> FlavorQuota:
    quota = policy.teams[0].quota_for(flavor)
    assert quota is not None
    return quota


# --- the documented example ---------------------------------------------------------------


def test_the_documented_example_reads_with_every_field() -> None:
    policy = read(documented())

    assert policy.prioritization is Prioritization.PRIORITY
    assert policy.queue_order is QueueOrder.SHORTEST_FIRST
    assert policy.priority_classes == (
        PriorityClass("inference", 100),
        PriorityClass("training", 10),
    )
    assert policy.default_priority_class == "training"
    assert policy.idle_allocation is IdleAllocation.FAIR_SHARE
    assert policy.idle_resource_sharing is True
    assert policy.preemption_grace_s == 45
    assert policy.fair_share_usage_half_life_s == 43200
    nlp = policy.by_team[TeamName("nlp")]
    assert nlp.cohort == ("research", "language")
    assert nlp.fair_share_weight == 50
    assert nlp.sharing is SharingStrategy.LEND_AND_BORROW
    assert nlp.preempt_team_tasks is PreemptTeamTasks.LOWER_PRIORITY
    assert nlp.queueing is QueueingStrategy.BEST_EFFORT_FIFO
    assert [quota.flavor for quota in nlp.quotas] == [P5, G5, P4D]


def test_whole_instances_guarantee_what_the_instances_can_allocate() -> None:
    quota = only_quota(read(documented()), P5)

    assert quota.guarantee == Resources(
        {
            NVIDIA_GPU: 32,
            EFA: 128,
            CPU: 4 * max_allocatable_cpu_millis(P5_TYPE),
            MEMORY: 4 * max_allocatable_memory_bytes(P5_TYPE),
        }
    )


def test_accelerators_bring_vcpu_memory_and_efa_in_proportion() -> None:
    quota = only_quota(read(documented()), G5)

    # 8 of a 4-GPU instance: two instances' worth of vCPU and memory (g5 has no EFA)
    assert quota.guarantee == instance_quota(G5_TYPE, 2)
    assert share_quota(P5_TYPE, accelerators=4) == Resources(
        {
            NVIDIA_GPU: 4,
            EFA: 16,
            CPU: max_allocatable_cpu_millis(P5_TYPE) // 2,
            MEMORY: max_allocatable_memory_bytes(P5_TYPE) // 2,
        }
    )


def test_resources_are_taken_as_written() -> None:
    quota = only_quota(read(documented()), P4D)

    assert quota.guarantee == Resources({NVIDIA_GPU: 16, CPU: 192_000, MEMORY: 2 * TIB})


def test_borrow_limit_is_absolute_where_given_and_a_percentage_elsewhere() -> None:
    policy = read(documented())

    p5, p4d = only_quota(policy, P5), only_quota(policy, P4D)
    assert p5.borrow_limit[NVIDIA_GPU] == 16
    assert p5.borrow_limit[CPU] == p5.guarantee[CPU] // 2
    assert p5.borrow_limit[EFA] == 64
    assert p4d.borrow_limit == Resources({NVIDIA_GPU: 8, CPU: 96_000, MEMORY: TIB})


def test_lending_limit_caps_what_it_names_and_lets_the_rest_be_lent() -> None:
    policy = read(documented())

    p5 = only_quota(policy, P5)
    assert p5.lending_limit is not None
    assert p5.lending_limit[NVIDIA_GPU] == 32
    assert p5.lending_limit[CPU] == p5.guarantee[CPU]
    assert only_quota(policy, G5).lending_limit is None


def test_the_example_policy_file_reads() -> None:
    policy = load_policy(EXAMPLES / "policy.yaml")

    assert [team.name for team in policy.teams] == ["nlp", "vision", "serving"]
    gpus = [team.quotas[0].guarantee[NVIDIA_GPU] for team in policy.teams]
    assert gpus == [192, 128, 64]  # 48 of the example cluster's 64 nodes
    assert policy.by_team[TeamName("nlp")].quotas[0].borrow_limit[NVIDIA_GPU] == 64
    assert policy.by_team[TeamName("serving")].quotas[0].borrow_limit == Resources()


# --- names, defaults and spellings --------------------------------------------------------


@pytest.mark.parametrize("name", ["ml.p5.48xlarge", "p5.48xlarge", " ml.p5.48xlarge "])
def test_sagemaker_and_ec2_names_are_one_flavor(name: str) -> None:
    policy = read(minimal(quotas=[{"flavor": name, "instances": 1}]))

    assert policy.teams[0].quotas[0].flavor == P5
    assert normalize_flavor(name) == normalize_instance_type(name)


def test_defaults() -> None:
    policy = read(minimal())

    team = policy.teams[0]
    assert policy.prioritization is Prioritization.FIFO  # no classes
    assert policy.idle_allocation is IdleAllocation.FIRST_COME
    assert policy.idle_resource_sharing is True
    assert team.fair_share_weight == 1
    assert team.sharing is SharingStrategy.LEND_AND_BORROW
    assert team.preempt_team_tasks is PreemptTeamTasks.LOWER_PRIORITY
    assert team.queueing is QueueingStrategy.BEST_EFFORT_FIFO
    assert team.active is True
    assert team.quotas[0].borrow_limit == instance_quota(P5_TYPE, 1)  # 50% of 2 instances


def test_snake_case_keys_are_accepted() -> None:
    document = minimal(
        fair_share_weight=7,
        borrow_limit_percent=100,
        preempt_team_tasks="Never",
        absolute_borrow_limits={"p5.48xlarge": {"nvidia.com/gpu": 4}},
    )
    document["scheduling"] = {
        "priority_classes": [{"name": "a", "weight": 1}],
        "default_priority_class": "a",
        "idle_allocation": "fair-share",
        "idle_resource_sharing": False,
    }

    policy = read(document)

    team = policy.teams[0]
    assert (team.fair_share_weight, team.preempt_team_tasks) == (7, PreemptTeamTasks.NEVER)
    assert team.quotas[0].borrow_limit[NVIDIA_GPU] == 4
    assert team.quotas[0].borrow_limit[CPU] == team.quotas[0].guarantee[CPU]
    assert policy.default_priority_class == "a"
    assert policy.idle_allocation is IdleAllocation.FAIR_SHARE
    assert policy.idle_resource_sharing is False


def test_enum_values_are_read_in_any_letter_case() -> None:
    policy = read(minimal(sharing="lendandborrow", queueing="STRICT-FIFO"))

    assert policy.teams[0].sharing is SharingStrategy.LEND_AND_BORROW
    assert policy.teams[0].queueing is QueueingStrategy.STRICT_FIFO


@pytest.mark.parametrize("sharing", ["Lend", "DontLend"])
def test_teams_that_never_borrow_get_no_percentage_borrow_limit(sharing: str) -> None:
    assert only_quota(read(minimal(sharing=sharing))).borrow_limit == Resources()


def test_absolute_limits_of_a_team_that_never_borrows_are_kept_for_the_lint() -> None:
    document = minimal(sharing="Lend", absoluteBorrowLimits={"p5.48xlarge": {"nvidia.com/gpu": 8}})

    assert only_quota(read(document)).borrow_limit == Resources({NVIDIA_GPU: 8})


def test_percent_rounds_down_and_explicit_zero_limits_stay_zero() -> None:
    document = minimal(
        borrowLimitPercent=33,
        quotas=[{"flavor": "p4d.24xlarge", "resources": {"nvidia.com/gpu": 10, "cpu": 7}}],
        absoluteBorrowLimits={"p4d.24xlarge": {"cpu": 0}},
    )

    assert only_quota(read(document), P4D).borrow_limit == Resources({NVIDIA_GPU: 3})


def test_a_borrow_limit_for_a_flavor_without_quota_lets_the_team_borrow_it() -> None:
    document = minimal(absoluteBorrowLimits={"g5.12xlarge": {"nvidia.com/gpu": 8}})

    quota = only_quota(read(document), G5)
    assert (quota.guarantee, quota.borrow_limit) == (Resources(), Resources({NVIDIA_GPU: 8}))


def test_a_zero_guarantee_still_speaks_about_its_resources() -> None:
    document = minimal(quotas=[{"flavor": "p4d.24xlarge", "resources": {"nvidia.com/gpu": 0}}])

    quota = only_quota(read(document), P4D)
    assert quota.guarantee == Resources()
    assert NVIDIA_GPU in quota.covers


def test_an_unknown_flavor_takes_resources() -> None:
    document = minimal(quotas=[{"flavor": "ml.x9.huge", "resources": {"nvidia.com/gpu": 8}}])

    assert read(document).teams[0].quotas[0].flavor == "x9.huge"


def test_a_cohort_may_be_one_name() -> None:
    assert read(minimal(cohort="research")).teams[0].cohort == ("research",)


def test_load_policy_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "prod.yaml"
    path.write_text(DOCUMENTED_EXAMPLE, encoding="utf-8")

    assert load_policy(path) == read(documented())


# --- writing it back ----------------------------------------------------------------------


def hand_built_policy() -> ClusterPolicy:
    gpus = Resources({NVIDIA_GPU: 16})
    return ClusterPolicy(
        teams=(
            TeamSpec(
                TeamName("odd"),
                quotas=(
                    FlavorQuota(
                        P5,
                        Resources({NVIDIA_GPU: 10, CPU: 3000}),
                        Resources({NVIDIA_GPU: 7, CPU: 0, MEMORY: GIB}),
                        Resources({NVIDIA_GPU: 0, CPU: 1000}),
                    ),
                    FlavorQuota(G5, Resources(), gpus),
                ),
                fair_share_weight=0,
                cohort=("org", "division"),
                queueing=QueueingStrategy.STRICT_FIFO,
                active=False,
            ),
            TeamSpec(TeamName("lender"), (FlavorQuota(P5, gpus, gpus),), SharingStrategy.LEND),
            TeamSpec(TeamName("empty")),
        ),
        prioritization=Prioritization.FIFO,
        priority_classes=(PriorityClass("a", 0),),
        idle_resource_sharing=False,
    )


def round_trip_cases() -> list[ClusterPolicy]:
    documents = [documented(), minimal(), minimal(sharing="DontLend", borrowLimitPercent=0)]
    return [
        *(read(document) for document in documents),
        load_policy(EXAMPLES / "policy.yaml"),
        hand_built_policy(),
    ]


@pytest.mark.parametrize("policy", round_trip_cases(), ids=["doc", "min", "dont", "ex", "hand"])
def test_the_written_document_reads_back_as_the_same_policy(policy: ClusterPolicy) -> None:
    document = policy_document(policy, name="prod")
    through_yaml = yaml.safe_load(yaml.safe_dump(document))

    assert read(through_yaml) == policy
    assert through_yaml["metadata"] == {"name": "prod"}


def test_the_usage_half_life_defaults_to_a_day_and_0_turns_history_off() -> None:
    assert read(minimal()).fair_share_usage_half_life_s == 86400
    document = minimal()
    document["scheduling"] = {"fair_share": {"usage_half_life_s": 0}}
    assert read(document).fair_share_usage_half_life_s == 0
    assert policy_document(read(document))["scheduling"]["fairShare"] == {"usageHalfLifeS": 0}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, "policy.yaml: scheduling.fairShare.usageHalfLifeS: -1 is out of range (use 0 to"),
        (1.5, "policy.yaml: scheduling.fairShare.usageHalfLifeS: expected a whole number"),
        (10**9, "policy.yaml: scheduling.fairShare.usageHalfLifeS: 1000000000 is out of range"),
        ("a day", "policy.yaml: scheduling.fairShare.usageHalfLifeS: expected a whole number"),
    ],
)
def test_a_bad_usage_half_life_names_the_field(value: Any, message: str) -> None:
    document = minimal()
    document["scheduling"] = {"fairShare": {"usageHalfLifeS": value}}
    with pytest.raises(InvalidInputError) as raised:
        read(document)
    assert str(raised.value).startswith(message)


def test_an_unknown_fair_share_key_suggests_the_known_one() -> None:
    document = minimal()
    document["scheduling"] = {"fairShare": {"usageHalfLife": 60}}
    with pytest.raises(InvalidInputError, match="did you mean 'usageHalfLifeS'"):
        read(document)


def test_guarantees_are_written_in_their_shortest_form() -> None:
    teams = policy_document(read(documented()))["teams"]

    quotas = teams[0]["quotas"]
    assert quotas[0] == {"flavor": "p5.48xlarge", "instances": 4}
    assert quotas[1] == {"flavor": "g5.12xlarge", "instances": 2}
    assert quotas[2]["resources"] == {"cpu": 192, "memory": "2Ti", "nvidia.com/gpu": 16}
    assert teams[0]["borrowLimitPercent"] == 50
    assert "absoluteBorrowLimits" not in teams[0]  # 16 GPUs is 50% of 32


# --- malformed files ----------------------------------------------------------------------


def with_change(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """``base`` (the documented example) with the value at a dotted path set (``None``
    deletes it); numbers index lists."""
    document = copy.deepcopy(base or documented())
    *parents, last = path.split(".")
    node: Any = document
    for part in parents:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    key: Any = int(last) if last.isdigit() else last
    if value is None:
        del node[key]
    else:
        node[key] = value
    return document


MALFORMED = [
    # (change, value, the field the error names, words of the message or hint)
    ("teamz", [], "teamz", "did you mean 'teams'"),
    ("kind", "Cluster", "kind", "expected 'Policy'"),
    ("apiVersion", "v2", "apiVersion", "topoq.io/v1"),
    ("metadata.labels", {}, "metadata.labels", "unknown key"),
    ("scheduling.prioritisation", "fifo", "scheduling.prioritisation", "'prioritization'"),
    ("scheduling.prioritization", "weighted", "scheduling.prioritization", "fifo, priority"),
    ("scheduling.queueOrder", "sjf", "scheduling.queueOrder", "submission, shortest-first"),
    ("scheduling.queueOrdr", "sjf", "scheduling.queueOrdr", "'queueOrder'"),
    ("scheduling.idleAllocation", "greedy", "scheduling.idleAllocation", "fair-share"),
    ("scheduling.idleResourceSharing", "maybe", "scheduling.idleResourceSharing", "true or"),
    ("scheduling.preemption.gracePeriodS", -1, "scheduling.preemption.gracePeriodS", "0 to 3600"),
    ("scheduling.preemption.gracePeriodS", 1.5, "scheduling.preemption.gracePeriodS", "whole"),
    ("scheduling.preemption.grace", 5, "scheduling.preemption.grace", "keys: gracePeriodS"),
    ("scheduling.priorityClasses.0.weight", 101, "scheduling.priorityClasses[0].weight", "0 to"),
    ("scheduling.priorityClasses.0.weight", None, "scheduling.priorityClasses[0].weight", "miss"),
    (
        "scheduling.priorityClasses.1.name",
        "inference",
        "scheduling.priorityClasses[1].name",
        "twice",
    ),
    ("scheduling.priorityClasses.0.level", 1, "scheduling.priorityClasses[0].level", "unknown"),
    ("scheduling.defaultPriorityClass", "batch", "scheduling.defaultPriorityClass", "inference"),
    ("teams", {"nlp": {}}, "teams", "expected a list"),
    ("teams.0.name", None, "teams[0].name", "is missing"),
    ("teams.0.name", 42, "teams[0].name", "expected a string"),
    ("teams.0.name", "NLP Team", "teams[0].name", "not a valid team name"),
    ("teams.0.name", "x" * 64, "teams[0].name", "DNS-1123 label"),
    ("teams.0.cohort", ["Research Org"], "teams[0].cohort[0]", "not a valid cohort name"),
    ("teams.0.cohort", [7], "teams[0].cohort[0]", "expected a name"),
    ("teams.0.quotas.0.flavor", 5, "teams[0].quotas[0].flavor", "expected a string"),
    ("teams.0.quotas.0.flavor", "p5/48xlarge", "teams[0].quotas[0].flavor", "not a valid flavor"),
    ("scheduling.priorityClasses.0.name", 1, "scheduling.priorityClasses[0].name", "a string"),
    (
        "scheduling.priorityClasses.0.name",
        "Top Priority",
        "scheduling.priorityClasses[0].name",
        "not a valid priority class name",
    ),
    ("teams.0.fairShareWeight", 1e30, "teams[0].fairShareWeight", "expected a whole number"),
    ("teams.0.fairShareWeight", 2.5, "teams[0].fairShareWeight", "expected a whole number"),
    ("teams.0.fairshareWeight", 5, "teams[0].fairshareWeight", "'fairShareWeight'"),
    ("teams.0.fair_share_weight", 5, "teams[0]", "both 'fairShareWeight' and"),
    ("teams.0.fairShareWeight", 101, "teams[0].fairShareWeight", "0 to 100"),
    ("teams.0.fairShareWeight", "heavy", "teams[0].fairShareWeight", "expected a whole number"),
    ("teams.0.sharing", "Borrow", "teams[0].sharing", "DontLend, Lend, LendAndBorrow"),
    ("teams.0.preemptTeamTasks", "Always", "teams[0].preemptTeamTasks", "LowerPriority, Never"),
    ("teams.0.queueing", "lifo", "teams[0].queueing", "strict-fifo"),
    ("teams.0.borrowLimitPercent", -1, "teams[0].borrowLimitPercent", "0 to 10000"),
    ("teams.0.cohort", [""], "teams[0].cohort[0]", "expected a name"),
    ("teams.0.active", "yes", "teams[0].active", "true or false"),
    ("teams.0.lendingLimits", {"trn1.32xlarge": {"cpu": 1}}, "teams[0].lendingLimits", "no quota"),
    (
        "teams.0.absoluteBorrowLimits",
        {"p5.48xlarge": {}, "ml.p5.48xlarge": {}},
        "teams[0].absoluteBorrowLimits.ml.p5.48xlarge",
        "listed twice",
    ),
    (
        "teams.0.absoluteBorrowLimits",
        {"p5.48xlarge": {"nvidia.com/gpu": "lots"}},
        "teams[0].absoluteBorrowLimits.p5.48xlarge.nvidia.com/gpu",
        "not a Kubernetes quantity",
    ),
    ("teams.0.quotas.0.count", 4, "teams[0].quotas[0].count", "allowed keys: flavor, inst"),
    ("teams.0.quotas.0.accelerators", 8, "teams[0].quotas[0]", "instances and accelerators"),
    ("teams.0.quotas.0.instances", None, "teams[0].quotas[0]", "exactly one of"),
    ("teams.0.quotas.0.instances", -2, "teams[0].quotas[0].instances", "out of range"),
    ("teams.0.quotas.0.flavor", None, "teams[0].quotas[0].flavor", "is missing"),
    ("teams.0.quotas.0.flavor", "x9.huge", "teams[0].quotas[0].instances", "does not know"),
    ("teams.0.quotas.1.flavor", "p5.48xlarge", "teams[0].quotas[1].flavor", "two quotas"),
    ("teams.0.quotas.2.resources.cpu", "-4", "teams[0].quotas[2].resources.cpu", "negative"),
    ("teams.0.quotas.2.resources", [16], "teams[0].quotas[2].resources", "expected a mapping"),
]


@pytest.mark.parametrize(("path", "value", "field", "words"), MALFORMED, ids=str)
def test_a_malformed_policy_names_the_file_and_the_field(
    path: str, value: Any, field: str, words: str
) -> None:
    with pytest.raises(InvalidInputError) as raised:
        read(with_change(path, value))

    message = str(raised.value)
    assert message.startswith(f"{SOURCE}: {field}:"), message
    assert words in message


def test_the_preemption_grace_period_is_30_s_unless_the_policy_says() -> None:
    assert read(with_change("scheduling.preemption", None)).preemption_grace_s == 30
    snake = with_change("scheduling.preemption", {"grace_period_s": 0})
    assert read(snake).preemption_grace_s == 0


def test_a_team_defined_twice_names_both_places() -> None:
    document = documented()
    document["teams"].append({"name": "nlp"})

    with pytest.raises(InvalidInputError, match=r"policy.yaml: teams\[1\].name: .*teams\[0\]"):
        read(document)


def test_more_than_ten_priority_classes_is_an_error() -> None:
    classes = [{"name": f"c{index}", "weight": index} for index in range(11)]

    with pytest.raises(InvalidInputError, match=r"policy.yaml: scheduling.priorityClasses: 11"):
        read(with_change("scheduling.priorityClasses", classes))


def test_more_teams_than_the_limit_are_refused_before_any_is_read() -> None:
    teams = [{"name": f"team-{index}", "quotas": "unread"} for index in range(20_000)]

    with pytest.raises(InvalidInputError, match=r"policy.yaml: teams: 20,000 teams.*at most 1,000"):
        read(with_change("teams", teams))


def test_a_policy_at_the_team_limit_reads_in_well_under_a_second() -> None:
    quota = [{"flavor": "p5.48xlarge", "instances": 1}]
    teams = [{"name": f"team-{index}", "cohort": ["org"], "quotas": quota} for index in range(1000)]
    started = time.thread_time()
    policy = read(with_change("teams", teams))
    assert len(policy.teams) == 1000
    assert time.thread_time() - started < 2  # 0.1 s on an idle machine


def test_a_document_that_is_not_a_mapping_is_an_error() -> None:
    with pytest.raises(InvalidInputError, match=r"policy\.yaml: expected a mapping"):
        policy_from_document(["teams"], source=SOURCE)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"

    with pytest.raises(InvalidInputError, match=f"{missing}: file not found"):
        load_policy(missing)


def test_errors_in_a_file_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(with_change("teams.0.sharing", "Hoard")), encoding="utf-8")

    with pytest.raises(InvalidInputError, match=rf"{path}: teams\[0\].sharing: unknown value"):
        load_policy(path)
