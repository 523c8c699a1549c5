"""``topoq logs``: whole lines out of pieces, the options it refuses, and following an
in-process API's logs across a rotation and into the next attempt."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import TEAM, Api, make_api, small_job
from topoq.cli.log_commands import LogOptions, PodLines, follow_logs
from topoq.client import TopoqClient
from topoq.client.http import Answer
from topoq.domain.errors import InvalidInputError
from topoq.engine.ports import ExecutorEventKind
from topoq.executors.environment import PodPlan
from topoq.executors.local.layout import attempt_dir, make_private_directories, pod_log
from topoq.executors.local.log_rotation import rotate_if_over
from topoq.executors.local.logfiles import read_logs, write_manifest


def test_a_line_written_in_pieces_comes_out_whole_once_its_newline_arrives() -> None:
    lines = PodLines()
    assert lines.whole_lines("one\ntw") == ["one\n"]
    assert lines.whole_lines("o and a ha") == []
    assert lines.whole_lines("lf\nthree\n") == ["two and a half\n", "three\n"]
    assert lines.whole_lines("") == []
    assert lines.unfinished() == []


def test_only_a_newline_ends_a_line() -> None:
    assert PodLines().whole_lines("10%\r50%\r100%\n\x0cpage\n") == [
        "10%\r50%\r100%\n",
        "\x0cpage\n",
    ]


def test_an_unfinished_line_is_ended_when_its_attempt_ends() -> None:
    lines = PodLines()
    assert lines.whole_lines("done\nno newline") == ["done\n"]
    assert lines.unfinished() == ["no newline\n"]
    assert lines.unfinished() == []


@pytest.mark.parametrize(
    ("options", "follow", "where"),
    [
        (LogOptions(tail_lines=0), False, "--tail"),
        (LogOptions(attempt=0), True, "--attempt"),
        (LogOptions(pod=0, offset=5), True, "--offset"),
    ],
)
def test_options_that_cannot_be_used_are_refused_naming_the_option(
    options: LogOptions, follow: bool, where: str
) -> None:
    with pytest.raises(InvalidInputError) as raised:
        options.checked(follow=follow)
    assert raised.value.where == where


def test_a_bare_number_since_is_seconds_ago() -> None:
    assert LogOptions(since="90").checked(follow=True).since == "90s"
    assert LogOptions(since="10m").checked(follow=False).since == "10m"


def _lines(rank: int, start: int, end: int) -> list[str]:
    return [f"pod {rank} line {n:05d} {'.' * 40}\n" for n in range(start, end)]


def _write(directory: Path, rank: int, lines: list[str]) -> None:
    with pod_log(directory, rank).open("a", encoding="utf-8") as log:
        log.write("".join(lines))


@pytest.fixture
def running_job(tmp_path: Path) -> Iterator[tuple[Api, TopoqClient, Path]]:
    """An in-process API whose job ``r`` (two pods) runs its second attempt, a client of it,
    and the work directory the two attempts' logs are in."""
    for api in make_api(tmp_path):
        work_dir = tmp_path / "work"
        api.service.logs = partial(read_logs, work_dir)
        assert api.client.post("/api/v1/jobs", json=small_job("r"), headers=api.headers("member"))
        api.controller.step()
        api.executor.report(ExecutorEventKind.STARTED, "r")
        for attempt in (1, 2):
            directory = attempt_dir(work_dir, TEAM, "r", attempt)
            make_private_directories(directory, work_dir)
            write_manifest(directory, [PodPlan(r, "workers", "n0", r, 2, 0, 0) for r in (0, 1)])
        transport = _ThroughTestClient(api.client)
        yield (
            api,
            TopoqClient("http://testserver", api.tokens["member"], transport=transport),
            work_dir,
        )


class _ThroughTestClient:
    """Sends the SDK's requests to the app in this process (a ``client.http.Transport``)."""

    def __init__(self, client: TestClient) -> None:
        self.client = client

    def __call__(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes | None
    ) -> Answer:
        answer = self.client.request(method, target, headers=dict(headers), content=body)
        kind = answer.headers.get("content-type", "")
        return Answer(answer.status_code, answer.reason_phrase, kind, answer.content)


def test_following_reads_on_across_a_rotation_and_into_the_next_attempt(
    running_job: tuple[Api, TopoqClient, Path],
) -> None:
    api, client, work_dir = running_job
    first, second = (attempt_dir(work_dir, TEAM, "r", n) for n in (1, 2))
    for rank in (0, 1):
        _write(first, rank, _lines(rank, 0, 1000))  # about 60 KB each
        _write(second, rank, _lines(rank, 5000, 5010))
    printed: list[str] = []

    def write(text: str) -> None:
        if not printed:  # after the first read: pod 0 writes on, its log rotates, it writes on
            _write(first, 0, _lines(0, 1000, 1100))
            assert rotate_if_over(first, 0, 64 << 10) is not None
            _write(first, 0, _lines(0, 1100, 1200))
            _write(second, 1, _lines(1, 5010, 5020))
            api.executor.report(ExecutorEventKind.EXITED, "r", exit_code=0)
            api.controller.step()  # the job ends
        printed.append(text)

    options = LogOptions(attempt=1).checked(follow=True)
    follow_logs(client, "r", options, write=write, interval_s=0.01)
    out = "".join(printed).splitlines(keepends=True)
    marker = out.index("--- attempt 2 started (the job was requeued) ---\n")
    for rank, (before, after) in enumerate([(1200, 5010), (1000, 5020)]):
        mine = [
            line.removeprefix(f"[pod {rank}] ") for line in out if line.startswith(f"[pod {rank}]")
        ]
        assert mine == _lines(rank, 0, before) + _lines(rank, 5000, after)
    assert all(line.startswith("[pod ") for line in out if line != out[marker])
    assert out[marker + 1 :] == [
        f"[pod {rank}] {line}"
        for rank, end in ((0, 5010), (1, 5020))
        for line in _lines(rank, 5000, end)
    ]
