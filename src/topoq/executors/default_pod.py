"""The workload a pod runs when its job gives no command: it prints where it runs, sleeps,
and exits with the code asked for.

Run as ``python -m topoq.executors.default_pod`` (or by path: it needs only the standard
library). ``TOPOQ_SLEEP_S`` (default 5) is how long it sleeps, ``TOPOQ_EXIT_CODE`` (default 0)
the code it exits with. On SIGTERM it says so, takes ``TOPOQ_STOP_S`` seconds (default 0: a
checkpoint's worth, to try stops and grace periods) and exits with 143 (128 + SIGTERM).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from types import FrameType

DEFAULT_SLEEP_S = 5.0
SIGTERM_EXIT_CODE = 128 + signal.SIGTERM


def describe(environment: dict[str, str]) -> list[str]:
    """The lines the pod prints about itself."""
    rank = environment.get("RANK", "?")
    topology = json.loads(environment.get("TOPOQ_TOPOLOGY") or "{}")
    where = ", ".join(f"{level}={value}" for level, value in topology.items()) or "none"
    return [
        f"job {environment.get('TOPOQ_JOB_ID', '?')} attempt "
        f"{environment.get('TOPOQ_ATTEMPT', '?')} pod set {environment.get('TOPOQ_POD_SET', '?')}",
        f"rank {rank} of world size {environment.get('WORLD_SIZE', '?')} "
        f"(local rank {environment.get('LOCAL_RANK', '?')}, "
        f"node rank {environment.get('NODE_RANK', '?')})",
        f"node {environment.get('TOPOQ_NODE', '?')} of hosts {environment.get('TOPOQ_HOSTS', '?')}",
        f"topology {where}",
        f"CUDA_VISIBLE_DEVICES={environment.get('CUDA_VISIBLE_DEVICES', '')}",
        f"master {environment.get('MASTER_ADDR', '?')}:{environment.get('MASTER_PORT', '?')}",
    ] + ([f"GPU share {share}"] if (share := environment.get("TOPOQ_GPU_SHARE")) else [])


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    print("received SIGTERM, stopping", flush=True)
    time.sleep(float(os.environ.get("TOPOQ_STOP_S") or 0))
    sys.exit(SIGTERM_EXIT_CODE)


def main() -> int:
    environment = dict(os.environ)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    for line in describe(environment):
        print(line, flush=True)
    sleep_s = float(environment.get("TOPOQ_SLEEP_S") or DEFAULT_SLEEP_S)
    exit_code = int(environment.get("TOPOQ_EXIT_CODE") or 0)
    print(f"sleeping {sleep_s:g} s, then exiting with {exit_code}", flush=True)
    time.sleep(sleep_s)
    print("done", flush=True)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
