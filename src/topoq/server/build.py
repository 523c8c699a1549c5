"""The controller process's parts, built from the settings: the store (its nodes and policy
prepared), the executor, the controller and its loop, and the admin token."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from topoq.api.cluster_intake import ClusterIntake
from topoq.api.service import ServiceStore, apply_inventory, policy_finding
from topoq.core.policy_gate import policy_warnings
from topoq.core.policy_lint import lint_policy
from topoq.discovery.policy import load_policy
from topoq.discovery.sources import LoadedCluster, load_cluster
from topoq.domain.governance import ClusterPolicy
from topoq.domain.identity import next_admin_token_name
from topoq.domain.node import HOSTNAME_LABEL, NodeSpec
from topoq.domain.topology import AWS_NETWORK_LAYER_LABELS, TopologySpec
from topoq.engine.controller import Controller
from topoq.engine.event_log import policy_changed, write_event
from topoq.engine.intake import SYSTEM
from topoq.engine.metrics import ControlPlaneMetrics
from topoq.engine.policy_watch import PolicyWatch, latest_version
from topoq.engine.ports import AuditEntry, ClusterJobSource, Executor, Store
from topoq.executors.local.layout import write_private_text
from topoq.executors.registry import make_executor, plugin
from topoq.executors.slurm.plugin import slurm_topology
from topoq.server.loop import (
    ControllerLoop,
    GarbageBetweenSteps,
    do_nothing,
    settle_garbage_collector,
)
from topoq.server.settings import ServerSettings
from topoq.server_environment import RUNS_DIRECTORY, make_private
from topoq.store.sql_store import SqlStore, open_store
from topoq.wire.v1 import Role

log = logging.getLogger("topoq.server")

ADMIN_TOKEN_FILE = "admin-token"
METRICS_FILE = "metrics.prom"
KUBERNETES_LEVELS = (*AWS_NETWORK_LAYER_LABELS[:3], HOSTNAME_LABEL)
"""The topology levels of a Kubernetes cluster unless told otherwise: HyperPod's network
layers, then the hostname (as a Kueue Topology for HyperPod lists them)."""


def cluster_topology(settings: ServerSettings, cluster: LoadedCluster) -> TopologySpec:
    """The levels the server places by: given ones, else the cluster file's, else (for an
    executor that reads the cluster's nodes) the cluster's own (Slurm's switches) or
    HyperPod's, else the example cluster's."""
    if settings.topology_levels:
        name = cluster.topology.name if settings.cluster_file else settings.executor
        return TopologySpec(name, settings.topology_levels)
    if settings.executor == "slurm" and settings.cluster_file is None:
        return slurm_topology(settings.slurm_conf)
    if settings.cluster_file is None and plugin(settings.executor).capabilities.reports_inventory:
        return TopologySpec(settings.executor, KUBERNETES_LEVELS)
    return cluster.topology


def executor_options(settings: ServerSettings) -> dict[str, object]:
    """What the executor's factory is built with: its options from the settings, and its work
    directory under the data directory when it keeps files."""
    options: dict[str, object] = dict(settings.executor_options())
    if plugin(settings.executor).keeps_files:
        options["work_dir"] = settings.data_dir / RUNS_DIRECTORY
    return options


@dataclass
class Server:
    """The controller process's parts, built but not started."""

    store: SqlStore
    executor: Executor
    controller: Controller
    loop: ControllerLoop
    metrics: ControlPlaneMetrics
    admin_token_path: Path

    def close(self) -> None:
        self.loop.stop()
        try:
            self.controller.save_fair_share_usage()
        except Exception:  # the store may be away: the usage of the last minute is lost
            log.exception("could not save the teams' fair-share usage")
        self.executor.close()
        self.store.close()


def build_server(settings: ServerSettings) -> Server:
    """The controller process's parts (``settings.data_dir`` and the files resolved)."""
    found = plugin(settings.executor, where="--executor")
    cluster = load_cluster(settings.cluster_file)  # read before anything is made: a bad file
    topology = cluster_topology(settings, cluster)  # or cluster refuses the start untouched
    data_dir = settings.data_dir
    make_private(data_dir)
    store = open_store(settings.database_url, data_dir)
    try:
        if found.capabilities.reports_inventory:
            if settings.policy_file is not None:
                policy_file = settings.policy_file
                _apply_policy_file(store, load_policy(policy_file), policy_file)
        else:
            _prepare_inventory_and_policy(
                store, cluster, settings.cluster_file, settings.policy_file, topology
            )
        executor = make_executor(settings.executor, **executor_options(settings))
    except BaseException:
        store.close()
        raise
    metrics = ControlPlaneMetrics()
    controller = Controller(store, executor, topology, clock=time.time, metrics=metrics)
    controller.recover()  # each gang requeued is logged
    metrics_path = data_dir / METRICS_FILE
    metrics_path.unlink(missing_ok=True)  # a previous run's numbers
    settle_garbage_collector()  # what startup built stays out of full collections
    garbage = GarbageBetweenSteps()
    policies = PolicyWatch(store)

    def after_step() -> None:
        metrics.publish(metrics_path)
        policies.check()
        garbage.after_step()

    before_step: Callable[[], object] = do_nothing
    if isinstance(executor, ClusterJobSource):
        before_step = ClusterIntake(
            executor,
            store,
            topology,
            namespace_pattern=settings.namespace_pattern,
            clock=time.time,
            executor=executor.capabilities,
        ).take
    loop = ControllerLoop(
        controller,
        interval_s=settings.step_interval_s,
        before_step=before_step,
        after_step=after_step,
    )
    return Server(store, executor, controller, loop, metrics, ensure_admin_token(store, data_dir))


START_DRAIN_HINT = (
    "start the server on its stored nodes (without --cluster, or with the previous file), then "
    "apply the new file with `topoq cluster apply FILE --drain` to requeue those gangs"
)


def _prepare_inventory_and_policy(
    store: ServiceStore,
    cluster: LoadedCluster,
    cluster_file: Path | None,
    policy_file: Path | None,
    topology: TopologySpec,
) -> None:
    """The cluster file's nodes (on first start, the example's) applied to the store's, and
    the policy file kept — checked first, so that a start refused writes nothing: the policy
    file against the nodes the store will have (a lint error refuses the start), then the
    inventory change (one that displaces a gang refuses it). The lint's findings about the
    policy in force are logged."""
    stored = store.nodes()
    apply_file = cluster_file is not None or not stored
    nodes = list(cluster.nodes) if apply_file else stored
    policy = load_policy(policy_file) if policy_file is not None else None
    if policy is not None:
        policy_warnings(policy, nodes, topology, where=str(policy_file))  # errors refuse
    if apply_file:
        source = f"--cluster {cluster_file}" if cluster_file is not None else "the example cluster"
        apply_inventory(
            store,
            nodes,
            actor=SYSTEM,
            source=source,
            drain=False,
            dry_run=False,
            now=time.time(),
            refusal_hint=START_DRAIN_HINT,
        )
    if policy is not None and policy_file is not None:
        _apply_policy_file(store, policy, policy_file)
    _log_policy_findings(store, store.nodes(), topology)


def _log_policy_findings(
    store: ServiceStore, nodes: list[NodeSpec], topology: TopologySpec
) -> None:
    policy = store.policy()
    if policy is None:
        return
    version = latest_version(store.policy_versions()) or None
    for finding in lint_policy(policy, nodes, topology):
        write_event(log, policy_finding(finding, version=version, source="start"))


def _apply_policy_file(store: Store, policy: ClusterPolicy, policy_file: Path) -> None:
    if store.policy() != policy:
        now = time.time()
        actor = f"{SYSTEM} ({policy_file.name})"
        version = store.save_policy(policy, actor=actor, now=now)
        store.audit(
            AuditEntry(now, SYSTEM, "policy", f"version {version}", {"file": str(policy_file)})
        )
        write_event(log, policy_changed(version, actor))


def ensure_admin_token(store: ServiceStore, data_dir: Path) -> Path:
    """The admin token's file; a new token is made when there is none, or when the one in the
    file is not valid (e.g. a new database, or it was revoked): ``admin`` the first time, then
    ``admin-2``, ``admin-3``, … (token names are never given twice)."""
    path = data_dir / ADMIN_TOKEN_FILE
    if path.exists():
        record = store.token_for(path.read_text(encoding="utf-8").strip())
        if record is not None and record.role == Role.ADMIN:
            return path
    taken = {token.name for token in store.tokens(include_revoked=True)}
    plaintext, _ = store.create_token(next_admin_token_name(taken), Role.ADMIN.value, ())
    write_private_text(path, plaintext + "\n")
    return path
