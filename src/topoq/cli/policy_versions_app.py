"""Typer definitions of the server's policy versions: ``topoq policy history``, ``topoq policy
diff N M`` and ``topoq policy rollback N`` (``topoq policy show --version N`` is in
:mod:`topoq.cli.app` beside the offline ``policy show``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from topoq.cli.common import ServerOption, TokenOption
from topoq.cli.output import Output, OutputOption, print_as, table_of, utc

if TYPE_CHECKING:
    from topoq.client.http import TopoqClient

VersionArgument = Annotated[int, typer.Argument(min=1, help="A policy version number.")]


def register(policy_app: typer.Typer) -> None:
    @policy_app.command("history")
    def policy_history(
        output: OutputOption = Output.TABLE,
        server: ServerOption = None,
        token: TokenOption = None,
    ) -> None:
        """Every policy version the server kept, oldest first: who set it and when."""
        from topoq.cli.server_commands import connected

        with connected(server, token) as client:
            found = client.policy_versions()
            audit = _rollbacks(client)
        newest = found[-1].version if found else None
        rows = [
            (
                str(v.version) + (" (in force)" if v.version == newest else ""),
                v.actor,
                utc(v.at),
                f"rollback to {audit[v.version]}" if v.version in audit else "-",
            )
            for v in found
        ]
        if output is Output.TABLE and not found:
            typer.echo("no policy was set yet: topoq policy apply FILE sets one", err=True)
            return
        print_as(output, found, lambda: table_of(("VERSION", "SET BY", "AT", "NOTE"), rows))

    @policy_app.command("diff")
    def policy_diff(
        first: VersionArgument,
        second: VersionArgument,
        server: ServerOption = None,
        token: TokenOption = None,
    ) -> None:
        """What changed from policy version FIRST to SECOND, as a unified diff of the policy
        files (YAML)."""
        import difflib

        from topoq.cli.policy_commands import yaml_text
        from topoq.cli.server_commands import connected

        with connected(server, token) as client:
            before = client.policy_version(first).document
            after = client.policy_version(second).document
        lines = difflib.unified_diff(
            yaml_text(before).splitlines(keepends=True),
            yaml_text(after).splitlines(keepends=True),
            fromfile=f"version {first}",
            tofile=f"version {second}",
        )
        text = "".join(lines)
        if text:
            print(text, end="")
        else:
            typer.echo(f"versions {first} and {second} are the same policy")

    @policy_app.command("rollback")
    def policy_rollback(
        version: VersionArgument,
        output: OutputOption = Output.TABLE,
        server: ServerOption = None,
        token: TokenOption = None,
    ) -> None:
        """Make a kept version the server's policy again, as a new version equal to it
        (audited; admins only)."""
        from topoq.cli.server_commands import connected

        with connected(server, token) as client:
            applied = client.rollback_policy(version)
        if output is Output.TABLE:
            typer.echo(
                f"policy version {applied.version} is in force (the same as version {version})"
            )
        else:
            print_as(output, applied, None)


def _rollbacks(client: TopoqClient) -> dict[int, int]:
    """Which versions were rollbacks, and to what (from the audit log, for admins; nothing
    for others, who may not read it)."""
    from topoq.client.http import ClientError

    try:
        entries = client.audit(1000)
    except ClientError:
        return {}
    found = {}
    for entry in entries:
        restored = entry.detail.get("rollbackOf")
        if entry.action == "policy" and isinstance(restored, int):
            number = entry.target.removeprefix("version ")
            if number.isdigit():
                found[int(number)] = restored
    return found
