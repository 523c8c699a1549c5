"""Dependencies through the API on the real SQLite store: written in every job format (or as
the request's ``dependencies``), checked at submission (an unknown upstream id, the job itself
and a contradiction are refused with 422 naming the field; nothing is stored), resolved by the
controller once the upstream job ends, and shown by explain."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.api.conftest import Api, small_job
from tests.api.test_jobs import example
from topoq.domain.job import JobId, JobPhase
from topoq.engine.ports import ExecutorEventKind

V1 = "/api/v1"
Kind = ExecutorEventKind


def submit(api: Api, body: dict[str, Any]) -> Any:
    return api.client.post(f"{V1}/jobs", json=body, headers=api.headers("member"))


def explain(api: Api, job: str) -> dict[str, Any]:
    response = api.client.get(f"{V1}/jobs/{job}/explain", headers=api.headers("viewer"))
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def topoq_job(name: str, **spec: object) -> dict[str, Any]:
    body = small_job(name, pods=1)
    body["document"]["spec"].update(spec)  # type: ignore[index]
    return body


def hyperpod_job(name: str, **fields: object) -> dict[str, Any]:
    document = example("hyperpod-pytorch-job.yaml") | {"job_name": name, "node_count": 1}
    return {"format": "hyperpod", "document": document | fields}


def kueue_job(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    document = copy.deepcopy(example("required-block.yaml"))
    document["metadata"] |= {"name": name, "annotations": annotations}
    document["spec"]["podSets"][0]["count"] = 1
    return {"format": "kueue", "document": document}


def finish(api: Api, job: str, exit_code: int = 0) -> None:
    """Step the controller until ``job`` is admitted, then let it run and exit."""
    api.controller.step()
    assert api.store.job(JobId(job)).phase is JobPhase.ADMITTED
    api.executor.report(Kind.STARTED, job)
    api.controller.step()
    api.executor.report(Kind.EXITED, job, exit_code=exit_code)
    api.controller.step()


def assert_refused(api: Api, body: dict[str, Any], where: str, message: str) -> dict[str, str]:
    before = api.store.count_jobs()
    response = submit(api, body)
    assert response.status_code == 422, response.text
    detail: dict[str, str] = response.json()["detail"]
    assert detail["where"] == where and message in detail["message"], detail
    assert detail["hint"], detail
    assert api.store.count_jobs() == before
    return detail


@pytest.mark.parametrize(
    "dependent",
    [
        topoq_job("train", afterOk=["prep"]),
        topoq_job("train", after_ok="prep"),
        hyperpod_job("train", after_ok=["prep"]),
        kueue_job("train", {"topoq.io/after-ok": "prep"}),
        {**topoq_job("train"), "dependencies": [{"kind": "after-ok", "job": "prep"}]},
    ],
    ids=["topoq-list", "topoq-string", "hyperpod", "kueue", "request"],
)
def test_a_dependency_in_each_format_waits_then_starts_once_prep_succeeded(
    api: Api, dependent: dict[str, Any]
) -> None:
    assert submit(api, topoq_job("prep")).status_code == 201
    response = submit(api, dependent)
    assert response.status_code == 201, response.text
    assert response.json()["dependencies"] == [{"kind": "after-ok", "job": "prep"}]
    api.controller.step()
    assert api.store.job(JobId("train")).phase is JobPhase.PENDING
    waiting = explain(api, "train")
    assert waiting["reason"] == "WAITING_ON_DEPENDENCY"
    assert waiting["dependencies"] == [
        {"kind": "after-ok", "job": "prep", "phase": "admitted", "status": "open"}
    ]
    api.executor.report(Kind.STARTED, "prep")
    api.controller.step()
    api.executor.report(Kind.EXITED, "prep", exit_code=0)
    report = api.controller.step()
    assert report.started == ["train"] and not report.result.cancellations
    met = explain(api, "train")["dependencies"]
    assert met == [{"kind": "after-ok", "job": "prep", "phase": "succeeded", "status": "met"}]


def test_an_upstream_job_that_ended_before_submission_is_depended_on(api: Api) -> None:
    submit(api, topoq_job("prep"))
    finish(api, "prep", exit_code=1)
    failed_only = {"topoq.io/after-failed": "prep", "topoq.io/after-any": "prep"}
    assert submit(api, kueue_job("cleanup", failed_only)).status_code == 201
    assert submit(api, hyperpod_job("train", after_ok="prep")).status_code == 201
    report = api.controller.step()
    assert report.started == ["cleanup"]
    train = api.store.job(JobId("train"))
    assert train.phase is JobPhase.CANCELLED
    assert train.history[-1].cause == "dependency after-ok prep: it ended failed"
    assert explain(api, "train")["dependencies"][0]["status"] == "broken"


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({**topoq_job("train"), "dependencies": [{"kind": "after-ok", "job": "nope"}]}, None),
        (topoq_job("train", afterAny=["prep", "nope"]), "document.spec.afterAny[1]"),
        (hyperpod_job("train", after_failed="prep, nope"), "document.after_failed"),
        (
            kueue_job("train", {"topoq.io/after-ok": "prep,nope"}),
            "document.metadata.annotations.topoq.io/after-ok",
        ),
    ],
    ids=["request", "topoq", "hyperpod", "kueue"],
)
def test_an_unknown_upstream_id_is_refused_naming_it(
    api: Api, body: dict[str, Any], where: str | None
) -> None:
    submit(api, topoq_job("prep"))
    detail = assert_refused(api, body, where or "dependencies[0].job", "no job has the id 'nope'")
    assert "submit nope first" in detail["hint"]


def test_a_job_that_depends_on_itself_is_refused(api: Api) -> None:
    assert_refused(
        api, topoq_job("loop", afterOk=["loop"]), "document.spec.afterOk[0]", "depends on itself"
    )


def test_waiting_for_success_and_failure_of_one_job_is_refused(api: Api) -> None:
    submit(api, topoq_job("prep"))
    body = {
        **topoq_job("train", afterFailed="prep"),
        "dependencies": [{"kind": "after-ok", "job": "prep"}],
    }
    detail = assert_refused(api, body, "document.spec.afterFailed", "both to succeed and to fail")
    assert "after-any" in detail["hint"]


@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        (topoq_job("t", afterOK=["prep"]), "document.spec.afterOK", "unknown key"),
        (topoq_job("t", afterOk="prep,,x"), "document.spec.afterOk", "empty job id"),
        (topoq_job("t", afterOk={"job": "prep"}), "document.spec.afterOk", "expected job ids"),
        (topoq_job("t", afterOk=["Bad_Id"]), "document.spec.afterOk[0]", "not a valid job id"),
        (hyperpod_job("t", after_okk="prep"), "document.after_okk", "unknown key"),
        (
            kueue_job("t", {"topoq.io/after-sucess": "prep"}),
            "document.metadata.annotations.topoq.io/after-sucess",
            "unknown dependency key",
        ),
    ],
)
def test_a_malformed_dependency_field_is_refused_with_the_readers_errors(
    api: Api, body: dict[str, Any], where: str, message: str
) -> None:
    submit(api, topoq_job("prep"))
    assert_refused(api, body, where, message)


def test_a_misspelt_key_gets_did_you_mean(api: Api) -> None:
    submit(api, topoq_job("prep"))
    detail = assert_refused(
        api, hyperpod_job("t", after_okk="prep"), "document.after_okk", "unknown"
    )
    assert "did you mean 'after_ok'?" in detail["hint"]


def test_a_dependency_annotation_on_a_pod_template_is_refused(api: Api) -> None:
    submit(api, topoq_job("prep"))
    body = kueue_job("t", {})
    template = body["document"]["spec"]["podSets"][0]["template"]
    template["metadata"]["annotations"]["topoq.io/after-ok"] = "prep"
    detail = assert_refused(
        api,
        body,
        "document.spec.podSets[0].template.metadata.annotations.topoq.io/after-ok",
        "on a pod template",
    )
    assert "metadata.annotations" in detail["hint"]


def test_explain_of_a_job_without_dependencies_lists_none(api: Api) -> None:
    submit(api, topoq_job("alone"))
    assert explain(api, "alone")["dependencies"] == []


def listed(api: Api, who: str) -> dict[str, dict[str, Any]]:
    response = api.client.get(f"{V1}/jobs", headers=api.headers(who))
    assert response.status_code == 200, response.text
    return {row["id"]: row for row in response.json()["items"]}


def test_the_job_list_says_why_each_pending_job_waits_and_on_what(api: Api) -> None:
    """What ``topoq list`` prints comes from the list alone, not an ``explain`` per row."""
    assert submit(api, topoq_job("prep")).status_code == 201
    assert submit(api, topoq_job("train", afterOk=["prep"])).status_code == 201
    assert listed(api, "viewer")["train"]["reason"] is None  # no cycle has seen it yet
    api.controller.step()
    rows = listed(api, "viewer")
    assert rows["train"]["reason"] == "WAITING_ON_DEPENDENCY"
    assert rows["train"]["waitingOn"] == [{"kind": "after-ok", "job": "prep"}]
    assert rows["train"]["reason"] == explain(api, "train")["reason"]
    assert rows["prep"]["reason"] is None and rows["prep"]["waitingOn"] is None  # admitted
    # a team that does not act for the job's team sees neither the reason nor the dependencies
    other = listed(api, "outsider")["train"]
    assert other["visible"] is False
    assert other["reason"] is None and other["waitingOn"] is None and other["etaAt"] is None
    # GET /jobs/{id} answers the same
    one = api.client.get(f"{V1}/jobs/train", headers=api.headers("viewer")).json()
    assert (
        one["reason"] == "WAITING_ON_DEPENDENCY" and one["waitingOn"] == rows["train"]["waitingOn"]
    )
    finish(api, "prep", exit_code=0)  # the cycle after prep succeeded admits train
    after = listed(api, "viewer")["train"]
    assert after["phase"] == "admitted" and after["reason"] is None and after["waitingOn"] is None
