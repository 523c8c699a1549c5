"""The jobs of the demo: topoq job files for the default pod (it prints its rank and topology,
sleeps ``TOPOQ_SLEEP_S`` and exits 0), built in code so the story reads as a cast list."""

from __future__ import annotations

from dataclasses import dataclass, field

from topoq.wire.v1 import JobFormat, SubmitJobRequest

SPINE = "topology.k8s.aws/network-node-layer-1"
BLOCK = "topology.k8s.aws/network-node-layer-2"
GPUS_PER_NODE = 8


@dataclass(frozen=True)
class DemoJob:
    """One job of the story: ``pods`` pods of ``gpus_per_pod`` GPUs that sleep ``sleep_s``."""

    name: str
    team: str
    priority: str
    pods: int
    sleep_s: float
    topology: dict[str, object] = field(default_factory=dict)
    gpus_per_pod: int = GPUS_PER_NODE

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod

    def request(self) -> SubmitJobRequest:
        pod_set = {
            "name": "workers",
            "count": self.pods,
            "requests": {"nvidia.com/gpu": self.gpus_per_pod},
            "topology": self.topology,
            "environment": {"TOPOQ_SLEEP_S": f"{self.sleep_s:g}"},
        }
        document = {
            "apiVersion": "topoq.io/v1",
            "kind": "Job",
            "metadata": {"name": self.name, "namespace": f"hyperpod-ns-{self.team}"},
            "spec": {"priorityClassName": self.priority, "podSets": [pod_set]},
        }
        return SubmitJobRequest(format=JobFormat.TOPOQ, document=document, team=self.team)

    def describe(self) -> str:
        """``team nlp, experiment, 8 pods × 8 GPUs, one block if possible, runs 20 s``."""
        shape = f"{self.pods} pod{'s' if self.pods > 1 else ''} × {self.gpus_per_pod} GPUs"
        parts = [f"team {self.team}", self.priority, shape, _placement(self.topology)]
        return ", ".join(part for part in parts if part) + f", runs {self.sleep_s:g} s"


def _placement(topology: dict[str, object]) -> str:
    names = {SPINE: "spine", BLOCK: "block"}
    if "required" in topology:
        return f"all in one {names.get(str(topology['required']), topology['required'])}"
    if "preferred" in topology:
        return f"one {names.get(str(topology['preferred']), topology['preferred'])} if possible"
    spread = topology.get("spread")
    if isinstance(spread, dict):
        level = names.get(str(spread.get("level")), spread.get("level"))
        return f"at most {spread.get('maxPodsPerDomain')} per {level}"
    return ""


def block_job(
    name: str, team: str, priority: str, sleep_s: float, *, required: bool = False
) -> DemoJob:
    """A gang of one pod per node of a block (8 × 8 GPUs), in one block if possible (or only)."""
    topology: dict[str, object] = {"required" if required else "preferred": BLOCK}
    return DemoJob(name, team, priority, pods=8, sleep_s=sleep_s, topology=topology)
