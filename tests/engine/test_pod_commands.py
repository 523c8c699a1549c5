"""A pod set's command and environment travel from the job file to the executor's launch."""

from __future__ import annotations

from pathlib import Path

from tests.engine.sql_controller import sql_controller
from topoq.discovery.documents import parse_document
from topoq.discovery.jobfile import workload_from_document
from topoq.domain.governance import TeamName
from topoq.domain.job import JobId, JobSpec

TOPOQ_JOB = """
apiVersion: topoq.io/v1
kind: Job
metadata: {name: train}
spec:
  podSets:
  - name: workers
    count: 2
    requests: {nvidia.com/gpu: 8}
    command: python train.py --epochs 3
    args: ["--lr", "0.1"]
    environment: {NCCL_DEBUG: INFO}
"""

KUEUE_WORKLOAD = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: kube}
spec:
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: trainer
          image: trainer:1
          command: [torchrun, --nproc-per-node=8]
          args: [train.py]
          env:
          - {name: MODE, value: fast}
          - name: SECRET
            valueFrom: {secretKeyRef: {name: s, key: k}}
          resources: {requests: {nvidia.com/gpu: "8"}}
"""

HYPERPOD_JOB = """
job_name: hyp
instance_type: ml.p5.48xlarge
node_count: 1
command: [python, run.py]
args: [--fast]
environment: {A: "1"}
"""


def workload(text: str):  # type: ignore[no-untyped-def]
    return workload_from_document(parse_document(text, source="job.yaml"), source="job.yaml")


def test_each_format_carries_its_command_and_environment() -> None:
    topoq_job = workload(TOPOQ_JOB).pod_sets[0]
    assert topoq_job.command == ("python", "train.py", "--epochs", "3", "--lr", "0.1")
    assert dict(topoq_job.environment) == {"NCCL_DEBUG": "INFO"}
    kube = workload(KUEUE_WORKLOAD).pod_sets[0]
    assert kube.command == ("torchrun", "--nproc-per-node=8", "train.py")
    assert dict(kube.environment) == {"MODE": "fast"}
    hyp = workload(HYPERPOD_JOB).pod_sets[0]
    assert hyp.command == ("python", "run.py", "--fast") and dict(hyp.environment) == {"A": "1"}


def test_commands_survive_the_store_and_reach_the_launch(tmp_path: Path) -> None:
    with sql_controller(tmp_path, lambda: 1.0) as (controller, store, executor):
        job = JobSpec(JobId("train"), TeamName("a"), workload(TOPOQ_JOB), 0.0)
        controller.intake.submit(job, actor="alice")
        assert store.job(JobId("train")).spec.workload.pod_sets[0].command[0] == "python"
        controller.step()
        [launch] = executor.launches
        assert launch.commands == {
            "workers": ("python", "train.py", "--epochs", "3", "--lr", "0.1")
        }
        assert launch.environment == {"NCCL_DEBUG": "INFO"}
        assert all(r.amount("nvidia.com/gpu") == 8 for r in launch.node_allocatable.values())
