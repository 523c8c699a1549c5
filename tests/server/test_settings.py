"""The server's settings: one frozen object from which ``topoq server``'s options,
``python -m topoq.bootstrap``'s parser, the API processes' command line and each executor's
options are made — so they cannot drift apart."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest
import typer

from topoq.cli.app import app
from topoq.domain.errors import InvalidInputError
from topoq.executors.registry import PLUGINS
from topoq.server.settings import (
    DEFAULTS,
    ServerSettings,
    add_arguments,
    options,
    settings_from,
)

EVERY_VALUE_CHANGED: dict[str, Any] = {
    "host": "0.0.0.0",
    "port": 9999,
    "data_dir": Path("/srv/topoq"),
    "cluster_file": Path("/etc/topoq/cluster.yaml"),
    "policy_file": Path("/etc/topoq/policy.yaml"),
    "executor": "slurm",
    "topology_levels": ("rack", "kubernetes.io/hostname"),
    "step_interval_s": 0.25,
    "api_workers": 3,
    "api_spares": 0,
    "pod_log_limit_bytes": 1 << 20,
    "keep_pods_on_exit": True,
    "kubeconfig": Path("/etc/kube/config"),
    "node_selector": "pool=gpu",
    "namespace_pattern": "team-{team}",
    "kube_qps": 7.5,
    "kube_burst": 9,
    "kube_concurrency": 2,
    "cluster_jobs": False,
    "slurm_conf": Path("/etc/slurm/slurm.conf"),
    "slurm_partition": "gpu",
    "write_topology": True,
    "log_format": "json",
    "log_level": "debug",
    "access_log": True,
}


def only_for(executor: str) -> ServerSettings:
    """Every option changed but those of other executors (which a server refuses)."""
    values = {
        name: value
        for name, value in EVERY_VALUE_CHANGED.items()
        if not OPTIONS[name].executor or OPTIONS[name].executor == executor
    }
    values["write_topology"] = executor == "slurm"
    return ServerSettings(**{**values, "executor": executor})


OPTIONS = dict(options())


def parse(words: list[str]) -> ServerSettings:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return settings_from(vars(parser.parse_args(words)))


def test_every_option_is_changed_by_the_round_trip_example() -> None:
    same = [
        name
        for name, _ in options()
        if EVERY_VALUE_CHANGED.get(name, DEFAULTS[name]) == DEFAULTS[name]
    ]
    assert same == ["database_url"], "give each new option a value in EVERY_VALUE_CHANGED"


@pytest.mark.parametrize("executor", sorted(PLUGINS))
def test_the_api_processes_command_line_says_every_setting_but_the_database_url(
    executor: str,
) -> None:
    settings = only_for(executor)
    assert parse(settings.command_line()) == settings
    with_url = dataclasses.replace(settings, database_url="postgresql://u:secret@db/t")
    assert not any("secret" in word for word in with_url.command_line())


def test_an_empty_command_line_is_the_defaults() -> None:
    assert parse([]) == ServerSettings()
    assert ServerSettings().command_line() == []


def test_topoq_server_offers_the_same_options_as_python_m_topoq_bootstrap() -> None:
    command = typer.main.get_command(app)
    server = command.commands["server"]  # type: ignore[attr-defined]
    typer_flags = {opt for param in server.params for opt in (*param.opts, *param.secondary_opts)}
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    argparse_flags = {flag for action in parser._actions for flag in action.option_strings}
    argparse_flags -= {"-h", "--help"}
    assert typer_flags == argparse_flags
    assert {
        "--slurm-conf",
        "--write-topology",
        "--no-cluster-jobs",
        "--pod-log-limit",
    } <= typer_flags


@pytest.mark.parametrize("executor", sorted(PLUGINS))
def test_each_executor_option_is_a_keyword_its_factory_takes(executor: str) -> None:
    settings = only_for(executor)
    taken = settings.executor_options()
    parameters = inspect.signature(PLUGINS[executor].factory).parameters
    assert set(taken) <= set(parameters), set(taken) - set(parameters)
    inspect.signature(PLUGINS[executor].factory).bind_partial(**taken)


def test_the_slurm_executor_is_told_its_cluster_partition_and_whether_to_write_topology() -> None:
    settings = only_for("slurm")
    assert settings.executor_options() == {
        "slurm_conf": Path("/etc/slurm/slurm.conf"),
        "partition": "gpu",
        "write_topology": True,
        "topology_file": Path("/etc/topoq/cluster.yaml"),
    }


@pytest.mark.parametrize(
    ("words", "where"),
    [
        (["--port", "70000"], "--port"),
        (["--api-workers", "0"], "--api-workers"),
        (["--api-spares", "65"], "--api-spares"),
        (["--kube-qps", "nan"], "--kube-qps"),
        (["--kube-burst", "0"], "--kube-burst"),
        (["--log-format", "xml"], "--log-format"),
        (["--pod-log-limit", "lots"], "--pod-log-limit"),
        (["--topology-levels", " , "], "--topology-levels"),
        (["--step-interval", "0"], "--step-interval"),
        (["--write-topology", "--executor", "slurm"], "--write-topology"),
        (["--write-topology", "--cluster", "c.yaml"], "--write-topology"),
        (["--step-interval", "nan"], "--step-interval"),
    ],
)
def test_a_bad_value_is_refused_naming_its_option(words: list[str], where: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        parse(words)
    assert refused.value.where == where


def test_an_option_of_another_executor_is_refused_not_ignored() -> None:
    with pytest.raises(InvalidInputError) as refused:
        parse(["--kubeconfig", "/etc/kube/config"])  # the local executor by default
    assert refused.value.where == "--kubeconfig"
    assert "--executor kubernetes" in str(refused.value)
    with pytest.raises(InvalidInputError) as refused:
        parse(["--executor", "kubernetes", "--slurm-partition", "gpu"])
    assert refused.value.where == "--slurm-partition"
    assert parse(["--executor", "slurm", "--slurm-partition", "gpu"]).slurm_partition == "gpu"


def test_settings_cannot_change_once_made() -> None:
    settings: Any = ServerSettings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.port = 1
