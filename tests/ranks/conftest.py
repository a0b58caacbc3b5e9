"""Rank-side pytest setup: every test module here runs on all ranks at once, in the same order."""
import pytest

import jupyter_hvd as hvd


@pytest.fixture(scope="session", autouse=True)
def engine():
    hvd.init()
    yield hvd
    hvd.shutdown()


@pytest.fixture(autouse=True)
def min_ranks(request, engine):
    """A module whose tests make the ranks disagree says MIN_RANKS = 2: at fewer ranks its tests skip."""
    need = getattr(request.module, "MIN_RANKS", 1)
    if need > 1 and hvd.size() < need:
        pytest.skip(f"needs {need} ranks")


@pytest.fixture(scope="module")
def sets():
    """The global set, the even ranks and (with more than 2 ranks) every rank but 0, on every rank."""
    n = hvd.size()
    extra = [hvd.add_process_set(list(range(0, n, 2)))]
    if n > 2:
        extra.append(hvd.add_process_set(hvd.ProcessSet(range(1, n))))
    yield [hvd.global_process_set] + extra
    for s in extra:
        assert hvd.remove_process_set(s)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that fails on one rank aborts the engine, so the other ranks fail fast instead of waiting."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and hvd.is_initialized() and not isinstance(getattr(call.excinfo, "value", None),
                                                                    hvd.EngineAbortedError):
        hvd.abort(f"{item.nodeid} failed on rank {hvd.rank()}")
