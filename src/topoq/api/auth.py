"""Bearer API tokens and what each role may do.

Every route needs a token (401 without one or with an unknown one) except ``/healthz``,
``/metrics`` (figures per team at most) and the API's documentation (``/openapi.json``,
``/docs``, ``/redoc``); tests/api/test_roles.py fails on any other open route. A route
names the roles it admits (``allow``); routes about one job also check the job's team
(``require_team``): an admin acts for every team, everyone else only for the teams of their
token. Jobs of other teams appear in lists with id, team, phase and GPUs only. A principal's
name is its token's, unique for all time (``topoq.domain.identity``): what the audit log
records as the actor.

The dependencies here are ``async``: they do no I/O (a token the store has verified lately is
answered from its memory; only other tokens go to the database, in the thread pool), so a
request makes one trip to the thread pool, for its route, not one per dependency.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from topoq.api.access_log import PRINCIPAL_STATE
from topoq.api.errors import ApiError
from topoq.api.service import Service
from topoq.store.records import TokenRecord
from topoq.wire.v1 import Role

ALL_ROLES = frozenset(Role)
JOB_WRITERS = frozenset({Role.ADMIN, Role.TEAM_ADMIN, Role.MEMBER})
TOKEN_ISSUERS = frozenset({Role.ADMIN, Role.TEAM_ADMIN})
ADMINS = frozenset({Role.ADMIN})

_bearer = HTTPBearer(auto_error=False, description="An API token: `Authorization: Bearer …`.")


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: the token's name, role and teams."""

    name: str
    role: Role
    teams: frozenset[str]

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN

    def acts_for(self, team: str) -> bool:
        return self.is_admin or team in self.teams

    @classmethod
    def of(cls, record: TokenRecord) -> Principal:
        return cls(record.name, Role(record.role), frozenset(record.teams))


def service_of(request: Request) -> Service:
    service = request.app.state.service
    if not isinstance(service, Service):  # create_app always sets it
        raise ApiError(500, "the API was built without a service")
    return service


async def service_dependency(request: Request) -> Service:
    return service_of(request)


async def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None or not credentials.credentials:
        raise ApiError(
            401,
            "no API token",
            hint="send `Authorization: Bearer <token>`; an admin's first token is in the "
            "server's data directory (admin-token)",
            headers=challenge,
        )
    store, secret = service_of(request).store, credentials.credentials
    record = store.cached_token(secret)
    if record is None:
        record = await run_in_threadpool(store.token_for, secret)
    if record is None or not record.active:
        raise ApiError(
            401, "the API token is not valid", hint="ask an admin for a token", headers=challenge
        )
    request.scope.setdefault("state", {})[PRINCIPAL_STATE] = record.name  # the access log's
    return Principal.of(record)


def allow(*roles: Role) -> Callable[..., Awaitable[Principal]]:
    """A dependency that admits only ``roles`` (403 naming the roles that may)."""
    admitted = frozenset(roles)

    async def check(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        if principal.role not in admitted:
            raise ApiError(
                403,
                f"role {principal.role.value} may not do this",
                hint=f"it needs one of: {', '.join(sorted(role.value for role in admitted))}",
            )
        return principal

    return check


def require_team(principal: Principal, team: str, action: str) -> None:
    """403 unless the principal acts for ``team``."""
    if principal.acts_for(team):
        return
    mine = ", ".join(sorted(principal.teams)) or "none"
    raise ApiError(
        403,
        f"{principal.name} may not {action} team {team}'s jobs",
        hint=f"the token acts for teams: {mine}",
    )


Anyone = Annotated[Principal, Depends(allow(*Role))]
JobWriter = Annotated[Principal, Depends(allow(*JOB_WRITERS))]
TokenIssuer = Annotated[Principal, Depends(allow(*TOKEN_ISSUERS))]
Admin = Annotated[Principal, Depends(allow(*ADMINS))]
ServiceDep = Annotated[Service, Depends(service_dependency)]
