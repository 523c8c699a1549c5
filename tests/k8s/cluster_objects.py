"""What the tests of the cluster's own objects (Jobs, pod groups) share: a bed of 8 KWOK
nodes without Kueue (Kueue manages every queue-labelled Job while its batch/job integration
is on, docs/adr/0009-starting-kubernetes-jobs.md, and gates queue-labelled pods with its pod
integration), one ``topoq server --executor kubernetes`` on it (two would both take the same
objects), and how a test asks that server about a job. The fixtures (one bed and server per
module) are in ``conftest``."""

from __future__ import annotations

import signal
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from topoq.testbeds.kubernetes import KubernetesBed
from topoq.testing.server import RunningServer, running_server

TEAM = "vision"
OTHER_TEAM = "speech"
POLICY = """\
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: k8s-cluster-objects}
teams:
- name: vision
  quotas:
  - {flavor: ml.p5.48xlarge, instances: 6}
- name: speech
  quotas:
  - {flavor: ml.p5.48xlarge, instances: 2}
"""
BLOCK = "topology.k8s.aws/network-node-layer-2"


def sleeping_pod_spec(sleep_s: str, gpus: int) -> dict[str, Any]:
    """A pod's spec that KWOK runs for ``sleep_s`` seconds on a node of ``gpus`` GPUs free."""
    return {
        "restartPolicy": "Never",
        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "env": [{"name": "TOPOQ_SLEEP_S", "value": sleep_s}],
                "resources": {
                    "requests": {"nvidia.com/gpu": str(gpus)},
                    "limits": {"nvidia.com/gpu": str(gpus)},
                },
            }
        ],
    }


class Servers:
    """The one topoq server of the bed (two would both take the Jobs), which a test may kill
    and start again on the same data directory."""

    def __init__(self, bed: KubernetesBed, directory: Path) -> None:
        self.policy = directory / "policy.yaml"
        self.policy.write_text(POLICY)
        self.data = directory / "data"
        self.options = ["--executor", "kubernetes", "--kubeconfig", str(bed.kubeconfig)]
        self._stack = ExitStack()
        self.current = self._start()

    def _start(self) -> RunningServer:
        return self._stack.enter_context(
            running_server(self.data, *self.options, policy=self.policy)
        )

    def kill_and_start_again(self, while_down: Callable[[], None] = lambda: None) -> RunningServer:
        """SIGKILL the server, do ``while_down``, start it again on the same data."""
        self.current.process.send_signal(signal.SIGKILL)
        self.current.process.wait()
        while_down()
        self.current = self._start()
        return self.current

    def close(self) -> None:
        self._stack.close()


def admin(server: RunningServer) -> httpx.Client:
    token = (server.data_dir / "admin-token").read_text().strip()
    return httpx.Client(
        base_url=f"{server.url}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )


def topoq_job(http: httpx.Client, job_id: str) -> dict[str, Any] | None:
    answer = http.get(f"/jobs/{job_id}")
    if answer.status_code == 404:
        return None
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def phase_is(http: httpx.Client, job_id: str, *phases: str) -> bool:
    found = topoq_job(http, job_id)
    return found is not None and found["phase"] in phases
