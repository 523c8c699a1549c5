"""Job routes in-process: submission in every format, bad input naming the field, conflicts,
the aggregate view of other teams' jobs, hold/release, explain, logs and events."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.api.conftest import (
    EXAMPLES,
    OTHER_TEAM,
    TEAM,
    Api,
    fitted_example,
    small_job,
    waits_forever,
)
from topoq.engine.ports import ExecutorEventKind

V1 = "/api/v1"


def example(name: str) -> dict[str, Any]:
    document = yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def submit(api: Api, body: dict[str, Any], who: str = "member") -> Any:
    return api.client.post(f"{V1}/jobs", json=body, headers=api.headers(who))


@pytest.mark.parametrize(
    ("job_format", "file", "job_id", "pods"),
    [
        ("topoq", "llama-70b-job.yaml", "llama-70b", 8),
        ("hyperpod", "hyperpod-pytorch-job.yaml", "llama3-finetune", 7),
        ("kueue", "required-block.yaml", "gpt-block-8", 7),
        ("kubernetes", "../kubernetes/jobs/indexed-job.yaml", "bert-indexed", 7),
    ],
)
def test_each_format_is_submitted_to_the_team_its_namespace_names(
    api: Api, job_format: str, file: str, job_id: str, pods: int
) -> None:
    document = fitted_example(job_format, example(file))
    response = submit(api, {"format": job_format, "document": document})
    assert response.status_code == 201, response.text
    job = response.json()
    assert (job["id"], job["team"], job["phase"], job["pods"]) == (job_id, TEAM, "pending", pods)
    assert job["user"] == "member" and job["priorityClass"] == "training-priority"
    assert job["history"][0]["cause"] == "submitted"


def test_a_list_of_a_groups_pods_is_one_job_and_pods_that_disagree_are_a_422(api: Api) -> None:
    document = example("../kubernetes/jobs/pod-group.yaml")
    response = submit(api, {"format": "kubernetes", "document": document})
    assert response.status_code == 201, response.text
    job = response.json()
    assert (job["id"], job["team"], job["pods"]) == ("allreduce", TEAM, 3)
    sets = [(s["name"], s["count"]) for s in job["workload"]["podSets"]]
    assert sets == [("allreduce-launcher", 1), ("allreduce-worker-0", 2)]
    broken = example("../kubernetes/jobs/pod-group.yaml")
    broken["items"][2]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "elsewhere"
    broken["items"][0]["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "other"
    refused = submit(api, {"format": "kubernetes", "document": broken})
    assert refused.status_code == 422, refused.text
    assert "items[1]" in refused.text and "pod-group-name" in refused.text
    assert api.client.get(f"{V1}/jobs/other", headers=api.headers("admin")).status_code == 404


def test_hyperpod_max_retry_is_kept(api: Api) -> None:
    document = fitted_example("hyperpod", example("hyperpod-pytorch-job.yaml"))
    assert submit(api, {"format": "hyperpod", "document": document}).json()["maxRetry"] == 3


@pytest.mark.parametrize(
    ("job_format", "file", "where", "words"),
    [
        ("topoq", "llama-70b-job.yaml", "pod set 'workers'", "of 16 pods fit"),
        ("hyperpod", "hyperpod-pytorch-job.yaml", "pod set 'worker'", "at most 2 of 8 pods"),
        ("kueue", "required-block.yaml", "pod set 'workers'", "at most 2 of 8 pods"),
    ],
)
def test_a_job_the_cluster_could_never_hold_is_a_422_naming_the_limit(
    api: Api, job_format: str, file: str, where: str, words: str
) -> None:
    """The examples as written need blocks of 8 nodes (or slices of 4 in one); the tests'
    blocks have 2 nodes, failed or cordoned ones counted."""
    response = submit(api, {"format": job_format, "document": example(file)})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail["where"] == where and detail["hint"], detail
    assert (
        detail["message"].startswith("the job can never run here: ") and words in detail["message"]
    )
    assert api.client.get(f"{V1}/jobs", headers=api.headers("member")).json()["total"] == 0


BAD_DOCUMENTS = [
    ("topoq", ["spec", "podSets", 0, "count"], "x", "document.spec.podSets[0].count"),
    ("topoq", ["spec", "podSets", 0, "topology", "requird"], "a", "document.spec.podSets[0]"),
    ("hyperpod", ["instance_type"], "ml.nope", "document.instance_type"),
    ("hyperpod", ["node_count"], 0, "document.node_count"),
    ("kueue", ["kind"], "Job", "document.kind"),
    ("kueue", ["spec", "podSets", 0, "count"], -1, "document.spec.podSets"),
]
FILES = {
    "topoq": "llama-70b-job.yaml",
    "hyperpod": "hyperpod-pytorch-job.yaml",
    "kueue": "required-block.yaml",
}


@pytest.mark.parametrize(("job_format", "key_path", "value", "where"), BAD_DOCUMENTS)
def test_a_bad_document_is_a_422_naming_the_field(
    api: Api, job_format: str, key_path: list[str | int], value: object, where: str
) -> None:
    document = example(FILES[job_format])
    target: Any = document
    for key in key_path[:-1]:
        target = target[key]
    target[key_path[-1]] = value
    response = submit(api, {"format": job_format, "document": document})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail["where"].startswith(where), detail
    assert detail["message"] and detail["hint"]


@pytest.mark.parametrize(
    ("body", "where", "hint"),
    [
        (
            {"format": "slurm", "document": {}},
            "body.format",
            "'topoq', 'hyperpod', 'kueue' or 'kubernetes'",
        ),
        ({"document": {}}, "body.format", "add this field"),
        ({"format": "topoq", "document": {}, "tema": "x"}, "body.tema", "remove this field"),
        ({"format": "topoq", "document": [1]}, "body.document", None),
        ({**small_job("j"), "maxRetry": -1}, "body.maxRetry", None),
        ({**small_job("j"), "team": "physics"}, "team", "nlp, vision"),
        ({**small_job("j"), "priorityClass": "urgent"}, "priorityClass", "inference"),
    ],
)
def test_a_bad_request_is_a_422_naming_the_field(
    api: Api, body: dict[str, Any], where: str, hint: str | None
) -> None:
    response = submit(api, body, who="admin")
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail["where"] == where, detail
    if hint is not None:
        assert hint in detail["hint"], detail


def test_a_level_the_cluster_does_not_have_is_refused(api: Api) -> None:
    body = small_job("j")
    body["document"]["spec"]["podSets"][0]["topology"] = {"required": "rack"}  # type: ignore[index]
    detail = submit(api, body).json()["detail"]
    assert "rack" in detail["message"] and "network-node-layer-3" in detail["hint"]


@pytest.mark.parametrize(
    ("pod_set", "message"),
    [
        ({"count": 10**9}, "pods"),
        ({"requests": {"nvidia.com/gpu": 8, "memory": "1e30"}}, "more than any cluster has"),
    ],
)
def test_sizes_no_cluster_has_are_refused(
    api: Api, pod_set: dict[str, object], message: str
) -> None:
    body = small_job("huge")
    body["document"]["spec"]["podSets"][0].update(pod_set)  # type: ignore[index]
    response = submit(api, body)
    assert response.status_code == 422 and message in response.json()["detail"]["message"]


def test_a_duplicate_id_is_a_409(api: Api) -> None:
    assert submit(api, small_job("twice")).status_code == 201
    response = submit(api, small_job("twice"))
    assert response.status_code == 409
    assert response.json()["detail"]["where"] == "id"


def test_a_member_cannot_submit_to_another_team(api: Api) -> None:
    response = submit(api, small_job("theirs", team=OTHER_TEAM))
    assert response.status_code == 403
    assert "vision" in response.json()["detail"]["message"]


def test_other_teams_jobs_show_only_id_team_phase_and_gpus(api: Api) -> None:
    assert submit(api, small_job("ours")).status_code == 201
    assert submit(api, small_job("theirs", team=OTHER_TEAM), who="admin").status_code == 201
    response = api.client.get(f"{V1}/jobs", headers=api.headers("member"))
    rows = {row["id"]: row for row in response.json()["items"]}
    assert rows["ours"]["visible"] and rows["ours"]["user"] == "member"
    assert rows["theirs"] == {
        "id": "theirs",
        "team": OTHER_TEAM,
        "phase": "pending",
        "gpus": 16,
        "visible": False,
        "user": None,
        "priorityClass": None,
        "pods": None,
        "held": None,
        "submittedAt": None,
        "span": None,
        "timeLimitS": None,
        "reason": None,
        "waitingOn": None,
        "etaAt": None,
        "reasonMessage": None,
    }
    assert api.client.get(f"{V1}/jobs/theirs", headers=api.headers("member")).status_code == 403


def test_jobs_are_filtered_and_paged(api: Api) -> None:
    for name in ("a1", "a2", "a3"):
        submit(api, small_job(name))
    submit(api, small_job("b1", team=OTHER_TEAM), who="admin")
    admin = api.headers("admin")
    page = api.client.get(f"{V1}/jobs", params={"team": TEAM, "limit": 2}, headers=admin).json()
    assert [row["id"] for row in page["items"]] == ["a3", "a2"] and page["total"] == 3
    pending = api.client.get(f"{V1}/jobs", params={"phase": "running"}, headers=admin).json()
    assert pending["items"] == []
    bad = api.client.get(f"{V1}/jobs", params={"phase": "sleeping"}, headers=admin)
    assert bad.status_code == 422 and bad.json()["detail"]["where"] == "query.phase"


def test_cancel_then_cancel_again_is_a_409(api: Api) -> None:
    submit(api, small_job("c"))
    response = api.client.post(f"{V1}/jobs/c/cancel", headers=api.headers("member"))
    assert response.status_code == 200 and response.json()["phase"] == "cancelled"
    again = api.client.post(f"{V1}/jobs/c/cancel", headers=api.headers("member"))
    assert again.status_code == 409 and "already ended" in again.json()["detail"]["message"]


def test_a_held_job_waits_until_released(api: Api) -> None:
    submit(api, small_job("h"))
    member = api.headers("member")
    assert api.client.post(f"{V1}/jobs/h/hold", headers=member).json()["held"] is True
    api.controller.step()
    explained = api.client.get(f"{V1}/jobs/h/explain", headers=member).json()
    assert explained["reason"] == "HELD"
    assert api.client.post(f"{V1}/jobs/h/release", headers=member).json()["held"] is False
    api.controller.step()
    assert api.client.get(f"{V1}/jobs/h", headers=member).json()["phase"] == "admitted"
    late = api.client.post(f"{V1}/jobs/h/hold", headers=member)
    assert late.status_code == 409 and "only pending jobs" in late.json()["detail"]["hint"]


def test_explain_gives_the_reason_and_numbers_of_a_waiting_job(api: Api) -> None:
    submit(api, waits_forever("wide"))
    fresh = api.client.get(f"{V1}/jobs/wide/explain", headers=api.headers("viewer"))
    assert fresh.json()["reason"] == "NEVER_FITS_CURRENT_POLICY"  # computed: no cycle yet
    api.controller.step()
    stored = api.client.get(f"{V1}/jobs/wide/explain", headers=api.headers("viewer"))
    assert stored.json() == fresh.json()
    assert stored.json()["numbers"] and stored.json()["message"]


def test_a_running_job_has_its_allocation_span_history_and_logs(api: Api) -> None:
    submit(api, small_job("r"))
    api.controller.step()
    api.executor.report(ExecutorEventKind.STARTED, "r")
    api.controller.step()
    member = api.headers("member")
    job = api.client.get(f"{V1}/jobs/r", headers=member).json()
    assert job["phase"] == "running" and len(job["allocation"]["nodes"]) == 2
    assert job["span"]["topology.k8s.aws/network-node-layer-3"] == 1
    history = api.client.get(f"{V1}/jobs/r/history", headers=member).json()["history"]
    assert [change["phase"] for change in history] == ["pending", "admitted", "running"]
    assert "running" in api.client.get(f"{V1}/jobs/r/explain", headers=member).json()["message"]
    logs = api.client.get(f"{V1}/jobs/r/logs", params={"pod": 1}, headers=member)
    assert logs.status_code == 200 and logs.json()["pod"] == 1
    missing = api.client.get(f"{V1}/jobs/r/logs", params={"pod": 2}, headers=member)
    assert missing.status_code == 422 and "pods 0 to 1" in missing.json()["detail"]["hint"]


def test_an_unknown_job_is_a_404(api: Api) -> None:
    response = api.client.get(f"{V1}/jobs/nope", headers=api.headers("admin"))
    assert response.status_code == 404 and "nope" in response.json()["detail"]["message"]


def test_events_show_only_the_tokens_teams(api: Api) -> None:
    submit(api, small_job("ours"))
    submit(api, small_job("theirs", team=OTHER_TEAM), who="admin")
    seen = api.client.get(f"{V1}/events", headers=api.headers("member")).json()
    assert {event["job"] for event in seen} == {"ours"}
    everything = api.client.get(f"{V1}/events", headers=api.headers("admin")).json()
    assert {event["job"] for event in everything} == {"ours", "theirs"}
    other = api.client.get(
        f"{V1}/events", params={"team": OTHER_TEAM}, headers=api.headers("member")
    )
    assert other.status_code == 403
