"""Every job file under examples/ submits as written (``topoq submit FILE``, nothing else) to
the server the README starts (its ``topoq server --cluster … --policy …`` line, read from it).
The files are found by globbing and told apart by their content, so that a new example is
covered without being listed; a cluster, policy, topology or scenario file is not a job and is
left out by its kind."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cli.test_server_cli import topoq
from topoq.discovery.documents import read_document
from topoq.discovery.jobfile import is_job_document
from topoq.domain.errors import InvalidInputError
from topoq.testing.server import running_server

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
README_SERVER = re.compile(
    r"^topoq server --cluster (?P<cluster>\S+) --policy (?P<policy>\S+)", re.M
)


def readme_server() -> tuple[Path, Path]:
    """The cluster and policy files of the ``topoq server`` line in the README's "Running the
    control plane" (the server the README tells a user to start)."""
    found = README_SERVER.search((ROOT / "README.md").read_text())
    assert found is not None, "the README starts no `topoq server --cluster X --policy Y`"
    return ROOT / found["cluster"], ROOT / found["policy"]


CLUSTER, POLICY = readme_server()
DOCUMENT_SUFFIXES = {".yaml", ".yml", ".json"}
SUBMITTED = re.compile(r"^(?P<id>[a-z0-9][-a-z0-9.]*) submitted to team \S+ \(\w+\)$")


def example_documents() -> list[Path]:
    return sorted(
        path for path in EXAMPLES.rglob("*") if path.is_file() and path.suffix in DOCUMENT_SUFFIXES
    )


def is_job_file(path: Path) -> bool:
    try:
        return is_job_document(read_document(path))
    except InvalidInputError:
        return False  # not a document topoq reads as a job; the readers' tests cover these


JOB_FILES = [path for path in example_documents() if is_job_file(path)]


def test_the_job_files_are_found_by_content_and_the_rest_left_out() -> None:
    names = {path.relative_to(EXAMPLES).as_posix() for path in JOB_FILES}
    assert {
        "workloads/hyperpod-pytorch-job.yaml",
        "workloads/llama-70b-job.yaml",
        "kubernetes/jobs/indexed-job.yaml",
        "kubernetes/jobs/pod-group.yaml",
        "kubernetes/training/hyperpod-pytorch-job.yaml",
        "kubernetes/training/kubeflow-pytorch-job.yaml",
    } <= names
    left_out = {path.relative_to(EXAMPLES).as_posix() for path in example_documents()} - names
    assert {
        "policies/policy.yaml",
        "clusters/small-explicit.yaml",
        "kubernetes/nodes.json",
        "kubernetes/pods.json",
        "kubernetes/topology.yaml",
        "scenarios/reclaim.yaml",
    } <= left_out


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    data_dir = tmp_path_factory.mktemp("examples-server")
    with running_server(data_dir, cluster=CLUSTER, policy=POLICY, through_cli=True) as running:
        yield {"TOPOQ_SERVER": running.url, "TOPOQ_TOKEN_FILE": str(data_dir / "admin-token")}


@pytest.mark.parametrize("path", JOB_FILES, ids=lambda p: p.relative_to(EXAMPLES).as_posix())
def test_an_example_job_submits_as_written(server: dict[str, str], path: Path) -> None:
    submitted = topoq(server, "submit", path)
    assert submitted.returncode == 0, submitted.stderr
    assert SUBMITTED.match(submitted.stdout.strip()), submitted.stdout


def test_a_hyperpod_class_name_is_charged_to_the_policys_class(server: dict[str, str]) -> None:
    """The HyperPod job says ``priority: training-priority``; the example policy calls the class
    ``training`` and has no ``training-priority``."""
    path = EXAMPLES / "workloads" / "hyperpod-pytorch-job.yaml"
    submitted = topoq(server, "submit", path, "--id", "priority-mapped")
    assert submitted.returncode == 0, submitted.stderr
    token = Path(server["TOPOQ_TOKEN_FILE"]).read_text().strip()
    job = httpx.get(
        f"{server['TOPOQ_SERVER']}/api/v1/jobs/priority-mapped",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    ).json()
    assert job["priorityClass"] == "training", job


def test_an_image_the_local_executor_does_not_run_is_said_on_submit(
    server: dict[str, str],
) -> None:
    """The README's server runs pods as local processes: the HyperPod job's image is accepted
    (the job runs its command on the host) and ``topoq submit`` says so on stderr."""
    path = EXAMPLES / "workloads" / "hyperpod-pytorch-job.yaml"
    submitted = topoq(server, "submit", path, "--id", "image-said")
    assert submitted.returncode == 0, submitted.stderr
    assert SUBMITTED.match(submitted.stdout.strip()), submitted.stdout
    [warning] = submitted.stderr.strip().splitlines()
    assert warning.startswith("warning: pod set 'worker' names image '123456789012.dkr.ecr"), (
        warning
    )
    assert "runs each pod's command as a process on its host" in warning
    assert "--executor kubernetes" in warning
    # a job file without an image submits with nothing on stderr
    plain = topoq(
        server, "submit", EXAMPLES / "workloads" / "llama-70b-job.yaml", "--id", "no-image"
    )
    assert plain.returncode == 0, plain.stderr
    assert "warning" not in plain.stderr, plain.stderr
