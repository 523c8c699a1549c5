"""The server log's formats (``topoq.server_log``): a text line per record that splits back
into its fields, a JSON object per line with the stable keys, the same settings in every
process."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest

from topoq.api.access_log import ACCESS_LOGGER
from topoq.domain.errors import InvalidInputError
from topoq.engine.event_log import ServerEvent, write_event
from topoq.server_log import (
    LogSettings,
    configure_logging,
    muted,
    text_value,
)

FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
"""A text line's ``key=value`` pairs, a quoted value as one."""
AWKWARD = 'a "quoted" value\nwith a newline, a tab\t and a = sign \u2028'


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    access = logging.getLogger(ACCESS_LOGGER)
    access_state = (access.level, access.disabled)
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    access.setLevel(access_state[0])
    access.disabled = access_state[1]


def logged(settings: LogSettings, emit: object) -> list[str]:
    stream = io.StringIO()
    configure_logging(settings, stream)
    assert callable(emit)
    emit()
    return stream.getvalue().splitlines()


def admitted_event() -> ServerEvent:
    return ServerEvent(
        "admitted",
        "admitted j1 of team nlp on 2 nodes",
        {
            "job": "j1",
            "team": "nlp",
            "gpus": 16,
            "span": {"network-node-layer-3": 1, "hostname": 2},
            "borrowed": False,
            "priority_class": None,
            "cause": AWKWARD,
            "names": ["p5-1", "p5-2"],
        },
    )


def test_a_text_line_is_time_level_event_and_fields(restore_logging: None) -> None:
    test_log = logging.getLogger("topoq.test")
    [line] = logged(LogSettings(), lambda: write_event(test_log, admitted_event()))
    time, level, event, *_ = line.split(" ", 3)
    assert time.endswith("Z") and time[10] == "T" and len(time) == len("2026-12-03T10:00:00.000Z")
    assert (level, event) == ("INFO", "admitted")
    assert "job=j1 team=nlp gpus=16 span=network-node-layer-3:1,hostname:2 borrowed=false" in line
    assert "priority_class" not in line  # a field without a value is left out
    assert "names=p5-1,p5-2" in line


def test_a_text_value_with_spaces_quotes_or_newlines_is_quoted_and_splits_back(
    restore_logging: None,
) -> None:
    test_log = logging.getLogger("topoq.test")
    [line] = logged(LogSettings(), lambda: write_event(test_log, admitted_event()))
    assert "\n" not in line and "\u2028" not in line
    fields = dict(FIELD.findall(line))
    assert fields["job"] == "j1" and fields["names"] == "p5-1,p5-2"
    assert json.loads(fields["cause"]) == AWKWARD  # a JSON string: every escape reads back


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", "plain"),
        ("", '""'),
        ("two words", '"two words"'),
        ("k=v", '"k=v"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("line\nbreak", '"line\\nbreak"'),
        (True, "true"),
        (3, "3"),
        (["a", "b"], "a,b"),
        ({"rack": 2}, "rack:2"),
    ],
)
def test_text_values(value: object, text: str) -> None:
    assert text_value(value) == text


def test_a_plain_record_in_text_names_its_logger_on_one_line(restore_logging: None) -> None:
    server_log = logging.getLogger("topoq.server")
    [line] = logged(LogSettings(), lambda: server_log.warning("two\nlines"))
    assert line.endswith(" WARNING topoq.server: two\\nlines")


def test_a_json_line_has_the_stable_keys_and_the_fields_at_the_top(restore_logging: None) -> None:
    test_log = logging.getLogger("topoq.test")
    [line] = logged(LogSettings("json"), lambda: write_event(test_log, admitted_event()))
    record = json.loads(line)
    assert list(record)[:5] == ["time", "level", "logger", "event", "message"]
    assert record["level"] == "INFO" and record["logger"] == "topoq.test"
    assert record["event"] == "admitted"
    assert record["message"] == "admitted j1 of team nlp on 2 nodes"
    assert record["span"] == {"network-node-layer-3": 1, "hostname": 2}
    assert record["gpus"] == 16 and record["borrowed"] is False
    assert record["priority_class"] is None and record["cause"] == AWKWARD
    assert "\u2028" not in line  # ASCII only: no character splits the line


def test_a_json_record_with_an_error_carries_its_traceback_in_one_line(
    restore_logging: None,
) -> None:
    server_log = logging.getLogger("topoq.server")

    def fail() -> None:
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            server_log.exception("a step failed")

    [line] = logged(LogSettings("json"), fail)
    record = json.loads(line)
    assert record["event"] is None and record["message"] == "a step failed"
    assert record["level"] == "ERROR" and "RuntimeError: boom" in record["traceback"]


def test_a_field_named_like_a_stable_key_does_not_replace_it(restore_logging: None) -> None:
    test_log = logging.getLogger("topoq.test")
    event = ServerEvent("x", "the message", {"message": "a field", "level": 3})
    [line] = logged(LogSettings("json"), lambda: write_event(test_log, event))
    record = json.loads(line)
    assert record["message"] == "the message" and record["field_message"] == "a field"
    assert record["level"] == "INFO" and record["field_level"] == 3


def test_the_level_filters_records_and_libraries_stay_quieter(restore_logging: None) -> None:
    def emit() -> None:
        logging.getLogger("topoq.test").info("kept out")
        logging.getLogger("topoq.test").warning("kept")
        logging.getLogger("alembic.runtime.migration").info("Running upgrade")

    assert [line.rsplit(": ", 1)[1] for line in logged(LogSettings(level="warning"), emit)] == [
        "kept"
    ]
    assert all("Running upgrade" not in line for line in logged(LogSettings(), emit))
    assert any("Running upgrade" in line for line in logged(LogSettings(level="debug"), emit))


def test_the_access_log_has_its_own_switch(restore_logging: None) -> None:
    access = logging.getLogger(ACCESS_LOGGER)
    request = ServerEvent("request", "GET / 200", {"status": 200})
    assert logged(LogSettings(), lambda: write_event(access, request)) == []
    lines = logged(
        LogSettings(level="error", access_log=True), lambda: write_event(access, request)
    )
    assert len(lines) == 1 and " request status=200" in lines[0]


def test_muted_loggers_log_nothing_meanwhile_and_again_after(restore_logging: None) -> None:
    def emit() -> None:
        with muted("topoq.api"):
            logging.getLogger("topoq.api").warning("during the warm-up")
        logging.getLogger("topoq.api").warning("after it")

    assert [line.rsplit(": ", 1)[1] for line in logged(LogSettings(), emit)] == ["after it"]


def test_the_settings_travel_to_the_api_processes_as_options() -> None:
    settings = LogSettings("json", "debug", access_log=True)
    assert settings.arguments() == [
        "--log-format", "json", "--log-level", "debug", "--access-log",
    ]  # fmt: skip
    assert "--access-log" not in LogSettings().arguments()


def test_a_bad_format_or_level_is_refused_naming_the_option() -> None:
    with pytest.raises(InvalidInputError) as refused:
        LogSettings("xml")
    assert refused.value.where == "--log-format"
    with pytest.raises(InvalidInputError) as refused:
        LogSettings(level="loud")
    assert refused.value.where == "--log-level"


def test_uvicorn_does_not_log_a_second_traceback_of_an_answered_500(
    restore_logging: None,
) -> None:
    def emit() -> None:
        uvicorn = logging.getLogger("uvicorn.error")
        uvicorn.error("Exception in ASGI application\n", exc_info=RuntimeError("boom"))
        uvicorn.error("something else went wrong")

    lines = logged(LogSettings(), emit)
    assert len(lines) == 1 and lines[0].endswith("uvicorn.error: something else went wrong")
