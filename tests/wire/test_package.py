"""``topoq.wire.v1`` imports a model's module when the model is first named: every name it
lists resolves, type checkers see the same names, and naming one model loads no other
module's models."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from topoq.wire import v1

PACKAGE = Path(v1.__file__)


def test_every_listed_name_is_its_modules_model() -> None:
    assert sorted(v1.__all__) == sorted(v1._HOME)
    for name, module in v1._HOME.items():
        home = importlib.import_module(f"topoq.wire.v1.{module}")
        assert getattr(v1, name) is getattr(home, name), name


def test_type_checkers_read_the_same_names_from_the_same_modules() -> None:
    tree = ast.parse(PACKAGE.read_text())
    [guarded] = [node for node in tree.body if isinstance(node, ast.If)]  # if TYPE_CHECKING:
    seen = {
        alias.name: node.module.rsplit(".", 1)[1]
        for node in guarded.body
        if isinstance(node, ast.ImportFrom) and node.module is not None
        for alias in node.names
    }
    assert seen == v1._HOME


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="JobLst"):
        _ = v1.JobLst  # type: ignore[attr-defined]


def test_naming_the_job_list_loads_no_other_models() -> None:
    script = (
        "import sys; from topoq.wire.v1 import JobList; "
        "print(sorted(m for m in sys.modules if m.startswith('topoq.wire.v1.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "['topoq.wire.v1.base', 'topoq.wire.v1.jobs']"
