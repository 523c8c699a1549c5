"""``TopoqClient``: one method per API route, returning wire models; errors as ``ClientError``
with the server's message, field and hint.

Requests go through the standard library's ``http.client`` (``HttpTransport``), not httpx: a
CLI verb is a short process that makes a request or two, and importing httpx (with the command
line tool it brings) cost more CPU than the rest of ``topoq list`` (docs/adr/0010). A test or an
embedding program may hand another ``Transport`` (e.g. one that calls an app in the process)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, urlencode, urlsplit

from topoq.domain.errors import InvalidInputError, TopoqError

if TYPE_CHECKING:
    from topoq.wire.v1 import (
        Explanation,
        JobDetail,
        JobHistory,
        JobList,
        JobLogs,
        QueueList,
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
    from topoq.wire.v1.inventory import ClusterApplyResult
    from topoq.wire.v1.reports import RecordedWindowModel, UsageReportModel

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


@dataclass(frozen=True)
class Answer:
    """What the server answered to one request."""

    status: int
    reason: str
    content_type: str
    content: bytes

    @property
    def is_error(self) -> bool:
        return self.status >= 400

    def json(self) -> Any:
        return json.loads(self.content)


Transport = Callable[[str, str, Mapping[str, str], "bytes | None"], Answer]
"""``(method, target, headers, body) -> Answer``, the target being the path and query
(``/api/v1/jobs?phase=pending``); an ``OSError`` when the server cannot be reached."""


class HttpTransport:
    """Requests over HTTP(S) with ``http.client``, a connection per request (a CLI verb makes
    a few; none of them is retried, so a submission is never sent twice)."""

    def __init__(self, server: str, timeout_s: float) -> None:
        parts = urlsplit(server)
        try:
            port = parts.port
        except ValueError as error:
            raise InvalidInputError(
                f"cannot talk to {server}: {error}",
                hint="check --server / TOPOQ_SERVER and the token",
            ) from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidInputError(
                f"cannot talk to {server}: not an http:// or https:// URL",
                hint="check --server / TOPOQ_SERVER and the token",
            )
        self.secure, self.host, self.port = parts.scheme == "https", parts.hostname, port
        self.base_path = parts.path.rstrip("/")
        self.timeout_s = timeout_s

    def __call__(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes | None
    ) -> Answer:
        import http.client

        kind = http.client.HTTPSConnection if self.secure else http.client.HTTPConnection
        connection = kind(self.host, self.port, timeout=self.timeout_s)
        try:
            connection.request(method, self.base_path + target, body=body, headers=dict(headers))
            response = connection.getresponse()
            content = response.read()
            found = response.getheader("content-type") or ""
            return Answer(response.status, response.reason, found, content)
        except http.client.HTTPException as error:  # a broken answer: as if none came
            raise ConnectionError(f"{type(error).__name__}: {error}") from None
        finally:
            connection.close()


class TopoqClient:
    def __init__(
        self,
        server: str,
        token: str | None,
        *,
        timeout_s: float = 30.0,
        transport: Transport | None = None,
    ) -> None:
        self.server = server.rstrip("/")
        self._headers = {"Accept": "application/json"}
        if token:
            if not token.isprintable():
                raise InvalidInputError(
                    f"cannot talk to {self.server}: the token is not one line of printable text",
                    hint="check --server / TOPOQ_SERVER and the token",
                )
            self._headers["Authorization"] = f"Bearer {token}"
        self._send = transport or HttpTransport(self.server, timeout_s)

    def close(self) -> None:
        """Nothing to release: every request has its own connection (kept for ``with``)."""

    def __enter__(self) -> TopoqClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- jobs -------------------------------------------------------------------------
    def submit(self, request: SubmitJobRequest) -> JobDetail:
        from topoq.wire.v1 import JobDetail

        body = request.model_dump(mode="json", exclude_none=True)
        return self._call("POST", "/jobs", JobDetail, json=body)

    def jobs(self, **filters: str | int | None) -> JobList:
        from topoq.wire.v1 import JobList

        params = {key: value for key, value in filters.items() if value is not None}
        return self._call("GET", "/jobs", JobList, params=params)

    def queue(self, **filters: str | int | None) -> QueueList:
        from topoq.wire.v1 import QueueList

        params = {key: value for key, value in filters.items() if value is not None}
        return self._call("GET", "/queue", QueueList, params=params)

    def job(self, job_id: str) -> JobDetail:
        from topoq.wire.v1 import JobDetail

        return self._call("GET", f"/jobs/{segment(job_id)}", JobDetail)

    def cancel(self, job_id: str) -> JobDetail:
        from topoq.wire.v1 import JobDetail

        return self._call("POST", f"/jobs/{segment(job_id)}/cancel", JobDetail)

    def hold(self, job_id: str) -> JobDetail:
        from topoq.wire.v1 import JobDetail

        return self._call("POST", f"/jobs/{segment(job_id)}/hold", JobDetail)

    def release(self, job_id: str) -> JobDetail:
        from topoq.wire.v1 import JobDetail

        return self._call("POST", f"/jobs/{segment(job_id)}/release", JobDetail)

    def explain(self, job_id: str, *, fresh: bool = False) -> Explanation:
        """Why the job waits: as the latest cycle left it, or ``fresh``: as it is now."""
        from topoq.wire.v1 import Explanation

        params = {"fresh": "true"} if fresh else None
        return self._call("GET", f"/jobs/{segment(job_id)}/explain", Explanation, params=params)

    def history(self, job_id: str) -> JobHistory:
        from topoq.wire.v1 import JobHistory

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
        from topoq.wire.v1 import JobLogs

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
        from topoq.wire.v1.cluster import TeamModel

        return self._call("GET", "/teams", list[TeamModel])

    def policy(self) -> PolicyModel:
        from topoq.wire.v1.cluster import PolicyModel

        return self._call("GET", "/policy", PolicyModel)

    def apply_policy(self, document: dict[str, Any]) -> PolicyModel:
        from topoq.wire.v1.cluster import PolicyModel

        return self._call("PUT", "/policy", PolicyModel, json=document)

    def policy_versions(self) -> list[PolicyVersionModel]:
        from topoq.wire.v1.cluster import PolicyVersionModel

        return self._call("GET", "/policy/versions", list[PolicyVersionModel])

    def policy_version(self, version: int) -> PolicyModel:
        from topoq.wire.v1.cluster import PolicyModel

        return self._call("GET", f"/policy/versions/{int(version)}", PolicyModel)

    def rollback_policy(self, version: int) -> PolicyModel:
        from topoq.wire.v1.cluster import PolicyModel

        return self._call("POST", f"/policy/versions/{int(version)}/rollback", PolicyModel)

    def nodes(self) -> list[NodeModel]:
        from topoq.wire.v1.cluster import NodeModel

        return self._call("GET", "/nodes", list[NodeModel])

    def node_action(self, name: str, action: str) -> NodeAction:
        from topoq.wire.v1.cluster import NodeAction

        return self._call("POST", f"/nodes/{segment(name)}/{segment(action)}", NodeAction)

    def topology(self) -> TopologyModel:
        from topoq.wire.v1.cluster import TopologyModel

        return self._call("GET", "/topology", TopologyModel)

    def events(self, limit: int = 50) -> list[EventModel]:
        from topoq.wire.v1.cluster import EventModel

        return self._call("GET", "/events", list[EventModel], params={"limit": limit})

    def audit(
        self, limit: int = 50, *, since_s: float | None = None, actor: str | None = None
    ) -> list[AuditEntryModel]:
        from topoq.wire.v1.cluster import AuditEntryModel

        chosen = {"limit": limit, "since_s": since_s, "actor": actor}
        params = {key: value for key, value in chosen.items() if value is not None}
        return self._call("GET", "/audit", list[AuditEntryModel], params=params)

    # --- reports ----------------------------------------------------------------------
    def usage_report(
        self, start: str | None = None, end: str | None = None, team: str | None = None
    ) -> UsageReportModel:
        """GPU-hours per team per UTC day and per job over ``[start, end)`` (ISO dates or
        times, or seconds since the epoch; default: the last 7 days)."""
        from topoq.wire.v1.reports import UsageReportModel

        chosen = {"from": start, "to": end, "team": team}
        params = {key: value for key, value in chosen.items() if value is not None}
        return self._call("GET", "/reports/usage", UsageReportModel, params=params)

    def recorded_window(self, since_s: float, until_s: float) -> RecordedWindowModel:
        """What the server recorded over ``[since_s, until_s)`` for a what-if (admin)."""
        from topoq.wire.v1.reports import RecordedWindowModel

        params = {"since": repr(since_s), "until": repr(until_s)}
        return self._call("GET", "/reports/history", RecordedWindowModel, params=params)

    def whoami(self) -> WhoAmI:
        from topoq.wire.v1.access import WhoAmI

        return self._call("GET", "/whoami", WhoAmI)

    # --- tokens -----------------------------------------------------------------------
    def create_token(self, name: str, role: str, teams: list[str]) -> TokenCreated:
        from topoq.wire.v1.access import TokenCreated

        body = {"name": name, "role": role, "teams": teams}
        return self._call("POST", "/tokens", TokenCreated, json=body)

    def tokens(self, *, include_revoked: bool = False) -> list[TokenModel]:
        from topoq.wire.v1.access import TokenModel

        params = {"include_revoked": "true"} if include_revoked else {}
        return self._call("GET", "/tokens", list[TokenModel], params=params)

    def revoke_token(self, token_id: str) -> TokenModel:
        from topoq.wire.v1.access import TokenModel

        return self._call("POST", f"/tokens/{segment(token_id)}/revoke", TokenModel)

    def health(self) -> Health:
        from topoq.wire.v1.cluster import Health

        return self._call("GET", "/healthz", Health, prefix="")

    def apply_cluster(
        self, document: dict[str, Any], *, drain: bool = False, dry_run: bool = False
    ) -> ClusterApplyResult:
        """Make a topoq cluster file (as a document) the inventory (admins)."""
        from topoq.wire.v1.inventory import ClusterApplyRequest, ClusterApplyResult

        body = ClusterApplyRequest(document=document, drain=drain, dry_run=dry_run)
        return self._call(
            "POST", "/cluster/apply", ClusterApplyResult, json=body.model_dump(mode="json")
        )

    # --- plumbing ---------------------------------------------------------------------
    def _call(
        self,
        method: str,
        path: str,
        model: type[Model] | Any,
        *,
        prefix: str = API,
        params: Mapping[str, object] | None = None,
        json: Any = None,
    ) -> Model:
        target = prefix + path
        if params:
            target += "?" + urlencode({key: _query_value(value) for key, value in params.items()})
        headers, body = dict(self._headers), None
        if json is not None:
            headers["Content-Type"] = "application/json"
            body = _json_text(json).encode()
        try:
            answer = self._send(method, target, headers, body)
        except OSError as error:  # cannot connect, timed out, connection reset, …
            raise ClientError(
                f"cannot reach the topoq server at {self.server}: {error}",
                hint="start it with `topoq server`, or point --server / TOPOQ_SERVER at it",
            ) from None
        if answer.is_error:
            raise _error(answer)
        try:
            result: Model = _validated(model, answer.json())
        except ValueError as error:  # not JSON, or not the answer of this API (ValidationError)
            raise _not_topoq(self.server + prefix + path, answer, error) from None
        return result


def _validated(model: Any, payload: Any) -> Any:
    """``payload`` as ``model`` (a wire model, or ``list[...]`` of one); pydantic is imported
    here, when an answer arrives, and a model's validator is built when first used. Fields of
    an answer that this client does not know are ignored: a newer server may add fields (what
    the server reads stays strict, and removing or changing a field is a breaking change that
    the OpenAPI golden file makes deliberate), so a user's older CLI keeps working."""
    from pydantic import BaseModel, TypeAdapter

    if isinstance(model, type) and issubclass(model, BaseModel):
        return model.model_validate(payload, extra="ignore")
    return TypeAdapter(model).validate_python(payload, extra="ignore")


def _query_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _json_text(value: Any) -> str:
    return json.dumps(value)


def segment(value: str) -> str:
    """``value`` as one path segment: every character but letters, digits, ``-``, ``_`` and
    ``~`` percent-encoded, dots included, so that no id (``..``, ``a/b``, ``x?y``) can leave
    its segment and reach another route."""
    return quote(value, safe="").replace(".", "%2E")


def _not_topoq(url: str, answer: Answer, error: ValueError) -> ClientError:
    """An answer that is not topoq's: ``status`` None, as for a server that cannot be
    reached, since what answers at that address is not a topoq server of this version."""
    kind = answer.content_type.split(";")[0] or "no content type"
    reason = "not JSON" if isinstance(error, json.JSONDecodeError) else "not this API's answer"
    return ClientError(
        f"the server at {url} answered {answer.status} "
        f"with {kind}, {reason}: is it a topoq server (of a version this CLI knows)?",
        hint="point --server / TOPOQ_SERVER at topoq's URL (http://HOST:PORT, no path)",
    )


def _error(answer: Answer) -> ClientError:
    try:
        body = answer.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, dict):
        return ClientError(
            str(detail.get("message", answer.reason)),
            status=answer.status,
            where=detail.get("where"),
            hint=detail.get("hint"),
        )
    return ClientError(f"{answer.status} {answer.reason}", status=answer.status)
