"""The executors topoq knows, by name. A new executor (Slurm, Ray, Kubernetes) registers a
factory here and passes the contract suite in ``tests/executors/contract.py``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any

from topoq.domain.errors import InvalidInputError
from topoq.engine.ports import Executor, LogReader
from topoq.executors.local import LocalExecutor
from topoq.executors.local.logfiles import read_logs

EXECUTORS: Mapping[str, Callable[..., Executor]] = MappingProxyType({"local": LocalExecutor})
"""Executor factories by name; each takes its options as keyword arguments."""
LOG_READERS: Mapping[str, Callable[..., LogReader]] = MappingProxyType(
    {"local": lambda work_dir, **_: partial(read_logs, Path(work_dir))}
)
"""How a process that does not run the executor (the API's) reads the logs it captured, by
executor name; each takes the executor's options. An executor without one keeps no logs."""


def make_executor(name: str, **options: Any) -> Executor:
    """The executor called ``name``, built with ``options`` (e.g. ``work_dir`` for "local")."""
    factory = EXECUTORS.get(name)
    if factory is None:
        raise InvalidInputError(
            f"no executor is called {name!r}",
            where="executor",
            hint=f"known executors: {', '.join(sorted(EXECUTORS))}",
        )
    try:
        inspect.signature(factory).bind(**options)
    except TypeError as error:
        raise InvalidInputError(
            f"wrong options for executor {name!r}: {error}",
            where="executor",
            hint=_options_hint(factory),
        ) from error
    return factory(**options)


def log_reader(name: str, **options: Any) -> LogReader | None:
    """What reads the logs of executor ``name`` (built with ``options``), or None."""
    factory = LOG_READERS.get(name)
    return factory(**options) if factory is not None else None


def _options_hint(factory: Callable[..., Executor]) -> str:
    parameters = inspect.signature(factory).parameters.values()
    required = [p.name for p in parameters if p.default is inspect.Parameter.empty]
    optional = [p.name for p in parameters if p.default is not inspect.Parameter.empty]
    return f"required: {', '.join(required) or 'none'}; optional: {', '.join(optional) or 'none'}"
