"""The official client, made from a kubeconfig: the one place topoq reads one (the Kubernetes
executor, ``topoq policy import --from kueue --live``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client, config

from topoq.domain.errors import InvalidInputError

DEFAULT_CONNECTIONS = 4


def client_from_kubeconfig(
    kubeconfig: Path | str | None, *, connections: int = DEFAULT_CONNECTIONS
) -> Any:
    """An ``ApiClient`` for the current context of ``kubeconfig`` (default: ``$KUBECONFIG``,
    then ``~/.kube/config``) with a pool of ``connections``; a missing or malformed
    kubeconfig is an ``InvalidInputError`` that names it."""
    configuration = client.Configuration()
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig) if kubeconfig is not None else None,
            client_configuration=configuration,
        )
    except Exception as error:  # a missing or malformed kubeconfig
        raise InvalidInputError(
            f"cannot use the kubeconfig {kubeconfig or '(default)'}: {error}",
            where="--kubeconfig",
            hint="give a kubeconfig whose current context reaches the cluster",
        ) from None
    configuration.connection_pool_maxsize = connections
    return client.ApiClient(configuration)
