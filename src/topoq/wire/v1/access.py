"""Roles, API tokens and who a token speaks for."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from topoq.wire.v1.base import WireModel


class Role(StrEnum):
    ADMIN = "admin"
    """Everything: policy, quotas, nodes, tokens, every team's jobs."""
    TEAM_ADMIN = "team-admin"
    """Its teams' jobs, and tokens for its teams' members and viewers."""
    MEMBER = "member"
    """Submit to, see, hold, release and cancel jobs of its own teams."""
    VIEWER = "viewer"
    """Read only: the cluster's aggregate view and its teams' jobs."""


class WhoAmI(WireModel):
    name: str
    role: Role
    teams: list[str] = Field(description="The teams the token acts for (empty for admins).")


class TokenRequest(WireModel):
    name: str = Field(
        min_length=1,
        max_length=200,
        description="Who or what holds the token; its actions are recorded under this name. "
        "A DNS-1123 label no token has had (revoked ones included), not a reserved one "
        "(topoq, system, admin, root, topoq-…, system-…, admin-…).",
    )
    role: Role
    teams: list[str] = Field(default_factory=list, description="Teams it acts for.")


class TokenCreated(WireModel):
    name: str
    role: Role
    teams: list[str]
    token: str = Field(description="The bearer token. Shown once; only its hash is stored.")


class TokenModel(WireModel):
    id: str
    name: str
    role: Role
    teams: list[str]
    created_at: float
    revoked_at: float | None = None
