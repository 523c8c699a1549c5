"""How the CLI shows shares of a GPU: counted into the GPUs, as a decimal."""

from __future__ import annotations

import pytest

from topoq.cli.server_commands import readable_amounts


@pytest.mark.parametrize(
    ("amounts", "shown"),
    [
        ({"cpu": "12", "topoq.io/gpu-milli": "1500"}, "nvidia.com/gpu 1.5, cpu 12"),
        (
            {"memory": "1536Gi", "nvidia.com/gpu": "2", "topoq.io/gpu-milli": "500"},
            "nvidia.com/gpu 2.5, memory 1.5Ti",
        ),
        ({"nvidia.com/gpu": "8", "memory": "1536Gi"}, "nvidia.com/gpu 8, memory 1.5Ti"),
        ({"topoq.io/gpu-milli": "not a number"}, "topoq.io/gpu-milli not a number"),
    ],
)
def test_shares_are_counted_into_the_gpus(amounts: dict[str, str], shown: str) -> None:
    assert readable_amounts(amounts) == shown
