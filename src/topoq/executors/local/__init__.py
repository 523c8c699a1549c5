"""The local executor: each pod of a placed gang is a real process on this machine, on a
virtual node of the configured cluster (docs/executors.md)."""

from topoq.executors.local.executor import LOCAL_CAPABILITIES, LocalExecutor, checked_log_limit

__all__ = ["LOCAL_CAPABILITIES", "LocalExecutor", "checked_log_limit"]
