"""The stages KWOK plays on the bed: KWOK's own (``kwok/stages.yaml`` of the assets), with
pods made ready faster (at most 1 s of jitter per step instead of 5, so that a bound pod runs
within 2–4 s), and pods made by topoq (label ``topoq.io/job``) playing topoq's default
workload as the local executor runs it:

- a running pod whose container sets ``TOPOQ_SLEEP_S`` ends that many seconds later with the
  exit code ``TOPOQ_EXIT_CODE`` (default 0): Succeeded, or Failed with that code;
- a pod being deleted goes away ``TOPOQ_STOP_S`` seconds later (default 1: the time the
  workload takes to stop on SIGTERM), unless deleted with no grace at all (a kill).

Other pods keep KWOK's behaviour (a pod owned by a Job completes after its
``pod-complete.stage.kwok.x-k8s.io/delay``; others run until deleted).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

TOPOQ_POD = '.metadata.labels["topoq.io/job"]'
FAILED_ON_DEMAND = '.metadata.labels["pod-container-running-failed.stage.kwok.x-k8s.io"]'
"""KWOK's own way to make a running pod fail: such a pod is left to that stage."""
FAST_JITTER_MS = 1000
QUICKER_STAGES = ("pod-create", "pod-ready")


def _env(name: str) -> str:
    return f'.spec.containers.[0].env.[] | select( .name == "{name}" ) | .value'


TOPOQ_STAGES: list[dict[str, Any]] = [
    {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "topoq-pod-exit"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                    {"key": TOPOQ_POD, "operator": "Exists"},
                    {"key": _env("TOPOQ_SLEEP_S"), "operator": "Exists"},
                    {"key": FAILED_ON_DEMAND, "operator": "DoesNotExist"},
                ]
            },
            "weight": 100,
            "delay": {
                "durationMilliseconds": 5000,
                "durationFrom": {"expressionFrom": f'({_env("TOPOQ_SLEEP_S")}) + "s"'},
            },
            "next": {
                "delete": False,
                "statusTemplate": """{{ $now := Now }}
{{ $code := "0" }}
{{ range (index .spec.containers 0).env }}
{{ if eq .name "TOPOQ_EXIT_CODE" }}{{ $code = .value }}{{ end }}
{{ end }}
containerStatuses:
{{ range $index, $item := .spec.containers }}
- image: {{ $item.image | Quote }}
  name: {{ $item.name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: {{ $code }}
      finishedAt: {{ $now | Quote }}
      reason: {{ if eq $code "0" }}Completed{{ else }}Error{{ end }}
      startedAt: {{ $now | Quote }}
{{ end }}
phase: {{ if eq $code "0" }}Succeeded{{ else }}Failed{{ end }}
""",
            },
        },
    },
    {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "topoq-pod-delete"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
                    {"key": ".metadata.finalizers", "operator": "DoesNotExist"},
                    {"key": TOPOQ_POD, "operator": "Exists"},
                ]
            },
            "weight": 1,
            "delay": {
                "durationMilliseconds": 1000,
                "durationFrom": {"expressionFrom": f'({_env("TOPOQ_STOP_S")}) + "s"'},
            },
            "next": {"delete": True},
        },
    },
]


def bed_stages(assets: Path) -> str:
    """The stage documents KWOK runs with on the bed."""
    stages = [d for d in yaml.safe_load_all((assets / "kwok" / "stages.yaml").read_text()) if d]
    for stage in stages:
        name = stage["metadata"]["name"]
        delay = stage["spec"].get("delay") or {}
        if name in QUICKER_STAGES and "jitterDurationMilliseconds" in delay:
            delay["jitterDurationMilliseconds"] = FAST_JITTER_MS
        if name == "pod-delete":  # topoq's pods stop as their workload says
            stage["spec"]["selector"]["matchExpressions"].append(
                {"key": TOPOQ_POD, "operator": "DoesNotExist"}
            )
    return yaml.safe_dump_all([*stages, *TOPOQ_STAGES], sort_keys=False)
