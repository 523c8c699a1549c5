"""A pod's keeper: the process the local executor spawns for each pod, which runs the pod's
command as its child and writes the command's exit code to a file, so that the code is known
even when the control plane that started the pod died meanwhile (a process can only wait for
its own children; an executor that adopts a pod after a restart reads the file instead).

    python -I -S pod_keeper.py EXIT_FILE -- COMMAND [ARG ...]

The command's environment comes as one JSON object on standard input (so that it is never
written to disk; the keeper's own environment holds only the pod's ``TOPOQ_POD`` marker, which
is how a later executor knows the keeper for its own). The command runs in the keeper's
process group and session, with the keeper's working directory, standard output and error
(the pod's log) and no standard input. Signals sent to the group (how the executor stops a
pod) reach the command directly; the keeper outlives them, waits for the command, writes its
exit code as a shell reports it (128 + N for signal N) to ``EXIT_FILE`` (atomically, mode
0600) and exits with it. A command that cannot run exits 127 (not found) or 126 (not
runnable), with a line saying why in the pod's log. Standard library only: it runs by path
with ``-I -S`` and starts in a few milliseconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

NOT_FOUND_EXIT_CODE = 127
NOT_RUNNABLE_EXIT_CODE = 126
SIGNAL_EXIT_BASE = 128
USAGE_EXIT_CODE = 2
KEPT_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def record(exit_file: str, code: int) -> None:
    """Write ``code`` to ``exit_file`` so that a reader sees the whole file or none."""
    partial = f"{exit_file}.partial"
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(json.dumps({"exit_code": code}) + "\n")
    os.replace(partial, exit_file)


def main(arguments: list[str]) -> int:
    if len(arguments) < 3 or arguments[1] != "--":
        print("usage: pod_keeper.py EXIT_FILE -- COMMAND [ARG ...]", file=sys.stderr)
        return USAGE_EXIT_CODE
    exit_file, command = arguments[0], arguments[2:]
    environment = json.loads(sys.stdin.buffer.read() or b"{}")
    sys.stdin.close()
    for signum in KEPT_SIGNALS:  # the group's signals are for the command; it decides
        signal.signal(signum, lambda *_: None)
    try:
        child = subprocess.Popen(
            command, env=environment, stdin=subprocess.DEVNULL, restore_signals=True
        )
    except OSError as error:
        code = (
            NOT_FOUND_EXIT_CODE if isinstance(error, FileNotFoundError) else NOT_RUNNABLE_EXIT_CODE
        )
        print(f"the pod's command could not start: {error}", file=sys.stderr, flush=True)
        record(exit_file, code)
        return code
    while True:
        try:
            returncode = child.wait()
            break
        except InterruptedError:  # pragma: no cover - wait retries by itself (PEP 475)
            continue
    code = SIGNAL_EXIT_BASE - returncode if returncode < 0 else returncode
    record(exit_file, code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
