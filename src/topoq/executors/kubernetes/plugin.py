"""The Kubernetes executor's plugin record: its capabilities as data, and its factory, which
imports the official client only when called (the ``kubernetes`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from topoq.domain.errors import InvalidInputError
from topoq.engine.ports import ExecutorCapabilities

if TYPE_CHECKING:
    from topoq.executors.kubernetes.executor import KubernetesExecutor

KUBERNETES_CAPABILITIES = ExecutorCapabilities(
    "kubernetes",
    runs_real_processes=True,
    can_fail_nodes=True,
    captures_logs=False,
    pods_outlive_executor=True,
    reports_inventory=True,
    runs_containers=True,
)
MISSING_CLIENT_HINT = "pip install 'topoq[kubernetes]'"
"""What to do when the official client (the ``kubernetes`` extra) is not installed."""


def kubernetes_executor(
    kubeconfig: Path | str | None = None,
    *,
    node_selector: str = "",
    namespace_pattern: str = "{team}",
    image: str | None = None,
    qps: float = 50.0,
    burst: int = 100,
    concurrency: int = 8,
    stop_grace_s: float = 3.0,
    start_deadline_s: float = 300.0,
    cluster_jobs: bool = True,
) -> KubernetesExecutor:
    """The executor on the cluster of ``kubeconfig`` (default: ``$KUBECONFIG``, then
    ``~/.kube/config``), placing on the nodes ``node_selector`` chooses, each team's pods in
    the namespace ``namespace_pattern`` names; at most ``qps`` requests a second (bursts of
    ``burst``) over ``concurrency`` connections; taking in the cluster's own suspended Jobs
    unless not ``cluster_jobs``."""
    check_rates(qps, burst, concurrency)
    try:
        from topoq.executors.kubernetes.executor import (  # noqa: PLC0415 - only when used
            KubernetesExecutor,
        )
        from topoq.executors.kubernetes.manifests import (  # noqa: PLC0415
            DEFAULT_IMAGE,
            PodOptions,
        )
    except ImportError as error:
        raise InvalidInputError(
            f"the Kubernetes executor needs the official client ({error.name} is missing)",
            where="--executor kubernetes",
            hint=MISSING_CLIENT_HINT,
        ) from None
    if "{team}" not in namespace_pattern:
        raise InvalidInputError(
            f"namespace pattern {namespace_pattern!r} does not name the team",
            where="namespace_pattern",
            hint="put {team} in it, e.g. hyperpod-ns-{team}",
        )
    options = PodOptions(namespace_pattern=namespace_pattern, image=image or DEFAULT_IMAGE)
    return KubernetesExecutor(
        kubeconfig,
        pod_options=options,
        node_selector=node_selector,
        qps=qps,
        burst=burst,
        concurrency=concurrency,
        stop_grace_s=stop_grace_s,
        start_deadline_s=start_deadline_s,
        cluster_jobs=cluster_jobs,
    )


def check_rates(qps: float, burst: int, concurrency: int) -> None:
    """The client's rates are usable (each above 0), else ``InvalidInputError`` naming the
    ``topoq server`` flag."""
    for flag, value, least in (
        ("--kube-qps", qps, 0.0),
        ("--kube-burst", burst, 0),
        ("--kube-concurrency", concurrency, 0),
    ):
        if not value > least:  # NaN too
            raise InvalidInputError(
                f"must be above {least:g}, not {value}",
                where=flag,
                hint="client-go's defaults are 5 a second, bursts of 10; topoq's 50, 100 and 8",
            )
