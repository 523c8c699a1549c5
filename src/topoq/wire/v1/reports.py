"""Usage reports on the wire: GPU-hours per team per UTC day, and per job."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import Field

from topoq.wire.v1.base import WireModel
from topoq.wire.v1.cluster import PolicyVersionModel


class TeamDayUsageModel(WireModel):
    team: str
    day: dt.date = Field(description="The UTC day.")
    gpu_hours_in_guarantee: float = Field(description="GPU-hours inside the team's guarantee.")
    gpu_hours_borrowed: float = Field(
        description="GPU-hours above the guarantee, as booked at admission (borrowed)."
    )
    jobs: int = Field(description="Jobs that held GPUs that day.")
    preemptions: int = Field(description="Preemptions the team's jobs suffered that day.")


class HourUsageModel(WireModel):
    start: float = Field(description="The UTC hour's start, seconds since the epoch.")
    gpu_hours_in_guarantee: float = Field(
        description="GPU-hours inside the guarantees of the teams reported, in that hour."
    )
    gpu_hours_borrowed: float = Field(description="GPU-hours borrowed by them, in that hour.")


class JobUsageModel(WireModel):
    job: str
    team: str
    gpu_hours: float
    gpu_hours_borrowed: float
    wall_time_s: float = Field(description="Seconds the job held GPUs inside the window.")
    attempts: int = Field(description="Admissions whose holding falls inside the window.")


class UsageReportModel(WireModel):
    start: float = Field(description="The window's start, seconds since the epoch (inclusive).")
    end: float = Field(description="The window's end, seconds since the epoch (exclusive).")
    teams: list[str] | None = Field(
        description="The teams reported on; null for every team (admins)."
    )
    days: list[TeamDayUsageModel] = Field(
        description="Per team and UTC day on which it held GPUs or was preempted."
    )
    jobs: list[JobUsageModel] = Field(description="Per job that held GPUs in the window.")
    hours: list[HourUsageModel] = Field(
        default_factory=list,
        description="With `hourly=true`: per UTC hour on which the teams reported held GPUs, "
        "their GPU-hours summed (the GPUs in use over time); empty otherwise.",
    )


class RecordedWindowModel(WireModel):
    """What a server recorded over a window, for ``topoq whatif --server`` (admin): the jobs
    submitted in it and what their admissions booked, as the store keeps them (its own
    documents: ``topoq.store.codec``), the nodes, and the policy versions."""

    since: float
    until: float
    jobs: list[dict[str, Any]] = Field(
        description="Each job submitted in the window, oldest first: its spec (``spec``, the "
        "store's document) and its phase history (``history``: [at, phase, cause])."
    )
    booked: list[dict[str, Any]] = Field(
        description="What each admission in the window booked: job, index in its history "
        "(``seq``) and the allocation (the store's document)."
    )
    held_at_start: list[str] = Field(
        description="Jobs submitted before the window that held GPUs at its start."
    )
    nodes: list[dict[str, Any]] = Field(description="The nodes stored now (the store's documents).")
    policy_versions: list[PolicyVersionModel] = Field(
        description="Every policy version kept, oldest first."
    )
    first_submitted: float | None = Field(
        default=None,
        description="When the window holds no job: when the oldest job the server holds was "
        "submitted.",
    )
    last_submitted: float | None = Field(
        default=None,
        description="When the window holds no job: when the newest job the server holds was "
        "submitted.",
    )
