"""The multi-host suite runs on the namespace hosts of netns_cluster.py (make test-hosts). Run any other way,
or where namespaces cannot be made, it skips with the reason; with JUPYTER_HVD_REQUIRE_HOSTS=1 (CI) it fails."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cluster_info import REQUIRE, ClusterInfo


def _absent_reason() -> str | None:
    if "JHVD_CLUSTER" in os.environ:
        return None
    return os.environ.get("JHVD_CLUSTER_UNAVAILABLE",
                          "not on the namespace hosts: run `make test-hosts` (as root)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _absent_reason()
    if reason is None:
        return
    here = Path(__file__).parent
    mine = [item for item in items if here in Path(item.fspath).parents]
    if os.environ.get(REQUIRE) == "1":
        raise pytest.UsageError(f"{REQUIRE}=1 but the multi-host tests cannot run: {reason}")
    for item in mine:
        item.add_marker(pytest.mark.skip(reason=f"multi-host tests: {reason}"))


@pytest.fixture(scope="session")
def cluster() -> ClusterInfo:
    """The namespace hosts this session runs on."""
    return ClusterInfo(json.loads(Path(os.environ["JHVD_CLUSTER"]).read_text()))
