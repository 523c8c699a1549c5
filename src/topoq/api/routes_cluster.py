"""Cluster routes: teams and their quota, the policy and its versions, nodes, the topology,
and applying a cluster file as the inventory."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Body

from topoq.api.auth import Admin, Anyone, Principal, ServiceDep
from topoq.api.errors import ApiError, conflict
from topoq.api.occupancy import (
    holding,
    node_model,
    node_models,
    team_models,
    topology_model,
)
from topoq.api.request_body import StrictJsonRoute
from topoq.api.service import Service, apply_inventory, policy_finding
from topoq.core.inventory_diff import InventoryDiff
from topoq.core.policy_gate import policy_warnings
from topoq.core.policy_lint import lint_policy
from topoq.discovery.clusterfile import cluster_from_document
from topoq.discovery.policy import policy_document, policy_from_document
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy
from topoq.domain.job import JobId
from topoq.domain.lint import LintFinding
from topoq.domain.node import NodeSpec
from topoq.engine.event_log import write_event
from topoq.engine.ports import AuditEntry
from topoq.wire.v1 import (
    AddedNodeModel,
    ChangedNodeModel,
    ClusterApplyRequest,
    ClusterApplyResult,
    LintFindingModel,
    NodeAction,
    NodeModel,
    PolicyLintModel,
    PolicyModel,
    RemovedNodeModel,
    TeamModel,
    TopologyModel,
)
from topoq.wire.v1.cluster import PolicyVersionModel
from topoq.wire.v1.convert import amounts

router = APIRouter(tags=["cluster"], route_class=StrictJsonRoute)
log = logging.getLogger("topoq.api")

POLICY_BODY = "body"
CLUSTER_DOCUMENT = "body.document"
DRAIN_HINT = (
    "apply it with drain to requeue them (`topoq cluster apply FILE --drain`), or apply it once "
    "they ended"
)
MAX_POLICY_VERSION = 2**31 - 1
"""No store keeps more versions; a larger number (one the database cannot hold) is none."""


@router.get("/teams", summary="Teams with guarantee, used, borrowed and lent per flavor")
def teams(principal: Anyone, service: ServiceDep) -> list[TeamModel]:
    return team_models(service)


@router.get("/policy", summary="The current policy")
def get_policy(principal: Anyone, service: ServiceDep) -> PolicyModel:
    policy = service.store.policy()
    if policy is None:
        return PolicyModel(version=None, document={})
    versions = service.store.policy_versions()
    return PolicyModel(
        version=versions[-1].version if versions else None, document=policy_document(policy)
    )


@router.put("/policy", summary="Set a new policy version (admin)")
def put_policy(
    principal: Admin,
    service: ServiceDep,
    document: dict[str, Any] = Body(  # noqa: B008 FastAPI declares the body this way
        description="A policy in topoq's policy-file format (apiVersion topoq.io/v1, kind Policy)."
    ),
) -> PolicyModel:
    """Every version is kept with who set it and when."""
    return _set_policy(service, principal, _policy_in_body(document))


def _policy_in_body(document: dict[str, Any]) -> ClusterPolicy:
    """The policy a request's body holds; a 422 naming the field (``body.teams[1]...``)."""
    try:
        return policy_from_document(document, source=POLICY_BODY)
    except InvalidInputError as error:
        where = (error.where or POLICY_BODY).replace(f"{POLICY_BODY}: ", f"{POLICY_BODY}.", 1)
        raise InvalidInputError(error.message, where=where, hint=error.hint) from None


@router.post(
    "/policy/lint", summary="Lint a policy on the cluster's nodes, keeping nothing (admin)"
)
def lint_policy_document(
    principal: Admin,
    service: ServiceDep,
    document: dict[str, Any] = Body(  # noqa: B008 FastAPI declares the body this way
        description="A policy in topoq's policy-file format, as `PUT /policy` takes it."
    ),
) -> PolicyLintModel:
    """What `PUT /policy` would say of this policy, without keeping it: a policy the lint
    finds an error in is one it refuses (the dashboard shows this before saving)."""
    policy = _policy_in_body(document)
    nodes = service.store.nodes()
    findings = lint_policy(policy, nodes, service.topology) if nodes else []
    findings.sort(key=lambda finding: not finding.is_error)
    return PolicyLintModel(
        accepted=not any(finding.is_error for finding in findings),
        findings=finding_models(findings),
    )


def _set_policy(
    service: Service, principal: Principal, policy: ClusterPolicy, **detail: Any
) -> PolicyModel:
    """Keep ``policy`` as the next version, audited (``detail``: what the entry adds) — once
    the policy lint found no error on the stored nodes (422, nothing kept); its warnings are
    logged and answered."""
    warnings = policy_warnings(policy, service.store.nodes(), service.topology, where=POLICY_BODY)
    now = service.clock()
    version = service.store.save_policy(policy, actor=principal.name, now=now)
    service.store.audit(AuditEntry(now, principal.name, "policy", f"version {version}", detail))
    for finding in warnings:
        write_event(log, policy_finding(finding, version=version, source="PUT /policy"))
    service.wake()
    return PolicyModel(
        version=version, document=policy_document(policy), warnings=finding_models(warnings)
    )


def finding_models(findings: list[LintFinding]) -> list[LintFindingModel]:
    return [
        LintFindingModel(
            severity=finding.severity.value,
            code=finding.code.value,
            message=finding.message,
            hint=finding.hint,
        )
        for finding in findings
    ]


@router.get("/policy/versions", summary="Every policy version, oldest first")
def policy_versions(principal: Anyone, service: ServiceDep) -> list[PolicyVersionModel]:
    return [
        PolicyVersionModel(version=v.version, actor=v.actor, at=v.at_s)
        for v in service.store.policy_versions()
    ]


@router.get("/policy/versions/{version}", summary="One kept policy version")
def policy_version(version: int, principal: Anyone, service: ServiceDep) -> PolicyModel:
    return PolicyModel(version=version, document=policy_document(_kept(service, version)))


@router.post(
    "/policy/versions/{version}/rollback",
    summary="Make a kept version the policy again, as a new version (admin)",
)
def rollback_policy(version: int, principal: Admin, service: ServiceDep) -> PolicyModel:
    """The new version equals ``version``; the audit entry says which version it restores."""
    return _set_policy(service, principal, _kept(service, version), rollbackOf=version)


def _kept(service: Service, version: int) -> ClusterPolicy:
    found = service.store.policy_at(version) if 0 < version <= MAX_POLICY_VERSION else None
    if found is None:
        kept = [v.version for v in service.store.policy_versions()]
        raise ApiError(
            404,
            f"there is no policy version {version}",
            where="version",
            hint=f"kept versions are 1 to {kept[-1]}: topoq policy history lists them"
            if kept
            else "no policy was set yet: topoq policy apply FILE sets one",
        )
    return found


@router.get("/nodes", summary="Nodes with health, cordon state and GPUs in use")
def nodes(principal: Anyone, service: ServiceDep) -> list[NodeModel]:
    return node_models(service.store.nodes(), holding(service), principal.acts_for)


@router.post("/nodes/{name}/cordon", summary="Keep new work off a node (admin)")
def cordon(name: str, principal: Admin, service: ServiceDep) -> NodeAction:
    return _mark(service, principal, name, unschedulable=True)


@router.post("/nodes/{name}/uncordon", summary="Let new work onto a node again (admin)")
def uncordon(name: str, principal: Admin, service: ServiceDep) -> NodeAction:
    return _mark(service, principal, name, unschedulable=False)


@router.post("/nodes/{name}/drain", summary="Cordon a node and requeue its gangs (admin)")
def drain(name: str, principal: Admin, service: ServiceDep) -> NodeAction:
    """The gangs' pods stop at the controller's next step."""
    _known_node(service, name)
    requeued = service.intake.drain(name, actor=principal.name)
    service.wake()
    return _node_action(service, _known_node(service, name), requeued)


@router.post("/nodes/{name}/fail", summary="Mark a node failed and stop its work (admin)")
def fail(name: str, principal: Admin, service: ServiceDep) -> NodeAction:
    """Its work stops and its gangs are requeued by the controller's next step and placed
    elsewhere."""
    return _mark(service, principal, name, ready=False)


@router.post("/nodes/{name}/recover", summary="Mark a failed node healthy again (admin)")
def recover(name: str, principal: Admin, service: ServiceDep) -> NodeAction:
    return _mark(service, principal, name, ready=True)


@router.post("/cluster/apply", summary="Make a cluster file the inventory (admin)")
def apply_cluster(
    body: ClusterApplyRequest, principal: Admin, service: ServiceDep
) -> ClusterApplyResult:
    """The nodes it adds, removes and changes, in one transaction with its audit entry. A
    change that removes a node a gang runs on, or shrinks one below what its gangs hold, is
    refused (409) unless ``drain``, which requeues those gangs. A node's cordon and health
    stay as stored. ``dryRun`` answers the difference and writes nothing."""
    if service.inventory_from_executor:
        raise ApiError(
            409,
            "this server's executor reports the cluster's nodes itself",
            hint="change the nodes on the cluster: topoq takes them from the executor",
        )
    cluster = cluster_from_document(body.document, source=CLUSTER_DOCUMENT)
    if tuple(cluster.topology.levels) != tuple(service.topology.levels):
        raise InvalidInputError(
            f"the cluster's levels {', '.join(cluster.topology.levels)} are not the server's "
            f"({', '.join(service.topology.levels)})",
            where=f"{CLUSTER_DOCUMENT}.levels",
            hint="give the server's levels; other levels need a restart: "
            "topoq server --cluster FILE",
        )
    source = f"cluster {cluster.name}"
    try:
        diff, _ = apply_inventory(
            service.store,
            cluster.nodes,
            actor=principal.name,
            source=source,
            drain=body.drain,
            dry_run=body.dry_run,
            now=service.clock(),
            refusal_hint=DRAIN_HINT,
        )
    except InvalidInputError as error:
        raise conflict(error) from None
    applied = not body.dry_run and not diff.empty
    policy = service.store.policy()
    findings = lint_policy(policy, diff.nodes, service.topology) if policy else []
    if applied:
        for finding in findings:
            write_event(log, policy_finding(finding, version=None, source=source))
        service.wake()
    return cluster_apply_result(diff, applied=applied, dry_run=body.dry_run, findings=findings)


def cluster_apply_result(
    diff: InventoryDiff, *, applied: bool, dry_run: bool, findings: list[LintFinding]
) -> ClusterApplyResult:
    return ClusterApplyResult(
        applied=applied,
        dry_run=dry_run,
        nodes=len(diff.nodes),
        added=[
            AddedNodeModel(
                name=node.name, labels=dict(node.labels), allocatable=amounts(node.allocatable)
            )
            for node in diff.added
        ],
        removed=[
            RemovedNodeModel(name=removed.node.name, jobs=list(removed.gangs))
            for removed in diff.removed
        ],
        changed=[
            ChangedNodeModel(
                name=change.name,
                changed=list(change.what),
                labels_before=dict(change.before.labels),
                labels=dict(change.after.labels),
                allocatable_before=amounts(change.before.allocatable),
                allocatable=amounts(change.after.allocatable),
                jobs=list(change.gangs),
                short_of=list(change.short_of),
            )
            for change in diff.changed
        ],
        requeued=list(diff.displaced),
        policy_findings=finding_models(findings),
    )


@router.get("/topology", summary="The topology tree with free and used GPUs per domain")
def topology(principal: Anyone, service: ServiceDep) -> TopologyModel:
    return topology_model(service)


def _known_node(service: Service, name: str) -> NodeSpec:
    found = next((node for node in service.store.nodes() if node.name == name), None)
    if found is None:
        raise ApiError(404, f"no node named {name!r}", hint="list nodes with GET /nodes")
    return found


def _mark(
    service: Service,
    principal: Principal,
    name: str,
    *,
    ready: bool | None = None,
    unschedulable: bool | None = None,
) -> NodeAction:
    _known_node(service, name)
    node = service.intake.mark_node(
        name, ready=ready, unschedulable=unschedulable, actor=principal.name
    )
    service.wake()
    return _node_action(service, node, [])


def _node_action(service: Service, node: NodeSpec, requeued: list[JobId]) -> NodeAction:
    """The node as it is now, with the holding jobs that have a pod on it."""
    on_node = [
        job for job in holding(service) if job.allocation and node.name in job.allocation.nodes
    ]
    return NodeAction(node=node_model(node, on_node), requeued=list(requeued))
