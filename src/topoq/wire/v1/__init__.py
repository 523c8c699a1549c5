"""Version 1 of topoq's wire models: what ``/api/v1`` accepts and returns.

A name is imported from its module when it is first used (``__getattr__``, PEP 562): a CLI
verb that reads one answer loads that answer's models, not the API's hundred (docs/adr/
0010-cli-start-up.md). Type checkers read the imports below; ``tests/wire`` checks that they
and ``_HOME`` name the same models."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from topoq.wire.v1.access import Role, TokenCreated, TokenModel, TokenRequest, WhoAmI
    from topoq.wire.v1.base import ResourceAmounts, WireModel
    from topoq.wire.v1.cluster import (
        AuditEntryModel,
        EventModel,
        Health,
        LintFindingModel,
        NodeAction,
        NodeHolderModel,
        NodeModel,
        PolicyLintModel,
        PolicyModel,
        TeamFlavorModel,
        TeamModel,
        TopologyDomainModel,
        TopologyModel,
        UnplacedNodeModel,
    )
    from topoq.wire.v1.errors import ErrorBody, ErrorDetail
    from topoq.wire.v1.inventory import (
        AddedNodeModel,
        ChangedNodeModel,
        ClusterApplyRequest,
        ClusterApplyResult,
        RemovedNodeModel,
    )
    from topoq.wire.v1.jobs import (
        AllocationModel,
        ChangesModel,
        DependencyModel,
        DependencyStatusModel,
        Explanation,
        FairShareStandingModel,
        JobDetail,
        JobFormat,
        JobHistory,
        JobList,
        JobLogs,
        JobSummary,
        PhaseChangeModel,
        PodLogModel,
        QueueEntry,
        QueueList,
        SubmitJobRequest,
        WorkloadModel,
    )
    from topoq.wire.v1.reports import (
        HourUsageModel,
        JobUsageModel,
        RecordedWindowModel,
        TeamDayUsageModel,
        UsageReportModel,
    )

_HOME: dict[str, str] = {
    "Role": "access",
    "TokenCreated": "access",
    "TokenModel": "access",
    "TokenRequest": "access",
    "WhoAmI": "access",
    "ResourceAmounts": "base",
    "WireModel": "base",
    "AuditEntryModel": "cluster",
    "EventModel": "cluster",
    "Health": "cluster",
    "LintFindingModel": "cluster",
    "NodeAction": "cluster",
    "NodeHolderModel": "cluster",
    "NodeModel": "cluster",
    "PolicyLintModel": "cluster",
    "PolicyModel": "cluster",
    "TeamFlavorModel": "cluster",
    "TeamModel": "cluster",
    "TopologyDomainModel": "cluster",
    "TopologyModel": "cluster",
    "UnplacedNodeModel": "cluster",
    "ErrorBody": "errors",
    "ErrorDetail": "errors",
    "AddedNodeModel": "inventory",
    "ChangedNodeModel": "inventory",
    "ClusterApplyRequest": "inventory",
    "ClusterApplyResult": "inventory",
    "RemovedNodeModel": "inventory",
    "AllocationModel": "jobs",
    "ChangesModel": "jobs",
    "DependencyModel": "jobs",
    "DependencyStatusModel": "jobs",
    "Explanation": "jobs",
    "FairShareStandingModel": "jobs",
    "JobDetail": "jobs",
    "JobFormat": "jobs",
    "JobHistory": "jobs",
    "JobList": "jobs",
    "JobLogs": "jobs",
    "JobSummary": "jobs",
    "PhaseChangeModel": "jobs",
    "PodLogModel": "jobs",
    "QueueEntry": "jobs",
    "QueueList": "jobs",
    "SubmitJobRequest": "jobs",
    "WorkloadModel": "jobs",
    "HourUsageModel": "reports",
    "JobUsageModel": "reports",
    "RecordedWindowModel": "reports",
    "TeamDayUsageModel": "reports",
    "UsageReportModel": "reports",
}
"""Each model's module (under ``topoq.wire.v1``)."""

__all__ = [
    "AddedNodeModel",
    "AllocationModel",
    "AuditEntryModel",
    "ChangedNodeModel",
    "ChangesModel",
    "ClusterApplyRequest",
    "ClusterApplyResult",
    "DependencyModel",
    "DependencyStatusModel",
    "ErrorBody",
    "ErrorDetail",
    "EventModel",
    "Explanation",
    "FairShareStandingModel",
    "Health",
    "HourUsageModel",
    "JobDetail",
    "JobFormat",
    "JobHistory",
    "JobList",
    "JobLogs",
    "JobSummary",
    "JobUsageModel",
    "LintFindingModel",
    "NodeAction",
    "NodeHolderModel",
    "NodeModel",
    "PhaseChangeModel",
    "PodLogModel",
    "PolicyLintModel",
    "PolicyModel",
    "QueueEntry",
    "QueueList",
    "RecordedWindowModel",
    "RemovedNodeModel",
    "ResourceAmounts",
    "Role",
    "SubmitJobRequest",
    "TeamDayUsageModel",
    "TeamFlavorModel",
    "TeamModel",
    "TokenCreated",
    "TokenModel",
    "TokenRequest",
    "TopologyDomainModel",
    "TopologyModel",
    "UnplacedNodeModel",
    "UsageReportModel",
    "WhoAmI",
    "WireModel",
    "WorkloadModel",
]


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # the next lookup finds it without this function
    return value
