"""The executors topoq knows, by name: one plugin record each (``ExecutorPlugin``: its name,
its capabilities as data, its factory and how another process reads its logs). A new
executor (Slurm, Ray) adds its record to ``PLUGINS`` and passes the contract suite in
``tests/executors/contract.py``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any

from topoq.domain.errors import InvalidInputError
from topoq.engine.ports import Executor, ExecutorCapabilities, LogReader
from topoq.executors.kubernetes.plugin import KUBERNETES_CAPABILITIES, kubernetes_executor
from topoq.executors.local import LOCAL_CAPABILITIES, LocalExecutor
from topoq.executors.local.logfiles import read_logs
from topoq.executors.slurm.plugin import SLURM_CAPABILITIES, slurm_executor


@dataclass(frozen=True)
class ExecutorPlugin:
    name: str
    capabilities: ExecutorCapabilities
    factory: Callable[..., Executor]
    """Takes the executor's options as keyword arguments."""
    log_reader: Callable[..., LogReader] | None = None
    """How a process that does not run the executor (the API's) reads the logs it captured,
    from the executor's options; None: it keeps no logs."""
    summary: str = ""
    keeps_files: bool = False
    """It takes a ``work_dir`` (the server's: under its data directory) for its scripts and
    logs."""


PLUGINS: Mapping[str, ExecutorPlugin] = MappingProxyType(
    {
        plugin.name: plugin
        for plugin in (
            ExecutorPlugin(
                "local",
                LOCAL_CAPABILITIES,
                LocalExecutor,
                lambda work_dir, **_: partial(read_logs, Path(work_dir)),
                "each pod a process on this machine, on a virtual node",
                keeps_files=True,
            ),
            ExecutorPlugin(
                "kubernetes",
                KUBERNETES_CAPABILITIES,
                kubernetes_executor,
                None,
                "each pod a Pod bound to its node on a Kubernetes cluster",
            ),
            ExecutorPlugin(
                "slurm",
                SLURM_CAPABILITIES,
                slurm_executor,
                lambda work_dir, **_: partial(read_logs, Path(work_dir)),
                "each gang a Slurm job pinned to its placed nodes",
                keeps_files=True,
            ),
        )
    }
)
EXECUTORS: Mapping[str, Callable[..., Executor]] = MappingProxyType(
    {name: plugin.factory for name, plugin in PLUGINS.items()}
)
"""Executor factories by name."""
LOG_READERS: Mapping[str, Callable[..., LogReader]] = MappingProxyType(
    {name: plugin.log_reader for name, plugin in PLUGINS.items() if plugin.log_reader}
)


def plugin(name: str, *, where: str = "executor") -> ExecutorPlugin:
    """The plugin record of executor ``name``; an unknown name lists the known ones."""
    found = PLUGINS.get(name)
    if found is None:
        raise InvalidInputError(
            f"no executor is called {name!r}",
            where=where,
            hint=f"known executors: {', '.join(sorted(PLUGINS))}",
        )
    return found


def make_executor(name: str, **options: Any) -> Executor:
    """The executor called ``name``, built with ``options`` (e.g. ``work_dir`` for "local")."""
    factory = plugin(name).factory
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
