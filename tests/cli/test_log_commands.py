"""The pure parts of ``topoq logs``: whole lines out of pieces, and the options it refuses."""

from __future__ import annotations

import pytest

from topoq.cli.log_commands import LogOptions, PodLines
from topoq.domain.errors import InvalidInputError


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
