"""How %%hvd words a failed cell, on ipyparallel's own RemoteError as the ranks send it."""
from ipyparallel.error import RemoteError

from jupyter_hvd.magic.failures import describe_failure, without_runner_frames

RUNNER = ["\x1b[36mFile \x1b[39m\x1b[32m/venv/site-packages/ipyparallel/engine/kernel.py:157\x1b[39m, in do_apply",
          "    exec(code, shell.user_global_ns, shell.user_ns)", ""]
CELL = ["\x1b[36mFile \x1b[39m\x1b[32m<hvd cell 3>:2\x1b[39m", "----> 2 y.wait_to_read()", ""]
SETUP = ["\x1b[36mFile \x1b[39m\x1b[32m<string>:1\x1b[39m", "", "\x1b[36mFile \x1b[39m\x1b[32m/pkg/jupyter_hvd/magic/rank_setup.py:41"
         "\x1b[39m, in setup_rank", "---> 49 importlib.import_module(api_module(framework))", ""]
HEADER = ["---------------------------------------------------------------------------",
          "MXNetError                                Traceback (most recent call last)"]


def remote(ename: str, evalue: str, frames: list[str]) -> RemoteError:
    return RemoteError(ename, evalue, "\n".join(HEADER + frames + [f"{ename}: {evalue}"]))


def test_the_report_starts_at_the_cells_frame():
    report = str(describe_failure({0: remote("ValueError", "bad batch", RUNNER + CELL)}, [0]))
    assert "ipyparallel" not in report and "<hvd cell 3>" in report
    assert report.splitlines()[1:3] == HEADER


def test_a_traceback_without_a_cell_frame_is_kept_whole():
    report = str(describe_failure({0: remote("ValueError", "bad batch", RUNNER)}, [0]))
    assert "ipyparallel/engine/kernel.py" in report


def test_a_message_that_repeats_its_class_name_says_it_once():
    error = remote("MXNetError", "MXNetError: allreduce of tensor 'x': mismatched shapes", CELL)
    others = {1: remote("MXNetError", "MXNetError: allreduce of tensor 'x': mismatched shapes", CELL)}
    report = str(describe_failure({0: error, **others}, [0, 1]))
    assert report.splitlines()[0] == "rank 0 raised MXNetError: allreduce of tensor 'x': mismatched shapes"
    assert report.splitlines()[-1] == "also failed: rank 1 (MXNetError)"


def test_a_start_up_traceback_starts_after_ipyparallels_frames():
    text = "\n".join(HEADER + RUNNER + SETUP + ["RuntimeError: this mxnet is broken"])
    trimmed = without_runner_frames(text)
    assert "ipyparallel" not in trimmed and "<string>" not in trimmed
    assert trimmed.splitlines()[:2] == HEADER and "in setup_rank" in trimmed.splitlines()[2]
    only_runner = "\n".join(HEADER + RUNNER + ["KeyError: 'x'"])
    assert without_runner_frames(only_runner) == only_runner


def test_a_rank_whose_op_failed_for_another_ranks_bad_argument_is_not_the_cause():
    """Rank 0's PeerArgumentError may come back first; the report still leads with rank 1's own error."""
    peer = remote("PeerArgumentError", "allreduce of tensor 'm': rank 1 could not start it: allreduce: bad", CELL)
    report = str(describe_failure({0: peer, 1: remote("TypeError", "allreduce: bad", CELL)}, [0, 1]))
    assert report.splitlines()[0] == "rank 1 raised TypeError: allreduce: bad"
    assert report.splitlines()[-1] == "aborted ranks: rank 0 (PeerArgumentError)"
