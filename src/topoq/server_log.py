"""The server's log, the same in every process of ``topoq server`` (the controller process and
each API process, which get the settings on their command line): one record per line on
stderr, readable text (default) or JSON objects, at ``--log-level``; with ``--access-log``,
one line per HTTP request as well.

- text: ``2026-12-03T10:00:00.123Z INFO admitted job=j1 team=nlp gpus=16 span=...`` for an
  event (``topoq.engine.event_log``), ``... WARNING topoq.server: message`` for any other
  record. A value with a space, a quote, an ``=`` or a control character is quoted as a JSON
  string, so that a line always splits back into its fields.
- json: ``{"time", "level", "logger", "event", "message", ...the event's fields}``, one
  object per line (``event`` is null for a record that is not an event; ``traceback`` is
  there when the record carries one).

Libraries are quieter than the server: alembic's migration lines, httpx's requests and
uvicorn's own messages show at ``--log-level debug`` only (their warnings always)."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

from topoq.api.access_log import ACCESS_LOGGER
from topoq.domain.errors import InvalidInputError
from topoq.engine.event_log import EVENT_ATTRIBUTE, FIELDS_ATTRIBUTE, RESERVED_KEYS
from topoq.server.settings import LOG_FORMATS, LOG_LEVELS

DEFAULT_LOG_FORMAT = "text"
DEFAULT_LOG_LEVEL = "info"
QUIET_LIBRARIES = ("alembic", "httpx", "httpcore", "uvicorn", "uvicorn.error", "uvicorn.asgi")
"""Loggers kept at WARNING unless ``--log-level debug``."""
_BARE = re.compile(r"[^\s\"'=\\]+")


@dataclass(frozen=True)
class LogSettings:
    """``--log-format``, ``--log-level`` and ``--access-log``: checked when made."""

    format: str = DEFAULT_LOG_FORMAT
    level: str = DEFAULT_LOG_LEVEL
    access_log: bool = False

    def __post_init__(self) -> None:
        for option, value, allowed in (
            ("--log-format", self.format, LOG_FORMATS),
            ("--log-level", self.level, LOG_LEVELS),
        ):
            if value not in allowed:
                raise InvalidInputError(
                    f"{option} {value!r} is not one of {', '.join(allowed)}",
                    where=option,
                    hint=f"give one of: {', '.join(allowed)}",
                )

    @property
    def level_number(self) -> int:
        return int(logging.getLevelName(self.level.upper()))

    def arguments(self) -> list[str]:
        """The options that say this on a command line (for the API processes)."""
        found = ["--log-format", self.format, "--log-level", self.level]
        return [*found, "--access-log"] if self.access_log else found


def configure_logging(settings: LogSettings, stream: IO[str] | None = None) -> None:
    """This process's log: one handler on the root logger, in the settings' format."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if settings.format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.level_number)
    libraries = max(settings.level_number, logging.WARNING)
    if settings.level == "debug":
        libraries = logging.DEBUG
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(libraries)
    uvicorn_errors = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, TracebackLoggedOnce) for f in uvicorn_errors.filters):
        uvicorn_errors.addFilter(TracebackLoggedOnce())
    access = logging.getLogger(ACCESS_LOGGER)
    access.setLevel(logging.INFO)  # its own switch: --access-log, whatever --log-level says
    access.disabled = not settings.access_log


UVICORN_APPLICATION_ERROR = "Exception in ASGI application"


class TracebackLoggedOnce(logging.Filter):
    """Drops uvicorn's own record of an error the application answered with a 500: the
    ``api_error`` event (``topoq.api.errors``) already carries its traceback, and Starlette
    raises it on to the server after answering."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(UVICORN_APPLICATION_ERROR)


@contextlib.contextmanager
def muted(*names: str) -> Iterator[None]:
    """Nothing is logged by these loggers meanwhile (the API processes' warm-up requests)."""
    loggers = [logging.getLogger(name) for name in names]
    before = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, was in zip(loggers, before, strict=True):
            logger.disabled = was


def record_time(record: logging.LogRecord) -> str:
    """``2026-12-03T10:00:00.123Z``: UTC, to the millisecond."""
    moment = datetime.fromtimestamp(record.created, UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{int(record.msecs):03d}Z"


def event_of(record: logging.LogRecord) -> tuple[str | None, Mapping[str, Any]]:
    """The record's event name and fields (None and nothing for a plain record)."""
    name = getattr(record, EVENT_ATTRIBUTE, None)
    fields = getattr(record, FIELDS_ATTRIBUTE, None)
    return (
        name if isinstance(name, str) else None,
        fields if isinstance(fields, Mapping) else {},
    )


class TextFormatter(logging.Formatter):
    """``TIME LEVEL event key=value ...``, or ``TIME LEVEL logger: message``."""

    def format(self, record: logging.LogRecord) -> str:
        name, fields = event_of(record)
        head = f"{record_time(record)} {record.levelname}"
        if name is None:
            line = f"{head} {record.name}: {escaped(record.getMessage())}"
        else:
            pairs = (
                f"{key}={text_value(value)}" for key, value in fields.items() if value is not None
            )
            line = " ".join((head, name, *pairs))
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        name, fields = event_of(record)
        document: dict[str, Any] = {
            "time": record_time(record),
            "level": record.levelname,
            "logger": record.name,
            "event": name,
            "message": record.getMessage(),
        }
        for key, value in fields.items():
            document[f"field_{key}" if key in RESERVED_KEYS else key] = json_value(value)
        if record.exc_info:
            document["traceback"] = self.formatException(record.exc_info)
        return json.dumps(document, default=str)  # ASCII: no line separator inside a line


def text_value(value: object) -> str:
    """A field's value in a text line: bare when it has no space, quote, ``=`` or control
    character, else a JSON string; lists joined by commas, mappings as ``key:value,…``."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, Mapping):
        text = ",".join(f"{key}:{item}" for key, item in value.items())
    elif isinstance(value, Sequence) and not isinstance(value, str):
        text = ",".join(str(item) for item in value)
    else:
        text = str(value)
    if _BARE.fullmatch(text) and text.isprintable():
        return text
    return '"' + escaped(text, quotes=True) + '"'


def escaped(text: str, *, quotes: bool = False) -> str:
    """``text`` on one line: control characters and line separators as JSON escapes
    (``\\n``, ``\\u2028``), and with ``quotes`` double quotes and backslashes too."""
    special = '"\\' if quotes else ""
    return "".join(
        char if char.isprintable() and char not in special else json.dumps(char)[1:-1]
        for char in text
    )


def json_value(value: object) -> object:
    if isinstance(value, Mapping):
        return {str(key): item for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return value
