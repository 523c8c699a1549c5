"""A real Kubernetes control plane on the loopback: etcd, kube-apiserver (token authentication,
RBAC), kube-controller-manager, kube-scheduler and KWOK, with fake GPU nodes that carry
HyperPod's topology labels, and Kueue on request. No kubelet and no container runtime: KWOK
plays the nodes and the pods' lifecycle.

The programs come from ``TOPOQ_K8S_ASSETS`` (a directory with ``bin/etcd``,
``bin/kube-apiserver`` …, as the project's ``k8s-test-bed.tar.xz`` unpacks; ``kueue/`` with
Kueue's CRDs and webhooks; ``kwok/stages.yaml``). ``bring_up(DIR)`` starts them with their
state, logs and PIDs in DIR, waits until the API server is ready and every node is Ready, and
returns the bed (``DIR/kubeconfig`` for the admin). ``tear_down(DIR)`` stops exactly what was
started there, in the order that exits fast: Kueue, then the API server's other clients, then
the API server, then etcd. ``topoq dev k8s up|down`` calls these. See docs/executors.md.
"""

from __future__ import annotations

import base64
import json
import math
import os
import secrets
import shutil
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from topoq.discovery.kubernetes import nodelist_document
from topoq.discovery.synthetic import generate_cluster
from topoq.domain.node import NodeSpec
from topoq.domain.topology import TopologySpec
from topoq.testbeds.certificates import write_key_pair, write_serving_certificate
from topoq.testbeds.daemons import (
    BedError,
    DaemonExited,
    check_alive,
    check_ports_free,
    free_listen_ports,
    is_alive,
    kill_daemon,
    read_bed_record,
    recorded,
    start_daemon,
    stop_daemons,
    wait_for_daemon,
    wait_until,
)
from topoq.testbeds.kwok_stages import bed_stages

ASSETS_ENV = "TOPOQ_K8S_ASSETS"
CONTROL_PLANE_PROGRAMS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
)
WHERE_TO_GET = (
    f"set {ASSETS_ENV} to a directory whose bin/ holds {', '.join(CONTROL_PLANE_PROGRAMS)} "
    "(and kueue): the project's k8s-test-bed.tar.xz unpacked, or the programs from "
    "setup-envtest, kind or your own cluster's release; or point topoq at a cluster you have "
    "with --kubeconfig"
)
BED_FILE = "bed.json"
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
BED_NODE_LABEL = ("type", "kwok")
NODE_INSTANCE_TYPE = "ml.p5.48xlarge"
PODS_PER_NODE = "110"
KUEUE_NAMESPACE = "kueue-system"
KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")
"""Where Kueue reads its metrics serving certificate when it manages no certificates itself."""
KUEUE_FRAMEWORKS = ("batch/job", "pod")
STOP_ORDER = (("kueue",), ("kwok", "scheduler", "controller-manager"), ("apiserver",), ("etcd",))
CONTROL_PLANE = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok")
"""The bed's daemons that run for as long as the bed does (Kueue may be stopped on purpose)."""
BRING_UP_ATTEMPTS = 3
"""Tries on fresh free ports when a daemon found its port taken (``ports="free"``)."""
MAX_NETWORK_LEVELS = 3
"""HyperPod's network layers: ``topology.k8s.aws/network-node-layer-1..3``."""


@dataclass(frozen=True)
class Ports:
    """The loopback ports the bed listens on (each must be free)."""

    etcd_client: int = 2379
    etcd_peer: int = 2380
    apiserver: int = 6443
    controller_manager: int = 10257
    scheduler: int = 10259
    kueue_health: int = 8081
    kueue_metrics: int = 8443
    kueue_webhook: int = 9443

    @classmethod
    def free(cls) -> Ports:
        """Loopback ports nothing listens on now (below the ephemeral range, so that a
        restarted API server gets its port back), for a second bed beside the default one."""
        return cls(*free_listen_ports(len(cls.__dataclass_fields__)))

    def control_plane(self) -> dict[str, int]:
        return {
            "etcd": self.etcd_client,
            "etcd peers": self.etcd_peer,
            "kube-apiserver": self.apiserver,
            "kube-controller-manager": self.controller_manager,
            "kube-scheduler": self.scheduler,
        }

    def kueue(self) -> dict[str, int]:
        return {
            "kueue health": self.kueue_health,
            "kueue metrics": self.kueue_metrics,
            "kueue webhooks": self.kueue_webhook,
        }


@dataclass(frozen=True)
class BedShape:
    """How many fake nodes and how many network layers above them."""

    nodes: int = 16
    levels: int = 3
    """Network layers (``topology.k8s.aws/network-node-layer-1..levels``), 1 to 3; the
    hostname is the level below them."""
    instance_type: str = NODE_INSTANCE_TYPE
    domains: tuple[int, ...] = ()
    """The shape itself when given: domains per parent at each network layer, broadest first,
    then nodes per lowest domain (``(2, 4, 8)``: 2 spines × 4 blocks × 8 nodes); it must hold
    ``nodes`` nodes under ``levels`` layers."""

    def tree(self) -> tuple[int, ...]:
        """The synthetic shape (``discovery.synthetic``): domains per parent, broadest first,
        then nodes per lowest domain — ``domains``, else as even as the node count allows."""
        if not 1 <= self.levels <= MAX_NETWORK_LEVELS:
            raise BedError(f"{self.levels} network levels", hint=f"give 1 to {MAX_NETWORK_LEVELS}")
        if self.nodes < 1:
            raise BedError(f"{self.nodes} nodes", hint="give at least one node")
        if self.domains:
            if len(self.domains) != self.levels + 1 or math.prod(self.domains) != self.nodes:
                raise BedError(
                    f"shape {self.domains} for {self.nodes} nodes under {self.levels} layers",
                    hint="give one count per layer and the nodes per lowest domain, "
                    "multiplying to the node count",
                )
            return self.domains
        shape = [1] * (self.levels + 1)
        for factor in sorted(_prime_factors(self.nodes), reverse=True):
            smallest = min(shape)
            at = max(i for i, value in enumerate(shape) if value == smallest)
            shape[at] *= factor
        return tuple(shape)

    def cluster(self) -> tuple[list[NodeSpec], TopologySpec]:
        return generate_cluster(self.tree(), instance_type=self.instance_type, name="bed")


def _prime_factors(number: int) -> list[int]:
    found, divisor = [], 2
    while divisor * divisor <= number:
        while number % divisor == 0:
            found.append(divisor)
            number //= divisor
        divisor += 1
    return [*found, number] if number > 1 else found


@dataclass(frozen=True)
class KubernetesBed:
    """A running bed: where its API server is and how to talk to it."""

    directory: Path
    server: str
    """``https://127.0.0.1:PORT``."""
    ca_file: Path
    """The API server's self-signed serving certificate (it verifies for 127.0.0.1)."""
    admin_token: str
    """A member of ``system:masters``."""
    topoq_token: str
    """User ``topoq``, with no groups: it may do only what RBAC grants it."""
    nodes: tuple[str, ...]
    topology_levels: tuple[str, ...]
    kueue: bool
    ports: Ports = field(default_factory=Ports)

    @property
    def kubeconfig(self) -> Path:
        """The admin's kubeconfig."""
        return self.directory / "kubeconfig"

    def kubeconfig_for(self, user: str, token: str) -> Path:
        """A kubeconfig for ``user`` with ``token``, written next to the admin's."""
        path = self.directory / f"kubeconfig-{user}"
        path.write_text(_kubeconfig(self.server, self.ca_file, user, token))
        path.chmod(0o600)
        return path

    def api_client(self, token: str | None = None) -> Any:
        """An official ``kubernetes`` client for the admin (or for ``token``)."""
        configuration = client.Configuration()
        configuration.host = self.server
        configuration.ssl_ca_cert = str(self.ca_file)
        configuration.api_key = {"authorization": f"Bearer {token or self.admin_token}"}
        return client.ApiClient(configuration)


def find_assets(given: Path | str | None = None, *, kueue: bool = False) -> Path:
    """The directory with the programs (``given``, else ``$TOPOQ_K8S_ASSETS``)."""
    chosen = given if given is not None else os.environ.get(ASSETS_ENV)
    if not chosen:
        raise BedError(f"{ASSETS_ENV} is not set", hint=WHERE_TO_GET)
    assets = Path(chosen).expanduser().resolve()
    wanted = [*CONTROL_PLANE_PROGRAMS, *(("kueue",) if kueue else ())]
    missing = [name for name in wanted if not os.access(assets / "bin" / name, os.X_OK)]
    if missing:
        raise BedError(f"{assets}/bin lacks {', '.join(missing)}", hint=WHERE_TO_GET)
    return assets


def bed_in(directory: Path) -> KubernetesBed | None:
    """The bed brought up in ``directory``, while its record is there."""
    found = read_bed_record(directory / BED_FILE)
    if found is None:
        return None
    return KubernetesBed(
        directory=Path(found["directory"]),
        server=found["server"],
        ca_file=Path(found["ca_file"]),
        admin_token=found["admin_token"],
        topoq_token=found["topoq_token"],
        nodes=tuple(found["nodes"]),
        topology_levels=tuple(found["topology_levels"]),
        kueue=bool(found["kueue"]),
        ports=Ports(**found["ports"]),
    )


def bring_up(
    directory: Path,
    shape: BedShape | None = None,
    *,
    kueue: bool = False,
    assets: Path | str | None = None,
    ports: Ports | Literal["free"] | None = None,
    apiserver_flags: Sequence[str] = (),
    timeout_s: float = 120.0,
) -> KubernetesBed:
    """Start the bed in ``directory`` (made if missing; it must hold no running bed) and
    return it once every daemon answers its health check and every node is Ready (and Kueue,
    when asked, is ready with its webhooks). A daemon that exits meanwhile is an error at
    once, with the end of its log. ``ports="free"`` picks free loopback ports, and picks again
    (up to ``BRING_UP_ATTEMPTS`` times) when a daemon found one taken after all, as another
    program may bind a port between its choice and its use. On any failure, what was started
    is stopped again before the error is raised."""
    shape = shape or BedShape()
    programs = find_assets(assets, kueue=kueue)
    directory = directory.expanduser().resolve()
    directory.mkdir(parents=True, exist_ok=True)
    if recorded(directory):
        raise BedError(
            f"{directory} records a bed already", hint=f"run topoq dev k8s down {directory} first"
        )
    attempts = BRING_UP_ATTEMPTS if ports == "free" else 1
    for attempt in range(1, attempts + 1):
        chosen = Ports.free() if ports == "free" else (ports or Ports())
        try:
            return _bring_up_once(
                directory, shape, kueue, programs, chosen, apiserver_flags, timeout_s
            )
        except DaemonExited as error:
            if not error.port_taken or attempt == attempts:
                raise
            shutil.rmtree(directory / "etcd-data", ignore_errors=True)  # a bed that never ran
    raise AssertionError("unreachable")  # the last attempt returns or raises


def _bring_up_once(
    directory: Path,
    shape: BedShape,
    kueue: bool,
    programs: Path,
    ports: Ports,
    apiserver_flags: Sequence[str],
    timeout_s: float,
) -> KubernetesBed:
    nodes, topology = shape.cluster()
    check_ports_free(ports.control_plane() | (ports.kueue() if kueue else {}), "control plane")
    deadline = time.monotonic() + timeout_s
    try:
        bed = _start_control_plane(directory, programs, ports, apiserver_flags, deadline, nodes)
        bed = KubernetesBed(**{**_fields(bed), "topology_levels": topology.levels, "kueue": kueue})
        _write_bed(bed)
        _create_nodes(bed, nodes, deadline)
        if kueue:
            _start_kueue(bed, programs, deadline)
        check_alive(directory, CONTROL_PLANE)
    except BaseException:
        tear_down(directory)
        raise
    return bed


def tear_down(directory: Path) -> list[str]:
    """Stop what ``bring_up`` started in ``directory`` (by its recorded PIDs); the names of
    the programs stopped. The state stays (logs, etcd's data) until the directory is removed."""
    directory = directory.expanduser().resolve()
    stopped = stop_daemons(directory, STOP_ORDER)
    (directory / BED_FILE).unlink(missing_ok=True)
    return stopped


RESTART_ATTEMPTS = 3


def restart_apiserver(bed: KubernetesBed, *, timeout_s: float = 60.0) -> None:
    """Kill the API server (SIGKILL: with clients holding watches, SIGTERM takes a minute)
    and start it again with the same command line and etcd; returns once it is ready. A new
    server that exits at once (CI saw one refused its port, "address already in use", a
    moment after the old one was gone) is started again, up to ``RESTART_ATTEMPTS`` times."""
    argv = json.loads((bed.directory / "apiserver.argv").read_text())
    kill_daemon(bed.directory, "apiserver")
    deadline = time.monotonic() + timeout_s
    for _ in range(RESTART_ATTEMPTS):
        daemon = start_daemon(bed.directory, "apiserver", argv)
        wait_until(
            lambda daemon=daemon: (  # type: ignore[misc]
                not is_alive(daemon) or _api_ready(bed.server, bed.ca_file, bed.admin_token)
            ),
            deadline,
            "the API server to be ready again",
            bed.directory / "apiserver.log",
        )
        if is_alive(daemon):
            return
        time.sleep(1.0)  # what held its port lets go: start it again
    raise BedError(
        f"the API server exited at each of {RESTART_ATTEMPTS} restarts",
        hint=f"see {bed.directory / 'apiserver.log'}",
    )


# --- bringing it up ----------------------------------------------------------------------


def _start_control_plane(
    directory: Path,
    assets: Path,
    ports: Ports,
    apiserver_flags: Sequence[str],
    deadline: float,
    nodes: Sequence[NodeSpec],
) -> KubernetesBed:
    binaries = assets / "bin"
    etcd_url = f"http://127.0.0.1:{ports.etcd_client}"
    peer_url = f"http://127.0.0.1:{ports.etcd_peer}"
    etcd = start_daemon(
        directory,
        "etcd",
        [
            str(binaries / "etcd"),
            f"--data-dir={directory / 'etcd-data'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=default={peer_url}",
            "--listen-metrics-urls=",
        ],
    )
    wait_for_daemon(
        etcd, lambda: _http_ok(f"{etcd_url}/health"), deadline, "etcd", directory / "etcd.log"
    )
    write_key_pair(directory / "sa.key", directory / "sa.pub")
    admin_token, topoq_token = secrets.token_hex(16), secrets.token_hex(16)
    tokens = directory / "tokens.csv"
    tokens.write_text(f'{admin_token},admin,admin,"system:masters"\n{topoq_token},topoq,topoq\n')
    tokens.chmod(0o600)
    certificates = directory / "apiserver-certs"
    argv = [
        str(binaries / "kube-apiserver"),
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={ports.apiserver}",
        f"--cert-dir={certificates}",
        "--endpoint-reconciler-type=none",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--service-account-issuer=https://kubernetes.default.svc",
        f"--service-account-key-file={directory / 'sa.pub'}",
        f"--service-account-signing-key-file={directory / 'sa.key'}",
        f"--token-auth-file={tokens}",
        "--authorization-mode=RBAC",
        *apiserver_flags,
    ]
    (directory / "apiserver.argv").write_text(json.dumps(argv))
    apiserver = start_daemon(directory, "apiserver", argv)
    server = f"https://127.0.0.1:{ports.apiserver}"
    ca_file = certificates / "apiserver.crt"
    wait_for_daemon(
        apiserver,
        lambda: _api_ready(server, ca_file, admin_token),
        deadline,
        "the API server to be ready",
        directory / "apiserver.log",
    )
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(_kubeconfig(server, ca_file, "admin", admin_token))
    kubeconfig.chmod(0o600)
    controller_manager = start_daemon(
        directory,
        "controller-manager",
        [
            str(binaries / "kube-controller-manager"),
            f"--kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.controller_manager}",
            "--leader-elect=false",
            f"--service-account-private-key-file={directory / 'sa.key'}",
            "--use-service-account-credentials=false",
            f"--root-ca-file={ca_file}",
            "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route",
        ],
    )
    scheduler = start_daemon(
        directory,
        "scheduler",
        [
            str(binaries / "kube-scheduler"),
            f"--kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.scheduler}",
            "--leader-elect=false",
        ],
    )
    for daemon, port in (
        (controller_manager, ports.controller_manager),
        (scheduler, ports.scheduler),
    ):
        wait_for_daemon(
            daemon,
            lambda port=port: _http_ok(f"https://127.0.0.1:{port}/healthz", _SELF_SIGNED),  # type: ignore[misc]
            deadline,
            f"{daemon.name} to be healthy",
            directory / f"{daemon.name}.log",
        )
    stages = directory / "kwok-stages.yaml"
    stages.write_text(bed_stages(assets))
    start_daemon(
        directory,
        "kwok",
        [
            str(binaries / "kwok"),
            f"--kubeconfig={kubeconfig}",
            f"--config={stages}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={'='.join(KWOK_ANNOTATION)}",
            "--node-ip=10.0.0.1",
            "--node-lease-duration-seconds=40",
        ],
    )
    return KubernetesBed(
        directory=directory,
        server=server,
        ca_file=ca_file,
        admin_token=admin_token,
        topoq_token=topoq_token,
        nodes=tuple(node.name for node in nodes),
        topology_levels=(),
        kueue=False,
        ports=ports,
    )


def _create_nodes(bed: KubernetesBed, nodes: Sequence[NodeSpec], deadline: float) -> None:
    core: Any = client.CoreV1Api(bed.api_client())
    for document in node_documents(nodes):
        core.create_node(document)
    wanted = set(bed.nodes)

    def all_ready() -> bool:
        check_alive(bed.directory, CONTROL_PLANE)
        listed = core.list_node(label_selector="=".join(BED_NODE_LABEL)).items
        ready = {
            node.metadata.name
            for node in listed
            if any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or ())
        }
        return wanted <= ready

    wait_until(all_ready, deadline, "every node to be Ready", bed.directory / "kwok.log")


def node_documents(nodes: Iterable[NodeSpec]) -> list[dict[str, Any]]:
    """Node objects for KWOK to play: the nodes' labels, taints and allocatable (as capacity
    too, with room for pods), the annotation KWOK manages, and no conditions (KWOK makes
    them Ready)."""
    documents = []
    for document in nodelist_document(list(nodes))["items"]:
        metadata = document["metadata"]
        metadata["annotations"] = dict([KWOK_ANNOTATION])
        metadata["labels"] = {**metadata["labels"], BED_NODE_LABEL[0]: BED_NODE_LABEL[1]}
        amounts = {**document["status"]["allocatable"], "pods": PODS_PER_NODE}
        document["status"] = {"allocatable": amounts, "capacity": dict(amounts)}
        documents.append(document)
    return documents


def _start_kueue(bed: KubernetesBed, assets: Path, deadline: float) -> None:
    api = bed.api_client()
    extensions: Any = client.ApiextensionsV1Api(api)
    definitions = sorted((assets / "kueue" / "crds").glob("*.yaml"))
    names = []
    for path in definitions:
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                try:
                    extensions.create_custom_resource_definition(document)
                except ApiException as error:
                    if error.status != 409:  # already there (a bed on an old etcd)
                        raise
                names.append(document["metadata"]["name"])

    def established() -> bool:
        for name in names:
            conditions = extensions.read_custom_resource_definition(name).status.conditions
            if not any(c.type == "Established" and c.status == "True" for c in conditions or ()):
                return False
        return True

    wait_until(established, deadline, "Kueue's CRDs to be served", None)
    try:
        core: Any = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": KUEUE_NAMESPACE}})
    except ApiException as error:
        if error.status != 409:
            raise
    directory = bed.directory
    crt, key = write_serving_certificate(directory / "webhook-certs")
    _install_metrics_certificate(crt, key)
    ports = bed.ports
    configuration = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports.kueue_health}"},
        "metrics": {"bindAddress": f"127.0.0.1:{ports.kueue_metrics}"},
        "webhook": {"port": ports.kueue_webhook, "host": "127.0.0.1", "certDir": str(crt.parent)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 500, "burst": 1000},
        "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
        "featureGates": {"VisibilityOnDemand": False},
    }
    config_file = directory / "kueue-config.yaml"
    config_file.write_text(yaml.safe_dump(configuration))
    environment = {
        **os.environ,
        "KUBECONFIG": str(bed.kubeconfig),
        "KUEUE_NAMESPACE": KUEUE_NAMESPACE,
    }
    kueue = start_daemon(
        directory,
        "kueue",
        [str(assets / "bin" / "kueue"), f"--config={config_file}", "--zap-log-level=2"],
        environment=environment,
    )
    wait_for_daemon(
        kueue,
        lambda: _http_ok(f"http://127.0.0.1:{ports.kueue_health}/readyz"),
        deadline,
        "Kueue to be ready",
        directory / "kueue.log",
    )
    registrations: Any = client.AdmissionregistrationV1Api(api)
    url = f"https://127.0.0.1:{ports.kueue_webhook}"
    for document in kueue_webhooks(assets / "kueue" / "webhooks.yaml", crt.read_bytes(), url):
        create = (
            registrations.create_mutating_webhook_configuration
            if document["kind"] == "MutatingWebhookConfiguration"
            else registrations.create_validating_webhook_configuration
        )
        try:
            create(document)
        except ApiException as error:
            if error.status != 409:
                raise


def kueue_webhooks(path: Path, ca_bundle: bytes, url: str) -> list[dict[str, Any]]:
    """Kueue's webhook configurations pointed at ``url`` (the process on the loopback) instead
    of its in-cluster Service, keeping only the webhooks of Kueue's own objects and of the
    enabled frameworks, so that none points at a handler this configuration does not serve."""
    bundle = base64.b64encode(ca_bundle).decode()
    served = ["kueue-x-k8s-io", "batch-v1-job", "-v1-pod"]
    documents = []
    for document in yaml.safe_load_all(path.read_text()):
        if not document:
            continue
        document["metadata"]["name"] = "kueue-" + document["metadata"]["name"]
        hooks = []
        for hook in document.get("webhooks", []):
            route = hook["clientConfig"].get("service", {}).get("path", "/")
            if any(part in route for part in served):
                hook["clientConfig"] = {"url": url + route, "caBundle": bundle}
                hooks.append(hook)
        document["webhooks"] = hooks
        documents.append(document)
    return documents


def _install_metrics_certificate(crt: Path, key: Path) -> None:
    try:
        KUEUE_METRICS_CERTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(crt, KUEUE_METRICS_CERTS / "tls.crt")
        shutil.copyfile(key, KUEUE_METRICS_CERTS / "tls.key")
    except OSError as error:
        raise BedError(
            f"Kueue reads its metrics certificate from {KUEUE_METRICS_CERTS}, which cannot be "
            f"written: {error}",
            hint="run as a user that may write there, or make the folder writable",
        ) from None


# --- helpers -----------------------------------------------------------------------------


def _fields(bed: KubernetesBed) -> dict[str, Any]:
    return {name: getattr(bed, name) for name in bed.__dataclass_fields__}


def _write_bed(bed: KubernetesBed) -> None:
    record = {
        **{name: value for name, value in _fields(bed).items() if name != "ports"},
        "directory": str(bed.directory),
        "ca_file": str(bed.ca_file),
        "nodes": list(bed.nodes),
        "topology_levels": list(bed.topology_levels),
        "ports": asdict(bed.ports),
    }
    path = bed.directory / BED_FILE
    path.write_text(json.dumps(record, indent=1))
    path.chmod(0o600)


def _kubeconfig(server: str, ca_file: Path, user: str, token: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "topoq-bed",
                    "cluster": {"server": server, "certificate-authority": str(ca_file)},
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "topoq-bed", "context": {"cluster": "topoq-bed", "user": user}}],
            "current-context": "topoq-bed",
        }
    )


def _self_signed() -> ssl.SSLContext:
    """For the health checks of daemons that serve their own self-signed certificate."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


_SELF_SIGNED = _self_signed()


def _http_ok(url: str, context: ssl.SSLContext | None = None, token: str | None = None) -> bool:
    request = urllib.request.Request(url)  # a loopback health probe
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def _api_ready(server: str, ca_file: Path, token: str) -> bool:
    if not ca_file.exists():
        return False
    return _http_ok(f"{server}/readyz", ssl.create_default_context(cafile=str(ca_file)), token)


def describe(bed: KubernetesBed, processes: Mapping[str, int] | None = None) -> str:
    """What a user needs to use the bed, in a few lines."""
    lines = [
        f"API server   {bed.server} (RBAC, token authentication)",
        f"kubeconfig   {bed.kubeconfig}   (export KUBECONFIG={bed.kubeconfig})",
        f"nodes        {len(bed.nodes)} KWOK nodes, levels {', '.join(bed.topology_levels)}",
        f"Kueue        {'running' if bed.kueue else 'not started (--kueue)'}",
        f"stop with    topoq dev k8s down {bed.directory}",
    ]
    if processes:
        lines.insert(0, "started      " + ", ".join(f"{n} ({p})" for n, p in processes.items()))
    return "\n".join(lines)
