"""The Grafana dashboard shipped in ``deploy/grafana/`` (docs/operations.md) asks only for
series a real ``topoq server`` exports on ``/metrics``, by labels those series carry."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx

from topoq.engine.metrics import ControlPlaneMetrics
from topoq.testing.server import RunningServer

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "topoq-dashboard.json"
PROMQL_WORDS = frozenset(
    {
        "sum",
        "avg",
        "min",
        "max",
        "count",
        "rate",
        "irate",
        "increase",
        "histogram_quantile",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "and",
        "or",
        "unless",
    }
)
SERIES_OF_TYPE = {"histogram": ("_bucket", "_sum", "_count")}
"""The series a TYPE line's name stands for beyond itself (prometheus-client names a
counter's TYPE line with its ``_total`` already)."""


def queries(dashboard: dict[str, Any]) -> list[str]:
    found = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    found += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    return found


def metric_names(query: str) -> set[str]:
    """The series a PromQL query names: what is left once label matchers, ranges, strings,
    groupings and numbers are taken out, other than PromQL's own words."""
    bare = re.sub(r'"[^"]*"', "", query)
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", bare)
    bare = re.sub(r"\b(by|without)\s*\([^)]*\)", "", bare)
    bare = re.sub(r"label_values\(([a-z_:][a-z0-9_:]*),[^)]*\)", r"\1", bare)
    names = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", bare))
    return names - PROMQL_WORDS


def label_names(query: str) -> set[str]:
    names = set(re.findall(r"([a-z_]+)\s*=~?", "".join(re.findall(r"\{[^}]*\}", query))))
    for grouping in re.findall(r"\bby\s*\(([^)]*)\)", query):
        names |= {name.strip() for name in grouping.split(",")}
    return names - {""}


def exported(metrics_text: str) -> tuple[set[str], set[str]]:
    """Every series the exposition declares (by its TYPE lines), and every label name its
    samples carry or its metrics are declared with (a counter that never counted, such as
    preemptions on a quiet cluster, has no sample to carry its labels)."""
    series = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", metrics_text, flags=re.MULTILINE):
        series |= {name, *(name + suffix for suffix in SERIES_OF_TYPE.get(kind, ()))}
    labels = set(re.findall(r"[{,]([a-z_]+)=\"", metrics_text))
    declared = ControlPlaneMetrics()
    for metric in vars(declared).values():
        labels |= set(getattr(metric, "_labelnames", ()))
    return series, labels


def test_every_query_names_a_series_the_server_exports(
    dashboard_server: RunningServer, jobs: dict[str, Any]
) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    metrics = httpx.get(f"{dashboard_server.url}/metrics", timeout=10)
    assert metrics.status_code == 200
    series, labels = exported(metrics.text)
    assert "topoq_jobs" in series and "team" in labels  # the jobs ran: samples are there
    asked = [(query, metric_names(query), label_names(query)) for query in queries(dashboard)]
    assert len(asked) >= 8
    for query, names, used_labels in asked:
        assert names, query
        assert names <= series, (query, names - series)
        assert used_labels <= labels | {"le"}, (query, used_labels - labels)


def test_the_dashboard_is_one_grafana_can_import() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] == "topoq"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"datasource", "team"} <= variables
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"] and all(t["refId"] for t in panel["targets"]), panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
