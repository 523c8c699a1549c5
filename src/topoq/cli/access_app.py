"""Typer definitions of who may do what and what was done: ``topoq token create|list|revoke``,
``topoq whoami`` and ``topoq audit``. Every verb takes ``-o/--output table|json|yaml``; a
token's secret goes to standard output alone, so that ``topoq token create … > file`` keeps
it and nothing else."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from topoq.cli.common import ServerOption, TokenOption
from topoq.cli.output import Output, OutputOption, print_as, table_of, utc

ROLES = ("admin", "team-admin", "member", "viewer")


def register(app: typer.Typer) -> None:
    """Add ``token``, ``whoami`` and ``audit`` to the CLI."""
    _register_tokens(app)
    _register_records(app)


def _register_tokens(app: typer.Typer) -> None:
    token_app = typer.Typer(
        help="API tokens: create one (its secret shown once), list them, revoke one.",
        no_args_is_help=True,
    )
    app.add_typer(token_app, name="token")

    @token_app.command("create")
    def token_create(
        name: Annotated[
            str,
            typer.Argument(help="Who holds it: its actions are recorded under this name."),
        ],
        role: Annotated[
            str,
            typer.Option(help=f"One of {', '.join(ROLES)}.", show_default=False),
        ],
        team: Annotated[
            list[str] | None,
            typer.Option(
                "--team",
                help="A team it acts for (repeat for several; needed but for admin tokens).",
                show_default=False,
            ),
        ] = None,
        output: OutputOption = Output.TABLE,
        server: ServerOption = None,
        token: TokenOption = None,
    ) -> None:
        """Create an API token. Its secret is printed once, on standard output alone; keep it
        (only a hash of it is stored)."""
        from topoq.cli.common import fail
        from topoq.cli.server_commands import connected

        if role not in ROLES:
            fail(f"--role: {role!r} is not a role (choose {', '.join(ROLES)})")
        with connected(server, token) as client:
            created = client.create_token(name, role, list(team or ()))
        if output is not Output.TABLE:
            print_as(output, created, None)
            return
        teams = f" of {', '.join(created.teams)}" if created.teams else ""
        typer.echo(
            f"created token {created.name} ({created.role.value}{teams}); its secret, shown "
            "only this once:",
            err=True,
        )
        print(created.token, flush=True)

    @token_app.command("list")
    def token_list(
        include_revoked: Annotated[bool, typer.Option("--all", help="Revoked tokens too.")] = False,
        output: OutputOption = Output.TABLE,
        server: ServerOption = None,
        token: TokenOption = None,
    ) -> None:
        """API tokens, without their secrets (admins: every one; team admins: their teams'
        member and viewer tokens)."""
        from topoq.cli.server_commands import connected

        with connected(server, token) as client:
            found = client.tokens(include_revoked=include_revoked)
        rows = [
            (
                t.name,
                t.role.value,
                ", ".join(t.teams) or "-",
                utc(t.created_at),
                utc(t.revoked_at),
                t.id,
            )
            for t in found
        ]
        columns = ("NAME", "ROLE", "TEAMS", "CREATED", "REVOKED", "ID")
        print_as(output, found, lambda: table_of(columns, rows))

    @token_app.command("revoke")
    def token_revoke(
        name: Annotated[str, typer.Argument(help="The token's name (or its id).")],
        output: OutputOption = Output.TABLE,
        server: ServerOption = None,
        token: TokenOption = None,
    ) -> None:
        """Revoke an API token at once: requests with it are refused from now on."""
        from topoq.cli.common import fail
        from topoq.cli.server_commands import connected

        with connected(server, token) as client:
            active = client.tokens()
            chosen = next((t for t in active if name in (t.name, t.id)), None)
            if chosen is None:
                fail(
                    f"no active token {name!r} that you manage "
                    "(topoq token list shows them; revoked ones with --all)"
                )
            revoked = client.revoke_token(chosen.id)
        if output is Output.TABLE:
            typer.echo(f"revoked token {revoked.name} ({revoked.role.value})")
        else:
            print_as(output, revoked, None)


def _register_records(app: typer.Typer) -> None:
    @app.command()
    def whoami(
        output: OutputOption = Output.TABLE,
        server: ServerOption = None,
        token: TokenOption = None,
    ) -> None:
        """Who the token in use is: its name, role and teams."""
        from topoq.cli.server_commands import connected

        with connected(server, token) as client:
            found = client.whoami()
        if output is Output.TABLE:
            teams = f" of {', '.join(found.teams)}" if found.teams else ""
            typer.echo(f"{found.name}: {found.role.value}{teams}")
        else:
            print_as(output, found, None)

    @app.command()
    def audit(
        since: Annotated[
            str | None,
            typer.Option(
                help="Only entries since then: a duration back from now (30m, 2h, 1d) or an "
                "ISO time (2026-12-01T09:00:00Z).",
                show_default=False,
            ),
        ] = None,
        actor: Annotated[
            str | None,
            typer.Option(help="Only entries by this token name.", show_default=False),
        ] = None,
        limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many.")] = 50,
        output: OutputOption = Output.TABLE,
        server: ServerOption = None,
        token: TokenOption = None,
    ) -> None:
        """The audit log, newest first: who changed what (admins only)."""
        import time

        from topoq.cli.common import guarded
        from topoq.cli.server_commands import connected
        from topoq.domain.durations import moment_since

        def run() -> None:
            now = time.time()
            back = None if since is None else now - moment_since(since, now, where="--since")
            with connected(server, token) as client:
                found = client.audit(limit, since_s=back, actor=actor)
            rows = [(utc(e.at), e.actor, e.action, e.target, _detail(e.detail)) for e in found]
            columns = ("TIME", "ACTOR", "ACTION", "TARGET", "DETAIL")
            print_as(output, found, lambda: table_of(columns, rows))

        guarded(run)


def _detail(detail: dict[str, Any]) -> str:
    """``key=value, …``; a list as its items joined by commas."""
    return (
        ", ".join(
            f"{key}={','.join(map(str, value)) if isinstance(value, list) else value}"
            for key, value in detail.items()
        )
        or "-"
    )
