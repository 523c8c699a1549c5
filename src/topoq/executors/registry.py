"""The executors topoq knows, by name. A new executor (Slurm, Ray, Kubernetes) registers a
factory here and passes the contract suite in ``tests/executors/contract.py``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from topoq.domain.errors import InvalidInputError
from topoq.engine.ports import Executor
from topoq.executors.local import LocalExecutor

EXECUTORS: Mapping[str, Callable[..., Executor]] = MappingProxyType({"local": LocalExecutor})
"""Executor factories by name; each takes its options as keyword arguments."""


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


def _options_hint(factory: Callable[..., Executor]) -> str:
    parameters = inspect.signature(factory).parameters.values()
    required = [p.name for p in parameters if p.default is inspect.Parameter.empty]
    optional = [p.name for p in parameters if p.default is not inspect.Parameter.empty]
    return f"required: {', '.join(required) or 'none'}; optional: {', '.join(optional) or 'none'}"
