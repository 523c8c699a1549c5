"""Tokens, who am I, the audit log and the policy's versions from the CLI, as an admin types
them, against a real `topoq server` process."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

from tests.cli.test_server_cli import API_TESTS, server, topoq  # noqa: F401 the real server


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def refused(done: subprocess.CompletedProcess[str], code: int, words: str) -> None:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert words in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def as_token(settings: dict[str, str], secret: str) -> dict[str, str]:
    return {"TOPOQ_SERVER": settings["TOPOQ_SERVER"], "TOPOQ_TOKEN": secret}


def test_a_token_is_shown_once_acts_as_its_holder_and_stops_when_revoked(
    server: dict[str, str],  # noqa: F811 the fixture
) -> None:
    created = topoq(server, "token", "create", "alice", "--role", "member", "--team", "nlp")
    secret = ok(created).strip()
    assert created.stdout == secret + "\n"  # the secret alone: `> file` keeps just it
    assert "shown only this once" in created.stderr and secret not in created.stderr
    alice = as_token(server, secret)
    assert ok(topoq(alice, "whoami")) == "alice: member of nlp\n"
    assert json.loads(ok(topoq(alice, "whoami", "-o", "json"))) == {
        "name": "alice",
        "role": "member",
        "teams": ["nlp"],
    }
    refused(topoq(alice, "token", "list"), 4, "error:")  # members do not manage tokens

    listed = ok(topoq(server, "token", "list"))
    assert listed.splitlines()[0].split() == ["NAME", "ROLE", "TEAMS", "CREATED", "REVOKED", "ID"]
    assert any(line.split()[:3] == ["alice", "member", "nlp"] for line in listed.splitlines())
    assert secret not in listed
    as_yaml = yaml.safe_load(ok(topoq(server, "token", "list", "-o", "yaml")))
    assert {t["name"] for t in as_yaml} >= {"admin", "alice"}
    assert all("token" not in t for t in as_yaml)

    assert ok(topoq(server, "token", "revoke", "alice")) == "revoked token alice (member)\n"
    refused(topoq(alice, "whoami"), 4, "error:")
    refused(topoq(server, "token", "revoke", "alice"), 2, "no active token 'alice'")
    revoked = json.loads(ok(topoq(server, "token", "list", "--all", "-o", "json")))
    assert next(t for t in revoked if t["name"] == "alice")["revokedAt"] is not None
    refused(
        topoq(server, "token", "create", "alice", "--role", "member", "--team", "nlp"),
        2,
        "never given twice",
    )
    refused(topoq(server, "token", "create", "bob", "--role", "boss"), 2, "is not a role")
    refused(topoq(server, "token", "create", "bob", "--role", "member"), 2, "at least one team")


def test_the_audit_log_from_the_cli_filters_by_time_and_actor(
    server: dict[str, str],  # noqa: F811 the fixture
) -> None:
    ok(topoq(server, "token", "create", "carol", "--role", "viewer", "--team", "vision"))
    time.sleep(1.1)
    between = datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    time.sleep(0.1)
    ok(topoq(server, "token", "create", "dave", "--role", "viewer", "--team", "vision"))

    table = ok(topoq(server, "audit"))
    assert table.splitlines()[0].split() == ["TIME", "ACTOR", "ACTION", "TARGET", "DETAIL"]
    assert "role=viewer, teams=vision" in table
    entries = json.loads(ok(topoq(server, "audit", "--since", between, "-o", "json")))
    assert [(e["action"], e["target"]) for e in entries] == [("token", "dave")]
    recent = json.loads(ok(topoq(server, "audit", "--since", "1h", "-o", "json")))
    assert {"carol", "dave"} <= {e["target"] for e in recent}
    by_server = json.loads(ok(topoq(server, "audit", "--actor", "topoq", "-o", "json")))
    assert by_server and {e["actor"] for e in by_server} == {"topoq"}  # its start-up entries
    assert json.loads(ok(topoq(server, "audit", "--actor", "nobody", "-o", "json"))) == []
    refused(topoq(server, "audit", "--since", "yesterday"), 2, "a duration or an ISO time")
    refused(topoq(server, "audit", "--since", "2999-01-01"), 2, "in the future")


def test_policy_history_diff_show_and_rollback(
    server: dict[str, str],  # noqa: F811 the fixture
    tmp_path: Path,
) -> None:
    before = yaml.safe_load(ok(topoq(server, "policy", "current")))
    first = len(json.loads(ok(topoq(server, "policy", "history", "-o", "json"))))
    changed = yaml.safe_load((API_TESTS / "policy.yaml").read_text())
    changed["teams"][1]["fairShareWeight"] = 9
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(yaml.safe_dump(changed))
    assert ok(topoq(server, "policy", "apply", policy_file)) == (
        f"policy version {first + 1} is in force\n"
    )
    second = first + 1

    history = ok(topoq(server, "policy", "history")).splitlines()
    assert history[0].split() == ["VERSION", "SET", "BY", "AT", "NOTE"]
    assert history[-1].startswith(f"{second} (in force)")
    diff = ok(topoq(server, "policy", "diff", str(first), str(second)))
    assert f"--- version {first}" in diff and f"+++ version {second}" in diff
    assert "+  fairShareWeight: 9" in diff.replace("- name: vision\n", "")
    assert ok(topoq(server, "policy", "diff", str(second), str(second))) == (
        f"versions {second} and {second} are the same policy\n"
    )
    shown = yaml.safe_load(
        ok(topoq(server, "policy", "show", "--version", str(first), "-o", "yaml"))
    )
    assert shown == before
    assert "vision" in ok(topoq(server, "policy", "show", "--version", str(second)))

    rolled = ok(topoq(server, "policy", "rollback", str(first)))
    assert rolled == f"policy version {second + 1} is in force (the same as version {first})\n"
    assert ok(topoq(server, "policy", "diff", str(first), str(second + 1))).endswith(
        "are the same policy\n"
    )
    assert yaml.safe_load(ok(topoq(server, "policy", "current"))) == before
    teams = json.loads(ok(topoq(server, "teams", "--json")))
    assert {t["name"]: t["fairShareWeight"] for t in teams}["vision"] != 9  # in force again
    assert ok(topoq(server, "policy", "history")).splitlines()[-1].split()[-3:] == [
        "rollback",
        "to",
        str(first),
    ]
    audit = json.loads(ok(topoq(server, "audit", "--limit", "1", "-o", "json")))
    assert audit[0]["target"] == f"version {second + 1}"
    assert audit[0]["detail"] == {"rollbackOf": first}

    refused(topoq(server, "policy", "rollback", "99"), 2, "no policy version 99")
    refused(topoq(server, "policy", "show", "--version", "99"), 2, "no policy version 99")
    refused(topoq(server, "policy", "diff", "1", "99"), 2, "no policy version 99")
    secret = ok(
        topoq(server, "token", "create", "erin", "--role", "member", "--team", "nlp")
    ).strip()
    refused(topoq(as_token(server, secret), "policy", "rollback", str(first)), 4, "error:")
    history_as_member = ok(topoq(as_token(server, secret), "policy", "history"))
    assert history_as_member.splitlines()[-1].split()[-1] == "-"  # no audit log for members
