"""Executors that run placed gangs: local processes (default), later Slurm, Ray, Kubernetes.

Each implements ``topoq.engine.ports.Executor`` and is found by name in ``EXECUTORS``."""

from topoq.executors.local import LOCAL_CAPABILITIES, LocalExecutor
from topoq.executors.registry import EXECUTORS, make_executor

__all__ = ["EXECUTORS", "LOCAL_CAPABILITIES", "LocalExecutor", "make_executor"]
