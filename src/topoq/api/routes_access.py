"""Access: who a token is, and tokens for others (admins: any; team admins: member and
viewer tokens of their own teams).

A token's name is who its actions are recorded as (audit log, a job's ``user``): a DNS-1123
label that no token has had before and that the control plane does not use for itself
(``topoq.domain.identity``)."""

from __future__ import annotations

from fastapi import APIRouter

from topoq.api.auth import Anyone, Principal, ServiceDep, TokenIssuer
from topoq.api.errors import ApiError
from topoq.api.request_body import StrictJsonRoute
from topoq.domain.identity import check_issuable_token_name
from topoq.engine.ports import AuditEntry
from topoq.store.errors import DuplicateToken
from topoq.store.records import TokenRecord
from topoq.wire.v1 import Role, TokenCreated, TokenModel, TokenRequest, WhoAmI

router = APIRouter(tags=["access"], route_class=StrictJsonRoute)

MANAGED_BY_TEAM_ADMINS = (Role.MEMBER, Role.VIEWER)


@router.get("/whoami", summary="The token's name, role and teams")
def whoami(principal: Anyone) -> WhoAmI:
    return WhoAmI(name=principal.name, role=principal.role, teams=sorted(principal.teams))


@router.post("/tokens", status_code=201, summary="Create an API token")
def create_token(body: TokenRequest, principal: TokenIssuer, service: ServiceDep) -> TokenCreated:
    """Admins create any token; team admins create member and viewer tokens for their own
    teams. The token is shown once. The name is a DNS-1123 label that no token, revoked ones
    included, has had (409), and not one the control plane uses (422)."""
    check_issuable_token_name(body.name, where="body.name")
    _check_token_request(body, principal)
    try:
        plaintext, record = service.store.create_token(body.name, body.role.value, body.teams)
    except DuplicateToken as error:
        raise ApiError(
            409,
            str(error),
            where="body.name",
            hint="token names are never given twice, revoked tokens' included, so that the "
            "audit log names one token: choose another name",
        ) from None
    detail = {"role": body.role.value, "teams": list(body.teams)}
    service.store.audit(AuditEntry(service.clock(), principal.name, "token", record.name, detail))
    return TokenCreated(
        name=record.name, role=Role(record.role), teams=list(record.teams), token=plaintext
    )


def _check_token_request(body: TokenRequest, principal: Principal) -> None:
    if body.role is not Role.ADMIN and not body.teams:
        raise ApiError(
            422,
            f"a {body.role.value} token needs at least one team",
            where="teams",
            hint="list the teams it acts for",
        )
    if principal.is_admin:
        return
    if body.role not in MANAGED_BY_TEAM_ADMINS:
        raise ApiError(
            403,
            f"a team admin may not create {body.role.value} tokens",
            where="role",
            hint="team admins create member and viewer tokens; ask an admin for others",
        )
    foreign = sorted(set(body.teams) - principal.teams)
    if foreign:
        raise ApiError(
            403,
            f"{principal.name} does not act for team {foreign[0]}",
            where="teams",
            hint=f"the token acts for teams: {', '.join(sorted(principal.teams))}",
        )


@router.get("/tokens", summary="API tokens (without their secrets)")
def list_tokens(
    principal: TokenIssuer, service: ServiceDep, include_revoked: bool = False
) -> list[TokenModel]:
    """Admins see every token; team admins the member and viewer tokens of their teams."""
    records = service.store.tokens(include_revoked=include_revoked)
    return [_token_model(r) for r in records if _manages(principal, r)]


@router.post("/tokens/{token_id}/revoke", summary="Revoke an API token at once")
def revoke_token(token_id: str, principal: TokenIssuer, service: ServiceDep) -> TokenModel:
    found = next((r for r in service.store.tokens() if r.id == token_id), None)
    if found is None or not _manages(principal, found):
        raise ApiError(404, f"no active token {token_id!r} that you manage", where="token_id")
    record = service.store.revoke_token(token_id, now=service.clock())
    service.store.audit(AuditEntry(service.clock(), principal.name, "revoke", record.name))
    return _token_model(record)


def _manages(principal: Principal, record: TokenRecord) -> bool:
    if principal.is_admin:
        return True
    return (
        record.role in MANAGED_BY_TEAM_ADMINS
        and bool(record.teams)
        and set(record.teams) <= principal.teams
    )


def _token_model(record: TokenRecord) -> TokenModel:
    return TokenModel(
        id=record.id,
        name=record.name,
        role=Role(record.role),
        teams=list(record.teams),
        created_at=record.created_at,
        revoked_at=record.revoked_at,
    )
