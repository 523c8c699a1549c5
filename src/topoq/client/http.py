"""``TopoqClient``: one method per API route, returning wire models; errors as ``ClientError``
with the server's message, field and hint."""

from __future__ import annotations

import json
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

from topoq.domain.errors import InvalidInputError, TopoqError
from topoq.wire.v1 import (
    Explanation,
    JobDetail,
    JobHistory,
    JobList,
    JobLogs,
    SubmitJobRequest,
)
from topoq.wire.v1.access import TokenCreated, TokenModel, WhoAmI
from topoq.wire.v1.cluster import (
    AuditEntryModel,
    EventModel,
    Health,
    NodeAction,
    NodeModel,
    PolicyModel,
    PolicyVersionModel,
    TeamModel,
    TopologyModel,
)
from topoq.wire.v1.inventory import ClusterApplyRequest, ClusterApplyResult
from topoq.wire.v1.reports import UsageReportModel

Model = TypeVar("Model")
API = "/api/v1"


class ClientError(TopoqError):
    """A request that failed: ``status`` is the HTTP status (None when the server could not be
    reached); the message carries the server's explanation."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        where: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.status, self.where, self.hint = status, where, hint
        text = f"{where}: {message}" if where else message
        super().__init__(f"{text} ({hint})" if hint else text)


class TopoqClient:
    def __init__(
        self,
        server: str,
        token: str | None,
        *,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.server = server.rstrip("/")
        try:
            self._http = httpx.Client(
                base_url=self.server, headers=headers, timeout=timeout_s, transport=transport
            )
        except (httpx.InvalidURL, ValueError) as error:  # a token that cannot be a header, too
            raise InvalidInputError(
                f"cannot talk to {self.server}: {error}",
                hint="check --server / TOPOQ_SERVER and the token",
            ) from None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> TopoqClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- jobs -------------------------------------------------------------------------
    def submit(self, request: SubmitJobRequest) -> JobDetail:
        body = request.model_dump(mode="json", exclude_none=True)
        return self._call("POST", "/jobs", JobDetail, json=body)

    def jobs(self, **filters: str | int | None) -> JobList:
        params = {key: value for key, value in filters.items() if value is not None}
        return self._call("GET", "/jobs", JobList, params=params)

    def job(self, job_id: str) -> JobDetail:
        return self._call("GET", f"/jobs/{segment(job_id)}", JobDetail)

    def cancel(self, job_id: str) -> JobDetail:
        return self._call("POST", f"/jobs/{segment(job_id)}/cancel", JobDetail)

    def hold(self, job_id: str) -> JobDetail:
        return self._call("POST", f"/jobs/{segment(job_id)}/hold", JobDetail)

    def release(self, job_id: str) -> JobDetail:
        return self._call("POST", f"/jobs/{segment(job_id)}/release", JobDetail)

    def explain(self, job_id: str, *, fresh: bool = False) -> Explanation:
        """Why the job waits: as the latest cycle left it, or ``fresh``: as it is now."""
        params = {"fresh": "true"} if fresh else None
        return self._call("GET", f"/jobs/{segment(job_id)}/explain", Explanation, params=params)

    def history(self, job_id: str) -> JobHistory:
        return self._call("GET", f"/jobs/{segment(job_id)}/history", JobHistory)

    def logs(
        self,
        job_id: str,
        pod: int | None = None,
        *,
        tail_bytes: int | None = None,
        offset: int | None = None,
        limit_bytes: int | None = None,
        attempt: int | None = None,
        tail_lines: int | None = None,
        since: str | None = None,
    ) -> JobLogs:
        """The tail of an attempt's output (the newest's by default; every pod's or one pod's,
        in bytes or ``tail_lines``), one pod's from the stream offset ``offset`` on, or what
        was written ``since`` a duration before now (``10m``) or an ISO time; the server caps
        each read (``truncated`` says it cut)."""
        asked = {
            "pod": pod,
            "tail_bytes": tail_bytes,
            "offset": offset,
            "limit_bytes": limit_bytes,
            "attempt": attempt,
            "tail_lines": tail_lines,
            "since": since,
        }
        params = {name: value for name, value in asked.items() if value is not None}
        return self._call("GET", f"/jobs/{segment(job_id)}/logs", JobLogs, params=params)

    # --- cluster ----------------------------------------------------------------------
    def teams(self) -> list[TeamModel]:
        return self._call("GET", "/teams", list[TeamModel])

    def policy(self) -> PolicyModel:
        return self._call("GET", "/policy", PolicyModel)

    def apply_policy(self, document: dict[str, Any]) -> PolicyModel:
        return self._call("PUT", "/policy", PolicyModel, json=document)

    def policy_versions(self) -> list[PolicyVersionModel]:
        return self._call("GET", "/policy/versions", list[PolicyVersionModel])

    def policy_version(self, version: int) -> PolicyModel:
        return self._call("GET", f"/policy/versions/{int(version)}", PolicyModel)

    def rollback_policy(self, version: int) -> PolicyModel:
        return self._call("POST", f"/policy/versions/{int(version)}/rollback", PolicyModel)

    def nodes(self) -> list[NodeModel]:
        return self._call("GET", "/nodes", list[NodeModel])

    def node_action(self, name: str, action: str) -> NodeAction:
        return self._call("POST", f"/nodes/{segment(name)}/{segment(action)}", NodeAction)

    def topology(self) -> TopologyModel:
        return self._call("GET", "/topology", TopologyModel)

    def events(self, limit: int = 50) -> list[EventModel]:
        return self._call("GET", "/events", list[EventModel], params={"limit": limit})

    def audit(
        self, limit: int = 50, *, since_s: float | None = None, actor: str | None = None
    ) -> list[AuditEntryModel]:
        chosen = {"limit": limit, "since_s": since_s, "actor": actor}
        params = {key: value for key, value in chosen.items() if value is not None}
        return self._call("GET", "/audit", list[AuditEntryModel], params=params)

    # --- reports ----------------------------------------------------------------------
    def usage_report(
        self, start: str | None = None, end: str | None = None, team: str | None = None
    ) -> UsageReportModel:
        """GPU-hours per team per UTC day and per job over ``[start, end)`` (ISO dates or
        times, or seconds since the epoch; default: the last 7 days)."""
        chosen = {"from": start, "to": end, "team": team}
        params = {key: value for key, value in chosen.items() if value is not None}
        return self._call("GET", "/reports/usage", UsageReportModel, params=params)

    def whoami(self) -> WhoAmI:
        return self._call("GET", "/whoami", WhoAmI)

    # --- tokens -----------------------------------------------------------------------
    def create_token(self, name: str, role: str, teams: list[str]) -> TokenCreated:
        body = {"name": name, "role": role, "teams": teams}
        return self._call("POST", "/tokens", TokenCreated, json=body)

    def tokens(self, *, include_revoked: bool = False) -> list[TokenModel]:
        params = {"include_revoked": "true"} if include_revoked else {}
        return self._call("GET", "/tokens", list[TokenModel], params=params)

    def revoke_token(self, token_id: str) -> TokenModel:
        return self._call("POST", f"/tokens/{segment(token_id)}/revoke", TokenModel)

    def health(self) -> Health:
        return self._call("GET", "/healthz", Health, prefix="")

    def apply_cluster(
        self, document: dict[str, Any], *, drain: bool = False, dry_run: bool = False
    ) -> ClusterApplyResult:
        """Make a topoq cluster file (as a document) the inventory (admins)."""
        body = ClusterApplyRequest(document=document, drain=drain, dry_run=dry_run)
        return self._call(
            "POST", "/cluster/apply", ClusterApplyResult, json=body.model_dump(mode="json")
        )

    # --- plumbing ---------------------------------------------------------------------
    def _call(
        self, method: str, path: str, model: type[Model] | Any, *, prefix: str = API, **options: Any
    ) -> Model:
        try:
            response = self._http.request(method, prefix + path, **options)
        except httpx.HTTPError as error:  # cannot connect, timed out, too many redirects, …
            raise ClientError(
                f"cannot reach the topoq server at {self.server}: {error}",
                hint="start it with `topoq server`, or point --server / TOPOQ_SERVER at it",
            ) from None
        if response.is_error:
            raise _error(response)
        try:
            payload = response.json()
            if isinstance(model, type) and issubclass(model, BaseModel):
                return model.model_validate(payload)  # type: ignore[return-value]  # Model is model
            result: Model = TypeAdapter(model).validate_python(payload)
        except ValueError as error:  # not JSON, or not the answer of this API (ValidationError)
            raise _not_topoq(response, error) from None
        return result


def segment(value: str) -> str:
    """``value`` as one path segment: every character but letters, digits, ``-``, ``_`` and
    ``~`` percent-encoded, dots included, so that no id (``..``, ``a/b``, ``x?y``) can leave
    its segment and reach another route."""
    return quote(value, safe="").replace(".", "%2E")


def _not_topoq(response: httpx.Response, error: ValueError) -> ClientError:
    """An answer that is not topoq's: ``status`` None, as for a server that cannot be
    reached, since what answers at that address is not a topoq server of this version."""
    kind = response.headers.get("content-type", "no content type").split(";")[0]
    reason = "not JSON" if isinstance(error, json.JSONDecodeError) else "not this API's answer"
    return ClientError(
        f"the server at {response.url.copy_with(query=None)} answered {response.status_code} "
        f"with {kind}, {reason}: is it a topoq server (of a version this CLI knows)?",
        hint="point --server / TOPOQ_SERVER at topoq's URL (http://HOST:PORT, no path)",
    )


def _error(response: httpx.Response) -> ClientError:
    try:
        body = response.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, dict):
        return ClientError(
            str(detail.get("message", response.reason_phrase)),
            status=response.status_code,
            where=detail.get("where"),
            hint=detail.get("hint"),
        )
    return ClientError(
        f"{response.status_code} {response.reason_phrase}", status=response.status_code
    )
