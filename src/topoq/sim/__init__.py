"""Scenario simulation: the server's controller on a virtual clock, with an in-memory store
and a simulated executor.

``run_scenario(path)`` reads a scenario file (:mod:`topoq.sim.scenario`), runs it through the
controller (:mod:`topoq.sim.engine`, :mod:`topoq.sim.controlled`) and returns the decision
log (:mod:`topoq.sim.log`) and the summary per team (:mod:`topoq.sim.summary`).
"""

from __future__ import annotations

from topoq.sim.engine import LeftPending, Simulation, SimulationResult, run_scenario
from topoq.sim.log import Decision, LogEntry, json_lines
from topoq.sim.scenario import Scenario, load_scenario
from topoq.sim.summary import Summary, TeamSummary, WaitStats, summarize

__all__ = [
    "Decision",
    "LeftPending",
    "LogEntry",
    "Scenario",
    "Simulation",
    "SimulationResult",
    "Summary",
    "TeamSummary",
    "WaitStats",
    "json_lines",
    "load_scenario",
    "run_scenario",
    "summarize",
]
