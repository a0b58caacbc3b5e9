"""Names ops go to the engine under (jupyter_hvd/naming.py, the one place that makes them); no MPI."""
import ast
from pathlib import Path

import pytest

from jupyter_hvd import naming

PACKAGE = Path(naming.__file__).resolve().parent


def test_framework_names_are_prefixed_and_unnamed_ops_numbered_per_kind_and_set() -> None:
    naming.restart()
    assert naming.op_names("allreduce", "w", 1, 0, False) == ["allreduce.w"]
    assert naming.op_names("allreduce", "w", 2, 0, True) == ["allreduce.w.0", "allreduce.w.1"]
    assert naming.op_names("allreduce", "w", 1, 0, True) == ["allreduce.w.0"]  # a group of one is still a group
    # An unnamed group takes one number for all its tensors; an empty one keeps its first tensor's name.
    assert naming.op_names("allreduce", None, 2, 3, True) == ["allreduce.noname.3.0.0", "allreduce.noname.3.0.1"]
    assert naming.op_names("allreduce", None, 0, 3, True) == ["allreduce.noname.3.1.0"]
    assert naming.op_names("broadcast", "", 1, 3, False) == ["broadcast.noname.3.0"]
    naming.restart()
    assert naming.engine_name("allreduce", None, 3) == "allreduce.noname.3.0"
    with pytest.raises(ValueError, match="allreduce: name must be a non-empty string, got 5"):
        naming.engine_name("allreduce", 5, 0)


def test_framework_apis_use_no_private_name_of_the_core() -> None:
    """mxnet/ and torch/ reach the core through its public helpers only."""
    private = []
    for path in [*PACKAGE.glob("mxnet/*.py"), *PACKAGE.glob("torch/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module in ("ops", "naming", "dtypes"):
                private += [f"{path.name}: {a.name}" for a in node.names if a.name.startswith("_")]
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "core":
                private += [f"{path.name}: core.{node.attr}"] if node.attr.startswith("_") else []
    assert private == []
