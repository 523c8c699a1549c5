"""Reading scenario files: what they define, and errors that name the file, event and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.sim.conftest import SCENARIOS, WriteScenario, submit
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import DependencyKind, JobId
from topoq.sim import load_scenario
from topoq.sim.events import Cancel, FailNode, Hold, Submit


def error_of(path: Path) -> str:
    with pytest.raises(InvalidInputError) as caught:
        load_scenario(path)
    return str(caught.value)


OWN_CLUSTERS = {"fair-share-at-scale.yaml": 64}
"""Nodes of the examples that do not share cluster.yaml."""


def test_every_example_scenario_reads() -> None:
    for path in sorted(SCENARIOS.glob("*.yaml")):
        if path.name in ("cluster.yaml", "policy.yaml"):
            continue
        scenario = load_scenario(path)
        assert scenario.events, path.name
        assert len(scenario.nodes) == OWN_CLUSTERS.get(path.name, 16)  # else cluster.yaml
        assert scenario.warnings == ()


def test_streams_expand_into_numbered_submissions_in_batches(write_scenario: WriteScenario) -> None:
    stream = {"team": "vision", "id_prefix": "s", "every_s": 60, "count": 10, "batch": 4}
    path = write_scenario([{"at": 30, "stream": {**stream, "runtime_s": 5, "gpus": 1}}])
    events = load_scenario(path).events
    ids = [e.action.spec.id for e in events if isinstance(e.action, Submit)]
    assert ids == [f"s-{n:02d}" for n in range(1, 11)]
    assert [e.at_s for e in events] == [30] * 4 + [90] * 4 + [150] * 2
    assert all(isinstance(e.action, Submit) and e.action.spec.runtime_s == 5 for e in events)


def test_events_apply_by_time_then_in_file_order(write_scenario: WriteScenario) -> None:
    path = write_scenario(
        [
            {"at": 10, "cancel": "a"},
            {"at": 0, "submit": submit("a")},
            {"at": 10, "hold": "a"},
            {"at": 5, "fail_node": "p5-0003"},
        ]
    )
    actions = [type(e.action) for e in load_scenario(path).events]
    assert actions == [Submit, FailNode, Cancel, Hold]


def test_a_submission_reads_its_fate_dependencies_and_priority(
    write_scenario: WriteScenario,
) -> None:
    path = write_scenario(
        [
            {"at": 0, "submit": submit("a")},
            {"at": 0, "submit": submit("b")},
            {
                "at": 5,
                "submit": submit(
                    "c",
                    priority="inference",
                    after_ok=["a"],
                    after_failed="b",
                    exit_code=[1, 0],
                    max_retry=2,
                    pods=2,
                    required="topology.k8s.aws/network-node-layer-2",
                ),
            },
        ]
    )
    action = load_scenario(path).events[2].action
    assert isinstance(action, Submit)
    spec = action.spec
    assert (spec.submitted_at, spec.priority_class, spec.max_retry) == (5, "inference", 2)
    assert [(d.kind, d.job) for d in spec.dependencies] == [
        (DependencyKind.AFTER_OK, JobId("a")),
        (DependencyKind.AFTER_FAILED, JobId("b")),
    ]
    assert action.exit_codes == (1, 0)
    (pod_set,) = spec.workload.pod_sets
    assert pod_set.count == 2
    assert pod_set.topology.required == "topology.k8s.aws/network-node-layer-2"


def test_inline_pod_sets_cluster_and_policy(tmp_path: Path, write_scenario: WriteScenario) -> None:
    pod_sets = [{"name": "w", "count": 3, "requests": {"nvidia.com/gpu": 4}}]
    path = write_scenario(
        [{"at": 0, "submit": {"id": "x", "team": "t", "runtime_s": 1, "podSets": pod_sets}}],
        cluster={"generate": "1x4 p5.48xlarge"},
        policy={"teams": [{"name": "t", "quotas": [{"flavor": "p5.48xlarge", "instances": 4}]}]},
    )
    scenario = load_scenario(path)
    assert len(scenario.nodes) == 4
    assert [team.name for team in scenario.policy.teams] == ["t"]
    action = scenario.events[0].action
    assert isinstance(action, Submit)
    assert action.spec.workload.pod_sets[0].count == 3


def test_a_job_file_is_read_relative_to_the_scenario(
    tmp_path: Path, write_scenario: WriteScenario
) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "train.yaml").write_text(
        "apiVersion: topoq.io/v1\nkind: Job\nmetadata: {name: train}\n"
        "spec:\n  priorityClassName: experiment\n"
        "  podSets: [{name: w, count: 2, requests: {nvidia.com/gpu: 8}}]\n",
        encoding="utf-8",
    )
    path = write_scenario(
        [{"at": 0, "submit": {"id": "t", "team": "nlp", "runtime_s": 9, "job": "jobs/train.yaml"}}]
    )
    action = load_scenario(path).events[0].action
    assert isinstance(action, Submit)
    assert action.spec.priority_class == "experiment"
    assert action.spec.workload.total_pods == 2


def test_an_unknown_team_is_a_warning_not_an_error(write_scenario: WriteScenario) -> None:
    path = write_scenario([{"at": 0, "submit": submit("a", team="robotics")}])
    (warning,) = load_scenario(path).warnings
    assert "events[0].submit: team 'robotics' is not in the policy" in warning
    assert "UNKNOWN_TEAM" in warning


STREAMED = {"team": "nlp", "runtime_s": 600, "pods": 1, "gpus": 8}

BAD_EVENTS: list[tuple[str, list[dict[str, Any]], str]] = [
    (
        "negative time",
        [{"at": -5, "submit": submit("a")}],
        "events[0].at: is -5 (give a number of seconds 0 or more, up to 100,000,000)",
    ),
    (
        "two actions in one event",
        [{"at": 0, "submit": submit("a"), "cancel": "a"}],
        "events[0]: submit and cancel are given (give `at` and exactly one of",
    ),
    (
        "cancel of an unknown job",
        [{"at": 0, "submit": submit("train")}, {"at": 5, "cancel": "trian"}],
        "events[1].cancel: job 'trian' is unknown (did you mean 'train'?",
    ),
    (
        "cancel before the submission",
        [{"at": 50, "submit": submit("a")}, {"at": 5, "cancel": "a"}],
        "events[1].cancel: the job 'a' is submitted only at 50 s (events[0].submit), "
        "after this event at 5 s",
    ),
    (
        "unknown node",
        [{"at": 5, "fail_node": "p5-003"}],
        "events[0].fail_node: node 'p5-003' is unknown (did you mean 'p5-00",
    ),
    (
        "a node failed twice",
        [{"at": 5, "fail_node": "p5-0003"}, {"at": 9, "fail_node": "p5-0003"}],
        "events[1].fail_node: node 'p5-0003' is already failed at 9 s",
    ),
    (
        "recovery of a node that is up",
        [{"at": 5, "recover_node": "p5-0003"}],
        "events[0].recover_node: node 'p5-0003' is not failed at 5 s",
    ),
    (
        "the same job id twice",
        [{"at": 0, "submit": submit("a")}, {"at": 1, "submit": submit("a")}],
        "events[1].submit: job 'a' is submitted twice (also at events[0].submit",
    ),
    (
        "a dependency on a job never submitted",
        [{"at": 0, "submit": submit("a", after_ok=["prep"])}],
        "events[0].submit: job 'prep' is unknown",
    ),
    (
        "an unknown priority class",
        [{"at": 0, "submit": submit("a", priority="trainig")}],
        "events[0].submit.priority: priority class 'trainig' is unknown (did you mean "
        "'training'? use one of the policy's classes: inference, training, experiment)",
    ),
    (
        "a level the cluster does not have",
        [{"at": 0, "submit": submit("a", required="topology.k8s.aws/network-node-layer-3")}],
        "events[0].submit.gpus (pod set workers): level "
        "'topology.k8s.aws/network-node-layer-3' is unknown",
    ),
    (
        "two shapes",
        [{"at": 0, "submit": submit("a", job="x.yaml")}],
        "events[0].submit: job and gpus are given (give exactly one of job",
    ),
    (
        "a shortcut field without gpus",
        [
            {
                "at": 0,
                "submit": {
                    "id": "a",
                    "team": "nlp",
                    "runtime_s": 1,
                    "pods": 2,
                    "podSets": [{"name": "w", "count": 1}],
                },
            }
        ],
        "events[0].submit.pods: pods goes only with gpus",
    ),
    (
        "a bad inline pod set",
        [
            {
                "at": 0,
                "submit": {
                    "id": "a",
                    "team": "nlp",
                    "runtime_s": 1,
                    "podSets": [{"name": "w", "count": 0, "requests": {"nvidia.com/gpu": 8}}],
                },
            }
        ],
        "events[0].submit.podSets[0]: pod set 'w': count is 0 (count must be >= 1)",
    ),
    (
        "a misspelt key",
        [{"at": 0, "submit": {**submit("a"), "runtime": 5}}],
        "events[0].submit.runtime: unknown key 'runtime' (did you mean 'runtime_s'?",
    ),
    (
        "a missing run time",
        [{"at": 0, "submit": {"id": "a", "team": "nlp", "gpus": 8}}],
        "events[0].submit.runtime_s: is missing",
    ),
    (
        "a non-numeric exit code",
        [{"at": 0, "submit": submit("a", exit_code="boom")}],
        "events[0].submit.exit_code: expected an exit code (a whole number), got 'boom'",
    ),
    (
        "a time that is not a number",
        [{"at": float("nan"), "submit": submit("a")}],
        "events[0].at: nan is not a finite number",
    ),
    (
        "an infinite run time",
        [{"at": 0, "submit": submit("a", runtime_s=float("inf"))}],
        "events[0].submit.runtime_s: inf is not a finite number",
    ),
    (
        "a time beyond the limit",
        [{"at": 1e12, "submit": submit("a")}],
        "events[0].at: is 1000000000000.0 (give a number of seconds 0 or more, up to 100,000,000",
    ),
    (
        "a stream of a billion jobs",
        [{"at": 0, "stream": {"team": "nlp", "every_s": 1, "count": 10**9, **STREAMED}}],
        "events[0].stream.count: 1,000,000,000 jobs (a scenario has at most 20,000 jobs",
    ),
    (
        "streams that add up to more jobs than the limit",
        [
            {
                "at": 0,
                "stream": {"every_s": 1, "count": 12_000, "id_prefix": f"s{index}", **STREAMED},
            }
            for index in range(2)
        ],
        "events[1].stream.count: 24,000 jobs (a scenario has at most 20,000 jobs",
    ),
    (
        "a huge max_retry",
        [{"at": 0, "submit": submit("a", max_retry=1e30)}],
        "events[0].submit.max_retry: expected a whole number",
    ),
    (
        "a max_retry beyond the limit",
        [{"at": 0, "submit": submit("a", max_retry=1000)}],
        "events[0].submit.max_retry: is 1000 (give a whole number from 0 to 100)",
    ),
    (
        "a job id that is a number",
        [{"at": 0, "submit": submit(42)}],  # type: ignore[arg-type]  # the point of the test
        "events[0].submit.id: expected a string, got int 42",
    ),
    (
        "a job id outside the grammar",
        [{"at": 0, "submit": submit("Train/1")}],
        "events[0].submit.id: 'Train/1' is not a valid job id",
    ),
    (
        "a team name that is a number",
        [{"at": 0, "submit": submit("a", team=7)}],
        "events[0].submit.team: expected a string, got int 7",
    ),
    (
        "a team name outside the grammar",
        [{"at": 0, "submit": submit("a", team="NLP team")}],
        "events[0].submit.team: 'NLP team' is not a valid team name",
    ),
    (
        "a stream whose ids would be outside the grammar",
        [{"at": 0, "stream": {"every_s": 1, "count": 2, "id_prefix": "Big_", **STREAMED}}],
        "events[0].stream.id_prefix: 'Big_-1' is not a valid job id",
    ),
    (
        "a stream that never repeats",
        [
            {
                "at": 0,
                "stream": {"team": "nlp", "every_s": 0, "count": 3, "gpus": 8, "runtime_s": 1},
            }
        ],
        "events[0].stream.every_s: is 0 (give a number of seconds greater than 0, up to ",
    ),
]


@pytest.mark.parametrize(
    ("events", "expected"),
    [pytest.param(events, expected, id=name) for name, events, expected in BAD_EVENTS],
)
def test_a_malformed_event_names_the_file_event_and_field(
    write_scenario: WriteScenario, events: list[dict[str, Any]], expected: str
) -> None:
    path = write_scenario(events)
    message = error_of(path)
    assert message.startswith(f"{path}: "), message
    assert expected in message, message


def test_periodic_cycles_beyond_the_limit_are_refused_before_the_run(
    write_scenario: WriteScenario,
) -> None:
    events = [{"at": 0, "submit": submit("a", runtime_s=10**8)}]
    message = error_of(write_scenario(events, cycle_interval_s=1))
    assert "cycle_interval_s: a cycle every 1 s until 1e+08 s is 100,000,000 cycles" in message
    assert "at most 100,000 periodic cycles" in message
    assert "until_s: 1" not in message
    load_scenario(write_scenario(events, cycle_interval_s=1, until_s=3600))


def test_malformed_top_level_fields(tmp_path: Path, write_scenario: WriteScenario) -> None:
    assert "kind: expected 'Scenario', got 'Cluster'" in error_of(
        write_scenario([], kind="Cluster")
    )
    assert "unknown key 'untill_s' (did you mean 'until_s'?" in error_of(
        write_scenario([], untill_s=5)
    )
    assert "cycle_interval_s: is 0" in error_of(write_scenario([], cycle_interval_s=0))
    missing = error_of(write_scenario([], cluster="nowhere.yaml"))
    assert "cluster: file 'nowhere.yaml' not found" in missing
    assert "paths are relative to the scenario file" in missing
    bad_policy = write_scenario([], policy={"teams": [{"name": "a", "weight": 3}]})
    assert "policy: teams[0].weight: unknown key 'weight'" in error_of(bad_policy)


def test_an_error_in_a_referenced_file_names_both_files(
    tmp_path: Path, write_scenario: WriteScenario
) -> None:
    (tmp_path / "bad-policy.yaml").write_text(
        "apiVersion: topoq.io/v1\nkind: Policy\nteams: [{name: a, sharing: Sometimes}]\n",
        encoding="utf-8",
    )
    path = write_scenario([], policy="bad-policy.yaml")
    message = error_of(path)
    assert message.startswith(f"{path}: policy: {tmp_path / 'bad-policy.yaml'}: teams[0]")


def test_a_job_file_priority_the_policy_lacks_is_an_error_unless_overridden(
    tmp_path: Path, write_scenario: WriteScenario
) -> None:
    (tmp_path / "job.yaml").write_text(
        "apiVersion: topoq.io/v1\nkind: Job\nmetadata: {name: j}\n"
        "spec:\n  priorityClassName: training-priority\n"
        "  podSets: [{name: w, count: 1, requests: {nvidia.com/gpu: 8}}]\n",
        encoding="utf-8",
    )
    job = {"id": "a", "team": "nlp", "runtime_s": 1, "job": "job.yaml"}
    message = error_of(write_scenario([{"at": 0, "submit": job}]))
    assert (
        "events[0].submit.job (priorityClassName): priority class 'training-priority' is unknown"
        in message
    )
    assert "or give `priority` to override it" in message
    overridden = write_scenario([{"at": 0, "submit": {**job, "priority": "training"}}])
    action = load_scenario(overridden).events[0].action
    assert isinstance(action, Submit)
    assert action.spec.priority_class == "training"


def test_a_job_file_level_the_cluster_lacks_is_an_error(write_scenario: WriteScenario) -> None:
    workload = str(SCENARIOS.parent / "workloads" / "required-block.yaml")
    job = {"id": "a", "team": "nlp", "runtime_s": 1, "job": workload, "priority": "training"}
    message = error_of(write_scenario([{"at": 0, "submit": job}]))
    assert (
        "events[0].submit.job (pod set workers): level 'topology.k8s.aws/network-node-layer-3' "
        "is unknown" in message
    )
