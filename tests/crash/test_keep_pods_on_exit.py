"""An upgrade without stopping the work: ``--keep-pods-on-exit`` makes a clean stop (SIGTERM)
of a real server leave its running pods running, and the next server on the same data
directory adopts them — same processes, same attempt — and sees them end. Without the flag a
clean stop still stops every pod."""

from __future__ import annotations

from pathlib import Path

from tests.crash.harness import ServerProcess, live_pods
from tests.crash.test_control_plane_races import api
from tests.crash.test_restart_adoption import phase, pods_by_job, submit, wait_until

SIGTERM_EXIT = 128 + 15


def stop_cleanly(server: ServerProcess) -> str:
    """SIGTERM, as a service manager stops it; its log of that start."""
    assert server.process is not None
    server.process.terminate()
    assert server.process.wait(timeout=30) == SIGTERM_EXIT
    return (server.data_dir / f"server-{server.starts}.log").read_text(errors="replace")


def test_a_clean_stop_with_the_flag_leaves_the_pods_to_the_next_server(
    server: ServerProcess, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    waits = ["/bin/sh", "-c", f"while [ ! -e {go} ]; do sleep 0.2; done; echo done; exit 0"]
    server.options = ("--keep-pods-on-exit",)
    server.start()
    with api(server) as client:
        submit(client, "kept", "nlp", waits)
        wait_until(lambda: phase(client, "kept") == ("running", 1), "it runs")
        before = wait_until(lambda: pods_by_job(server).get("kept"), "its pods are up")

    log = stop_cleanly(server)
    assert "pods_kept=true" in log, log
    assert pods_by_job(server).get("kept") == before, "a clean stop stopped the pods"

    server.start()
    with api(server) as client:
        assert phase(client, "kept") == ("running", 1)
        assert pods_by_job(server)["kept"] == before, "its pods were replaced"
        go.touch()
        wait_until(lambda: phase(client, "kept")[0] == "succeeded", "it ends")
        assert phase(client, "kept") == ("succeeded", 1)
        steps = client.get("/jobs/kept/history").json()["history"]
        assert [step["phase"] for step in steps] == ["pending", "admitted", "running", "succeeded"]
        assert "done" in client.get("/jobs/kept/logs").json()["text"]


def test_a_clean_stop_without_the_flag_stops_every_pod(server: ServerProcess) -> None:
    server.start()
    with api(server) as client:
        submit(client, "stopped", "nlp", ["/bin/sh", "-c", "sleep 600"])
        wait_until(lambda: phase(client, "stopped") == ("running", 1), "it runs")
        wait_until(lambda: pods_by_job(server).get("stopped"), "its pods are up")
    log = stop_cleanly(server)
    assert "pods_kept=false" in log, log
    assert not live_pods(server.run_id), "a pod outlived a clean stop"
