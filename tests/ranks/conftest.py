"""Rank-side pytest setup: every test module here runs on all ranks at once, in the same order."""
import pytest

import jupyter_hvd as hvd


@pytest.fixture(scope="session", autouse=True)
def engine():
    hvd.init()
    yield hvd
    hvd.shutdown()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that fails on one rank aborts the engine, so the other ranks fail fast instead of waiting."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and hvd.is_initialized() and not isinstance(getattr(call.excinfo, "value", None),
                                                                    hvd.EngineAbortedError):
        hvd.abort(f"{item.nodeid} failed on rank {hvd.rank()}")
