"""GET /reports/usage in-process: the figures follow the jobs' history; who sees which team;
the window's bad inputs are 422s that name the parameter."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import Api, small_job
from topoq.engine.ports import ExecutorEventKind

V1 = "/api/v1"
USAGE = f"{V1}/reports/usage"
GPUS = 16
"""small_job: two pods of 8 GPUs."""


def run_job(api: Api, name: str, *, finish: bool = True) -> dict[str, float]:
    """Submit, admit, start (and finish) a job; the times of its phase changes."""
    response = api.client.post(f"{V1}/jobs", json=small_job(name), headers=api.headers("member"))
    assert response.status_code == 201, response.text
    api.controller.step()
    api.executor.report(ExecutorEventKind.STARTED, name, at=api.service.clock())
    api.controller.step()
    return finish_job(api, name) if finish else phase_times(api, name)


def finish_job(api: Api, name: str) -> dict[str, float]:
    api.executor.report(ExecutorEventKind.EXITED, name, exit_code=0, at=api.service.clock())
    api.controller.step()
    return phase_times(api, name)


def phase_times(api: Api, name: str) -> dict[str, float]:
    history = api.client.get(f"{V1}/jobs/{name}/history", headers=api.headers("admin")).json()
    return {change["phase"]: change["at"] for change in history["history"]}


def usage(api: Api, who: str = "admin", **params: Any) -> Any:
    response = api.client.get(USAGE, params=params, headers=api.headers(who))
    assert response.status_code == 200, response.text
    return response.json()


def test_a_finished_job_counts_its_gpu_hours_per_team_day_and_job(api: Api) -> None:
    times = run_job(api, "u")
    report = usage(api)
    expected = round(GPUS * (times["succeeded"] - times["admitted"]) / 3600, 6)
    assert report["teams"] is None
    [day] = report["days"]
    assert (day["team"], day["day"], day["jobs"], day["preemptions"]) == ("nlp", "1970-01-12", 1, 0)
    assert day["gpuHoursInGuarantee"] + day["gpuHoursBorrowed"] == pytest.approx(expected)
    [job] = report["jobs"]
    assert (job["job"], job["attempts"], job["gpuHours"]) == ("u", 1, expected)
    assert job["wallTimeS"] == pytest.approx(times["succeeded"] - times["admitted"])


def test_hourly_the_same_gpu_hours_come_an_hour_at_a_time(api: Api) -> None:
    times = run_job(api, "u")
    report = usage(api, hourly="true")
    expected = GPUS * (times["succeeded"] - times["admitted"]) / 3600
    hours = report["hours"]
    assert hours and all(hour["start"] % 3600 == 0 for hour in hours)
    assert hours[0]["start"] <= times["admitted"] < hours[-1]["start"] + 3600
    total = sum(hour["gpuHoursInGuarantee"] + hour["gpuHoursBorrowed"] for hour in hours)
    assert total == pytest.approx(expected, abs=1e-5)
    assert usage(api)["hours"] == []  # only when asked for


def test_a_job_admitted_before_the_window_counts_from_its_start(api: Api) -> None:
    run_job(api, "early", finish=False)
    run_job(api, "still", finish=False)
    start = api.service.clock() + 0.5
    finished = finish_job(api, "early")
    assert finished["running"] < start < finished["succeeded"]
    report = usage(api, **{"from": str(start)})
    jobs = {job["job"]: job for job in report["jobs"]}
    assert jobs["early"]["wallTimeS"] == pytest.approx(finished["succeeded"] - start)
    assert jobs["early"]["attempts"] == jobs["still"]["attempts"] == 1
    assert jobs["still"]["gpuHours"] == round(GPUS * jobs["still"]["wallTimeS"] / 3600, 6)


def test_a_job_that_held_gpus_through_a_past_window_without_an_event_in_it_counts(
    api: Api,
) -> None:
    run_job(api, "through", finish=False)
    start = api.service.clock() + 0.5
    end = api.service.clock() + 3.5  # no event of the job falls between start and end
    for _ in range(5):
        api.service.clock()
    finished = finish_job(api, "through")
    assert finished["running"] < start < end < finished["succeeded"]
    report = usage(api, **{"from": str(start), "to": str(end)})
    [job] = report["jobs"]
    assert (job["job"], job["attempts"]) == ("through", 1)
    assert job["wallTimeS"] == pytest.approx(end - start)
    assert job["gpuHours"] == round(GPUS * (end - start) / 3600, 6)
    [day] = report["days"]
    assert day["gpuHoursInGuarantee"] + day["gpuHoursBorrowed"] == pytest.approx(job["gpuHours"])


def test_members_see_their_teams_and_not_another_teams(api: Api) -> None:
    run_job(api, "mine")
    assert usage(api, "member")["teams"] == ["nlp"]
    assert usage(api, "viewer", team="nlp")["jobs"][0]["job"] == "mine"
    outsider = usage(api, "outsider")
    assert outsider["teams"] == ["vision"] and outsider["jobs"] == [] and outsider["days"] == []
    refused = api.client.get(USAGE, params={"team": "nlp"}, headers=api.headers("outsider"))
    assert refused.status_code == 403
    assert "may not see the usage of team nlp" in refused.json()["detail"]["message"]


def test_the_window_takes_dates_times_and_epoch_seconds(api: Api) -> None:
    dated = usage(api, **{"from": "2024-05-01", "to": "2024-05-02"})
    assert (dated["start"], dated["end"]) == (1_714_521_600.0, 1_714_608_000.0)
    timed = usage(api, **{"from": "2024-05-01T12:00:00+02:00", "to": "1714608000"})
    assert timed["start"] == 1_714_557_600.0


@pytest.mark.parametrize(
    ("params", "where", "says"),
    [
        ({"from": "yesterday"}, "query.from", "not a time"),
        ({"to": "nan"}, "query.to", "out of range"),
        ({"from": "-1", "to": "5"}, "query.from", "out of range"),
        ({"from": "2024-05-02", "to": "2024-05-01"}, "query.from", "ends before it starts"),
        ({"from": "2023-01-01", "to": "2024-05-01"}, "query.from", "spans 486 days"),
        ({"from": "2024-03-01", "to": "2024-05-01", "hourly": "true"}, "query.hourly", "61 days"),
        ({"hourly": "sometimes"}, "query.hourly", "bool"),
    ],
)
def test_a_bad_window_is_a_422_naming_the_parameter(
    api: Api, params: dict[str, str], where: str, says: str
) -> None:
    response = api.client.get(USAGE, params=params, headers=api.headers("admin"))
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail["where"] == where and says in detail["message"]
