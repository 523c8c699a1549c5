"""Importing SageMaker HyperPod task governance: describe-cluster-scheduler-config and
describe-compute-quota outputs become a topoq policy with the same meaning."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from topoq.discovery.instance_sizing import max_allocatable_cpu_millis, max_allocatable_memory_bytes
from topoq.discovery.instance_types import INSTANCE_TYPES
from topoq.discovery.policy import policy_document, policy_from_document
from topoq.discovery.policy_hyperpod import load_hyperpod_policy, policy_from_hyperpod
from topoq.discovery.policy_sizing import instance_quota
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import (
    ClusterPolicy,
    FlavorName,
    FlavorQuota,
    IdleAllocation,
    PreemptTeamTasks,
    Prioritization,
    PriorityClass,
    SharingStrategy,
    TeamName,
)
from topoq.domain.quantity import CPU, EFA, MEMORY, NEURON_DEVICE, NVIDIA_GPU
from topoq.domain.resources import Resources

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies" / "hyperpod"
P5, G5 = FlavorName("p5.48xlarge"), FlavorName("g5.12xlarge")
P5_TYPE = INSTANCE_TYPES["p5.48xlarge"]
GIB = 2**30
SOURCE = "hyperpod"

# The shapes of /work/shared/FORMATS.md
SCHEDULER_CONFIG: dict[str, Any] = {
    "ClusterSchedulerConfigId": "abc123",
    "Name": "policy",
    "ClusterArn": "arn:aws:sagemaker:us-east-2:111122223333:cluster/xyz",
    "SchedulerConfig": {
        "PriorityClasses": [
            {"Name": "inference", "Weight": 100},
            {"Name": "training", "Weight": 10},
        ],
        "FairShare": "Enabled",
        "IdleResourceSharing": "Enabled",
    },
}
COMPUTE_QUOTA: dict[str, Any] = {
    "ComputeQuotaId": "q-nlp",
    "Name": "nlp-quota",
    "ClusterArn": "arn:aws:sagemaker:us-east-2:111122223333:cluster/xyz",
    "ActivationState": "Enabled",
    "ComputeQuotaTarget": {"TeamName": "nlp", "FairShareWeight": 50},
    "ComputeQuotaConfig": {
        "ComputeQuotaResources": [
            {"InstanceType": "ml.p5.48xlarge", "Count": 4},
            {"InstanceType": "ml.g5.12xlarge", "Accelerators": 8, "VCpu": 96, "MemoryInGiB": 384},
        ],
        "ResourceSharingConfig": {
            "Strategy": "LendAndBorrow",
            "BorrowLimit": 50,
            "AbsoluteBorrowLimits": [{"InstanceType": "ml.p5.48xlarge", "Accelerators": 16}],
        },
        "PreemptTeamTasks": "LowerPriority",
    },
}


def quota_for(team: str, **changes: Any) -> dict[str, Any]:
    """A compute quota for ``team``: FORMATS.md's, with top-level keys replaced (None drops)."""
    document = copy.deepcopy(COMPUTE_QUOTA)
    document["ComputeQuotaTarget"]["TeamName"] = team
    for key, value in changes.items():
        if value is None:
            document.pop(key, None)
        else:
            document[key] = value
    return document


def config_with(**changes: Any) -> dict[str, Any]:
    """A ComputeQuotaConfig: FORMATS.md's, with keys replaced (None drops)."""
    config = copy.deepcopy(COMPUTE_QUOTA["ComputeQuotaConfig"])
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return config


def imported(*quotas: object, config: object | None = SCHEDULER_CONFIG) -> ClusterPolicy:
    return policy_from_hyperpod(config, list(quotas), source=SOURCE)


def p5_quota(policy: ClusterPolicy, team: str = "nlp", flavor: FlavorName = P5) -> FlavorQuota:
    quota = policy.by_team[TeamName(team)].quota_for(flavor)
    assert quota is not None
    return quota


# --- the documented shapes ----------------------------------------------------------------


def test_the_scheduler_config_sets_classes_fair_share_and_idle_sharing() -> None:
    policy = imported(COMPUTE_QUOTA)

    assert policy.priority_classes == (
        PriorityClass("inference", 100),
        PriorityClass("training", 10),
    )
    assert policy.prioritization is Prioritization.PRIORITY
    assert policy.idle_allocation is IdleAllocation.FAIR_SHARE
    assert policy.idle_resource_sharing is True
    assert policy.default_priority_class is None
    assert policy.fair_share_usage_half_life_s == 0  # HyperPod keeps no usage history


def test_a_compute_quota_becomes_a_team() -> None:
    policy = imported(COMPUTE_QUOTA)

    nlp = policy.by_team[TeamName("nlp")]
    assert (nlp.fair_share_weight, nlp.sharing) == (50, SharingStrategy.LEND_AND_BORROW)
    assert nlp.preempt_team_tasks is PreemptTeamTasks.LOWER_PRIORITY
    assert nlp.active is True
    assert p5_quota(policy).guarantee == instance_quota(P5_TYPE, 4)
    assert p5_quota(policy, flavor=G5).guarantee == Resources(
        {NVIDIA_GPU: 8, CPU: 96_000, MEMORY: 384 * GIB}
    )


def test_absolute_borrow_limits_bring_their_proportion_and_the_percent_covers_the_rest() -> None:
    policy = imported(COMPUTE_QUOTA)

    p5, g5 = p5_quota(policy), p5_quota(policy, flavor=G5)
    # 16 GPUs: two instances' worth of vCPU, memory and EFA; BorrowLimit 50% of 4 instances
    assert p5.borrow_limit == instance_quota(P5_TYPE, 2)
    assert g5.borrow_limit == Resources({NVIDIA_GPU: 4, CPU: 48_000, MEMORY: 192 * GIB})


def test_the_example_files_load() -> None:
    quotas = sorted(EXAMPLES.glob("quota-*.json"))

    policy = load_hyperpod_policy(EXAMPLES / "scheduler-config.json", quotas)

    assert [team.name for team in policy.teams] == ["nlp", "serving", "vision"]
    assert [cls.name for cls in policy.priority_classes] == ["inference", "training", "experiment"]
    gpus = {team.name: team.quotas[0].guarantee[NVIDIA_GPU] for team in policy.teams}
    assert gpus == {"nlp": 192, "serving": 64, "vision": 128}
    serving = policy.by_team[TeamName("serving")]
    assert serving.sharing is SharingStrategy.LEND
    assert serving.preempt_team_tasks is PreemptTeamTasks.NEVER
    assert serving.quotas[0].borrow_limit == Resources()


# --- defaults and variants ----------------------------------------------------------------


def test_without_a_scheduler_config_hyperpods_defaults_apply() -> None:
    policy = imported(COMPUTE_QUOTA, config=None)

    assert policy.prioritization is Prioritization.FIFO
    assert policy.priority_classes == ()
    assert policy.idle_allocation is IdleAllocation.FAIR_SHARE
    assert policy.idle_resource_sharing is True
    assert policy.fair_share_usage_half_life_s == 0


def test_disabled_fair_share_and_idle_sharing() -> None:
    config = {"SchedulerConfig": {"FairShare": "Disabled", "IdleResourceSharing": "Disabled"}}

    policy = imported(COMPUTE_QUOTA, config=config)

    assert policy.idle_allocation is IdleAllocation.FIRST_COME
    assert policy.idle_resource_sharing is False
    assert policy.prioritization is Prioritization.FIFO


def test_a_bare_scheduler_config_is_accepted() -> None:
    policy = imported(COMPUTE_QUOTA, config=SCHEDULER_CONFIG["SchedulerConfig"])

    assert len(policy.priority_classes) == 2


def test_quota_defaults() -> None:
    minimal = {
        "ComputeQuotaTarget": {"TeamName": "nlp"},
        "ComputeQuotaConfig": {
            "ComputeQuotaResources": [{"InstanceType": "ml.p5.48xlarge", "Count": 2}]
        },
    }

    team = imported(minimal).teams[0]

    assert team.fair_share_weight == 0  # HyperPod's default
    assert team.sharing is SharingStrategy.LEND_AND_BORROW
    assert team.preempt_team_tasks is PreemptTeamTasks.LOWER_PRIORITY
    assert team.active is True
    assert team.quotas[0].borrow_limit == instance_quota(P5_TYPE, 1)  # 50%


def test_a_disabled_quota_is_an_inactive_team() -> None:
    assert imported(quota_for("nlp", ActivationState="Disabled")).teams[0].active is False


def test_deleted_quotas_are_skipped() -> None:
    policy = imported(quota_for("nlp"), quota_for("old", Status="Deleted"))

    assert [team.name for team in policy.teams] == ["nlp"]


def test_a_list_compute_quotas_output_and_a_list_of_quotas_are_several_teams() -> None:
    summaries = {"ComputeQuotaSummaries": [quota_for("a"), quota_for("b")], "NextToken": None}

    policy = imported(summaries, [quota_for("c")])

    assert [team.name for team in policy.teams] == ["a", "b", "c"]


def test_strategy_spelled_as_the_api_reference_does() -> None:
    sharing = {"Strategy": "LendandBorrow"}

    policy = imported(
        quota_for("nlp", ComputeQuotaConfig=config_with(ResourceSharingConfig=sharing))
    )

    assert policy.teams[0].sharing is SharingStrategy.LEND_AND_BORROW


P5_CPU, P5_MEMORY = max_allocatable_cpu_millis(P5_TYPE), max_allocatable_memory_bytes(P5_TYPE)
PROPORTIONS = [
    ({"VCpu": 96}, {CPU: 96_000, MEMORY: 96_000 * P5_MEMORY // P5_CPU}),
    ({"MemoryInGiB": 1024}, {CPU: 1024 * GIB * P5_CPU // P5_MEMORY, MEMORY: 1024 * GIB}),
    ({"Accelerators": 4}, {NVIDIA_GPU: 4, EFA: 16, CPU: P5_CPU // 2, MEMORY: P5_MEMORY // 2}),
    ({"Accelerators": 4, "VCpu": 8.5}, {NVIDIA_GPU: 4, EFA: 16, CPU: 8500, MEMORY: P5_MEMORY // 2}),
    ({"Count": 0}, {}),
]


@pytest.mark.parametrize(
    ("entry", "expected"),
    PROPORTIONS,
    ids=["vcpu", "memory", "accelerators", "accelerators-and-vcpu", "zero-instances"],
)
def test_what_is_not_given_follows_in_proportion(
    entry: dict[str, Any], expected: dict[str, int]
) -> None:
    resources = [{"InstanceType": "ml.p5.48xlarge", **entry}]
    config = config_with(ComputeQuotaResources=resources, ResourceSharingConfig=None)

    quota = p5_quota(imported(quota_for("nlp", ComputeQuotaConfig=config)))

    assert quota.guarantee == Resources(expected)


def test_zero_instances_still_speak_about_every_resource_of_the_instance() -> None:
    resources = [{"InstanceType": "ml.p5.48xlarge", "Count": 0}]
    config = config_with(ComputeQuotaResources=resources, ResourceSharingConfig=None)

    quota = p5_quota(imported(quota_for("nlp", ComputeQuotaConfig=config)))

    assert quota.covers == {NVIDIA_GPU, EFA, CPU, MEMORY}


def test_an_unknown_instance_type_takes_the_amounts_given() -> None:
    resources = [
        {"InstanceType": "ml.trn3.48xlarge", "Accelerators": 16, "VCpu": 192, "MemoryInGiB": 2048},
        {"InstanceType": "ml.g7.12xlarge", "Accelerators": 4},
    ]
    config = config_with(ComputeQuotaResources=resources, ResourceSharingConfig=None)

    team = imported(quota_for("nlp", ComputeQuotaConfig=config)).teams[0]

    trn3, g7 = (quota.guarantee for quota in team.quotas)
    assert trn3 == Resources({NEURON_DEVICE: 16, CPU: 192_000, MEMORY: 2048 * GIB})
    assert g7 == Resources({NVIDIA_GPU: 4})


def imported_cases() -> list[ClusterPolicy]:
    examples = load_hyperpod_policy(
        EXAMPLES / "scheduler-config.json", sorted(EXAMPLES.glob("quota-*.json"))
    )
    lend_with_limits = quota_for(
        "lender",
        ComputeQuotaConfig=config_with(
            ResourceSharingConfig={
                "Strategy": "Lend",
                "AbsoluteBorrowLimits": [{"InstanceType": "ml.g5.12xlarge", "VCpu": 8}],
            }
        ),
        ActivationState="Disabled",
    )
    return [examples, imported(COMPUTE_QUOTA, lend_with_limits)]


@pytest.mark.parametrize("policy", imported_cases(), ids=["examples", "formats"])
def test_an_imported_policy_writes_a_policy_file_that_reads_back_the_same(
    policy: ClusterPolicy,
) -> None:
    document = yaml.safe_load(yaml.safe_dump(policy_document(policy)))

    assert policy_from_document(document, source="converted.yaml") == policy


# --- malformed input ----------------------------------------------------------------------


def broken_resource(**entry: Any) -> dict[str, Any]:
    resources = [{"InstanceType": "ml.p5.48xlarge", **entry}]
    return quota_for("nlp", ComputeQuotaConfig=config_with(ComputeQuotaResources=resources))


def broken_sharing(**sharing: Any) -> dict[str, Any]:
    return quota_for("nlp", ComputeQuotaConfig=config_with(ResourceSharingConfig=sharing))


RESOURCES = "ComputeQuotaConfig.ComputeQuotaResources[0]"
SHARING = "ComputeQuotaConfig.ResourceSharingConfig"
MALFORMED_QUOTAS = [
    # (the quota, the field the error names, words of the message or hint)
    (broken_resource(Count=2, Accelerators=8), f"{RESOURCES}.Count", "not both"),
    (broken_resource(), RESOURCES, "give Count, or Accelerators"),
    (broken_resource(Count=-1), f"{RESOURCES}.Count", "out of range"),
    (broken_resource(VCpu="lots"), f"{RESOURCES}.VCpu", "expected a number"),
    (broken_resource(MemoryInGiB=-5), f"{RESOURCES}.MemoryInGiB", "expected a number >= 0"),
    (broken_resource(Acelerators=8), f"{RESOURCES}.Acelerators", "did you mean 'Accelerators'"),
    (
        broken_resource(AcceleratorPartition={"Count": 2, "Type": "mig-1g.10gb"}),
        f"{RESOURCES}.AcceleratorPartition",
        "not supported",
    ),
    (
        quota_for(
            "nlp",
            ComputeQuotaConfig=config_with(
                ComputeQuotaResources=[{"InstanceType": "ml.x9.huge", "Count": 1}]
            ),
        ),
        f"{RESOURCES}.Count",
        "does not know the instance type x9.huge",
    ),
    (
        quota_for(
            "nlp",
            ComputeQuotaConfig=config_with(
                ComputeQuotaResources=[
                    {"InstanceType": "ml.p5.48xlarge", "Count": 1},
                    {"InstanceType": "p5.48xlarge", "Count": 1},
                ]
            ),
        ),
        "ComputeQuotaConfig.ComputeQuotaResources[1].InstanceType",
        "listed twice",
    ),
    (broken_sharing(Strategy="Hoard"), f"{SHARING}.Strategy", "DontLend, Lend, LendAndBorrow"),
    (broken_sharing(BorrowLimit=20000), f"{SHARING}.BorrowLimit", "0 to 10000"),
    (broken_sharing(Limit=5), f"{SHARING}.Limit", "unknown key"),
    (
        broken_sharing(AbsoluteBorrowLimits=[{"InstanceType": "ml.p5.48xlarge"}]),
        f"{SHARING}.AbsoluteBorrowLimits[0]",
        "no amount",
    ),
    (
        quota_for("nlp", ComputeQuotaConfig=config_with(PreemptTeamTasks="Always")),
        "ComputeQuotaConfig.PreemptTeamTasks",
        "LowerPriority, Never",
    ),
    (
        quota_for("nlp", ComputeQuotaConfig=config_with(Extra=1)),
        "ComputeQuotaConfig.Extra",
        "unknown key",
    ),
    (
        quota_for("nlp", ComputeQuotaTarget={"TeamName": "nlp", "FairShareWeight": 101}),
        "ComputeQuotaTarget.FairShareWeight",
        "0 to 100",
    ),
    (quota_for("nlp", ComputeQuotaTarget={}), "ComputeQuotaTarget.TeamName", "is missing"),
    (quota_for("nlp", ComputeQuotaTarget={"TeamName": 7}), "ComputeQuotaTarget.TeamName", "string"),
    (
        quota_for("nlp", ComputeQuotaTarget={"TeamName": "Team_A"}),
        "ComputeQuotaTarget.TeamName",
        "not a valid team name",
    ),
    (quota_for("nlp", ActivationState="Paused"), "ActivationState", "Enabled, Disabled"),
    ({"ComputeQuotaSummaries": [5]}, "ComputeQuotaSummaries[0]", "expected a mapping"),
]


@pytest.mark.parametrize(
    ("quota", "field", "words"), MALFORMED_QUOTAS, ids=lambda case: str(case)[:40]
)
def test_a_malformed_compute_quota_names_the_source_and_the_field(
    quota: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(InvalidInputError) as raised:
        imported(quota)

    message = str(raised.value)
    assert message.startswith(f"{SOURCE} (compute quota 0): {field}:"), message
    assert words in message


MALFORMED_CONFIGS = [
    ({"SchedulerConfig": {"FairShare": "Sometimes"}}, "SchedulerConfig.FairShare", "Enabled"),
    ({"SchedulerConfig": {"Fairshare": "Enabled"}}, "SchedulerConfig.Fairshare", "'FairShare'"),
    (
        {"SchedulerConfig": {"PriorityClasses": [{"Name": "a", "Weight": 101}]}},
        "SchedulerConfig.PriorityClasses[0].Weight",
        "0 to 100",
    ),
    (
        {"SchedulerConfig": {"PriorityClasses": [{"Name": "a", "Weight": 1}] * 2}},
        "SchedulerConfig.PriorityClasses[1].Name",
        "twice",
    ),
    (
        {
            "SchedulerConfig": {
                "PriorityClasses": [{"Name": f"c{i}", "Weight": i} for i in range(11)]
            }
        },
        "SchedulerConfig.PriorityClasses",
        "at most 10",
    ),
]


def test_more_compute_quotas_than_the_team_limit_are_refused() -> None:
    quotas = {"ComputeQuotaSummaries": [quota_for(f"team-{index}") for index in range(1001)]}

    with pytest.raises(InvalidInputError, match="more than 1,000 teams"):
        imported(quotas)


@pytest.mark.parametrize(
    ("config", "field", "words"), MALFORMED_CONFIGS, ids=lambda case: str(case)[:40]
)
def test_a_malformed_scheduler_config_names_the_source_and_the_field(
    config: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(InvalidInputError) as raised:
        imported(COMPUTE_QUOTA, config=config)

    message = str(raised.value)
    assert message.startswith(f"{SOURCE}: {field}:"), message
    assert words in message


def test_a_document_without_a_scheduler_config_says_what_to_give() -> None:
    with pytest.raises(InvalidInputError, match=r"hyperpod: no SchedulerConfig .*describe-cluster"):
        imported(COMPUTE_QUOTA, config={"Name": "x"})


def test_a_team_with_two_quotas_names_both_files(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(quota_for("nlp")), encoding="utf-8")
    second.write_text(json.dumps(quota_for("nlp")), encoding="utf-8")

    with pytest.raises(InvalidInputError) as raised:
        load_hyperpod_policy(None, [first, second])

    assert str(raised.value).startswith(f"{second}: team 'nlp' has a second compute quota")
    assert str(first) in str(raised.value)


def test_errors_in_files_name_the_file(tmp_path: Path) -> None:
    config, quota = tmp_path / "config.json", tmp_path / "quota.json"
    config.write_text(json.dumps(SCHEDULER_CONFIG), encoding="utf-8")
    quota.write_text(json.dumps(broken_sharing(Strategy="Hoard")), encoding="utf-8")

    with pytest.raises(InvalidInputError, match=rf"{quota}: {SHARING}.Strategy: unknown value"):
        load_hyperpod_policy(config, [quota])
    with pytest.raises(InvalidInputError, match=f"{tmp_path / 'none.json'}: file not found"):
        load_hyperpod_policy(tmp_path / "none.json", [])
