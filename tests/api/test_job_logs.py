"""``GET /jobs/{id}/logs`` over real log files (issue 11): any attempt, the last lines, what
was written since a time, and a 422 that names the parameter for what cannot be read."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import TEAM, Api, small_job
from topoq.executors.environment import PodPlan
from topoq.executors.local.layout import attempt_dir, make_private_directories, pod_log
from topoq.executors.local.log_marks import MarkBook
from topoq.executors.local.logfiles import read_logs, write_manifest

V1 = "/api/v1"
NOW_S = 1_000_000.0


@pytest.fixture
def logs_api(api: Api, tmp_path: Path) -> Api:
    """``api`` with job ``r`` (two pods) and two attempts of logs written as the local
    executor writes them, read as the server reads them."""
    work_dir = tmp_path / "work"
    api.service.logs = partial(read_logs, work_dir)
    api.service.clock = lambda: NOW_S
    assert api.client.post(f"{V1}/jobs", json=small_job("r"), headers=api.headers("member"))
    for attempt in (1, 2):
        directory = attempt_dir(work_dir, TEAM, "r", attempt)
        make_private_directories(directory, work_dir)
        write_manifest(
            directory, [PodPlan(rank, "workers", "n0", rank, 2, 0, 0) for rank in (0, 1)]
        )
        for rank in (0, 1):
            book = MarkBook(directory, rank)
            with pod_log(directory, rank).open("ab") as log:
                for minute in range(10):  # a line a minute, the last one a minute ago
                    log.write(f"attempt {attempt} pod {rank} minute {minute}\n".encode())
                    log.flush()
                    book.note(NOW_S - 600 + 60 * minute, log.tell())
    return api


def _get(api: Api, **params: Any) -> Any:
    return api.client.get(f"{V1}/jobs/r/logs", params=params, headers=api.headers("member"))


def test_the_answer_names_the_attempt_read_and_the_newest(logs_api: Api) -> None:
    newest = _get(logs_api, pod=0).json()
    assert (newest["attempt"], newest["latestAttempt"]) == (2, 2)
    assert newest["text"].startswith("attempt 2 pod 0 minute 0\n")
    older = _get(logs_api, pod=1, attempt=1).json()
    assert (older["attempt"], older["latestAttempt"]) == (1, 2)
    assert older["text"].endswith("attempt 1 pod 1 minute 9\n")
    missing = _get(logs_api, attempt=3)
    assert missing.status_code == 422, missing.text
    detail = missing.json()["detail"]
    assert "no attempt 3" in detail["message"] and "1, 2" in detail["hint"]


def test_tail_lines_returns_the_last_lines_of_each_pod(logs_api: Api) -> None:
    answer = _get(logs_api, tail_lines=2).json()
    assert answer["text"].count("minute 8\n") == 2 and "minute 7" not in answer["text"]
    one = _get(logs_api, pod=0, tail_lines=1).json()
    assert one["text"] == "attempt 2 pod 0 minute 9\n"


@pytest.mark.parametrize(
    "since",
    ["150s", "2m30s", "999850", "1970-01-12T13:44:10Z", "1970-01-12T13:44:10"],
)
def test_since_takes_a_duration_or_a_time(logs_api: Api, since: str) -> None:
    answer = _get(logs_api, pod=0, since=since).json()  # 150 s before NOW_S, 999,850 s
    assert answer["text"] == "".join(f"attempt 2 pod 0 minute {m}\n" for m in (8, 9))
    (pod,) = answer["pods"]
    assert pod["nextOffset"] == pod["sizeBytes"] and not answer["truncated"]


def test_since_with_tail_lines_and_a_forward_limit(logs_api: Api) -> None:
    assert _get(logs_api, pod=1, since="10m", tail_lines=1).json()["text"].endswith("minute 9\n")
    piece = _get(logs_api, pod=1, since="3m", limit_bytes=10).json()
    assert piece["text"] == "attempt 2 " and piece["truncated"]


@pytest.mark.parametrize(
    ("params", "where"),
    [
        ({"since": "yesterday"}, "query.since"),
        ({"since": "-5m"}, "query.since"),
        ({"tail_lines": 0}, "tail_lines"),
        ({"attempt": 0}, "attempt"),
        ({"pod": 0, "offset": 0, "since": "1m"}, "offset"),
        ({"pod": 0, "offset": 0, "tail_lines": 3}, "offset"),
        ({"pod": 0, "since": "1m", "tail_bytes": 10}, "tail_bytes"),
        ({"pod": 0, "tail_lines": 2, "limit_bytes": 10}, "limit_bytes"),
    ],
)
def test_a_read_that_cannot_be_done_is_a_422_naming_the_parameter(
    logs_api: Api, params: dict[str, Any], where: str
) -> None:
    answer = _get(logs_api, **params)
    assert answer.status_code == 422, answer.text
    assert where in answer.text and "Traceback" not in answer.text
