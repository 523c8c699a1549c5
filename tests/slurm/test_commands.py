"""What the Slurm executor reads from Slurm's commands, against the real bed: jobs from
``squeue``'s text (a heterogeneous job's components, a comment, pending and ended jobs) and an
ended job's exit code from ``scontrol show job``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.executors.launches import wait_until
from topoq.executors.slurm.commands import SlurmCommands, gpus_of
from topoq.testbeds.slurm import SlurmBed, reset, run_slurm


@pytest.fixture
def slurm(slurm_bed: SlurmBed) -> Iterator[SlurmCommands]:
    yield SlurmCommands(slurm_bed.slurm_conf)
    reset(slurm_bed)


def submit(bed: SlurmBed, *options: str) -> int:
    out = run_slurm(bed, ["sbatch", "--parsable", "--output=/dev/null", *options]).stdout
    return int(out.strip().split(";")[0])


def test_jobs_read_state_nodes_comment_and_heterogeneous_components(
    slurm_bed: SlurmBed, slurm: SlurmCommands
) -> None:
    het = submit(
        slurm_bed, "--comment=topoq:2:nlp:a|b c", "-w", "n00", "-N1", ":", "-w", "n01", "-N1",
        "--wrap=sleep 30",
    )  # fmt: skip
    wait_until(lambda: {j.state for j in slurm.jobs("topoq") if j.job_id >= het} == {"RUNNING"})
    found = {j.job_id: j for j in slurm.jobs("topoq")}
    leader, second = found[het], found[het + 1]
    assert (leader.het_offset, second.het_offset) == (0, 1)
    assert leader.nodes == ("n00",) and second.nodes == ("n01",)
    assert leader.comment == "topoq:2:nlp:a|b c"  # free text, '|' and spaces kept
    plain = submit(slurm_bed, "-w", "n02", "--wrap=true")
    wait_until(lambda: {j.job_id: j for j in slurm.jobs("topoq")}[plain].state == "COMPLETED")
    done = {j.job_id: j for j in slurm.jobs("topoq")}[plain]
    assert done.comment == "" and done.het_offset == 0 and done.nodes == ("n02",)


@pytest.mark.parametrize(("script", "code"), [("exit 3", 3), ("kill -KILL $$", 137), ("true", 0)])
def test_an_ended_jobs_exit_code_is_what_a_shell_would_say(
    slurm_bed: SlurmBed, slurm: SlurmCommands, script: str, code: int
) -> None:
    job = submit(slurm_bed, "-w", "n03", f"--wrap={script}")
    wait_until(
        lambda: {j.job_id: j for j in slurm.jobs("topoq")}[job].state in {"COMPLETED", "FAILED"}
    )
    assert slurm.exit_code(job) == code


def test_gpus_are_read_from_any_gres_form() -> None:
    assert gpus_of("gpu:8") == 8
    assert gpus_of("gpu:h100:4(S:0-1),gpu:a100:2") == 6
    assert gpus_of("(null)") == 0
