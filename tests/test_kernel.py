"""The %%hvd magic in a real Jupyter kernel: kernel shutdown stops the ranks, the stop button interrupts them."""
import os
import re
import threading
import time
import uuid

import psutil
import pytest
from jupyter_client import KernelManager

pytestmark = pytest.mark.timeout(180)

TAG = "HVD_TEST_TAG"  # set in the kernel's environment, so inherited by every process it starts
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MXNET_CPU_WORKER_NTHREADS": "1"}  # ranks inherit the kernel's environment
SHUTDOWN_LIMIT_S = 10.0
INTERRUPT_LIMIT_S = 5.0


def tagged(tag: str) -> list[psutil.Process]:
    """Live processes with this tag in their environment: a kernel and all it started, orphans included."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(TAG) == tag and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


def wait_gone(tag: str, timeout: float) -> list[psutil.Process]:
    """Wait up to timeout seconds for the tagged processes to exit; return those still alive."""
    deadline = time.monotonic() + timeout
    while (alive := tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def describe(processes: list[psutil.Process]) -> list[str]:
    """Pid and command line of each process, for assertion messages."""
    lines = []
    for p in processes:
        try:
            lines.append(f"{p.pid}: {' '.join(p.cmdline())[:160]}")
        except psutil.Error:
            lines.append(f"{p.pid}: (gone)")
    return lines


class Kernel:
    """A python3 kernel started with a unique tag in its environment, and a blocking client for it."""

    def __init__(self):
        self.tag = uuid.uuid4().hex
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(env={**os.environ, **ONE_THREAD, TAG: self.tag})
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self._keep_later_output()

    def execute(self, code: str, timeout: float = 120.0, on_output=None) -> tuple[dict, str]:
        """Run code; return the reply's content and the text it printed, returned or raised (so far: on_output).
        ``last_id`` is its request's id, for ``shown_under`` later."""
        chunks = []

        def collect(msg: dict) -> None:
            if text := shown_text(msg):
                chunks.append(text)
                if on_output is not None:
                    on_output("".join(chunks))

        reply = self.kc.execute_interactive(code, timeout=timeout, output_hook=collect)
        self.last_id = reply["parent_header"]["msg_id"]
        return reply["content"], "".join(chunks)

    def shown_under(self, msg_id: str) -> str:
        """The text shown so far under a request, with what came after its reply (a background cell's output),
        as far as the client has read the kernel's messages (each ``execute`` reads them)."""
        return "".join(self._later.get(msg_id, []))

    def _keep_later_output(self) -> None:
        """Keep the text of the messages that the client reads while it waits for another request (it drops
        them), by the request they belong to."""
        self._later: dict[str, list[str]] = {}
        channel = self.kc.iopub_channel
        get_msg = channel.get_msg

        def get_and_keep(*args, **kwargs) -> dict:
            msg = get_msg(*args, **kwargs)
            if text := shown_text(msg):
                self._later.setdefault(msg["parent_header"].get("msg_id"), []).append(text)
            return msg

        channel.get_msg = get_and_keep

    def close(self) -> None:
        """Stop the kernel if still running, give what it started time to go (a killed kernel's job
        is ended by its reaper), then kill anything left behind."""
        self.kc.stop_channels()
        if self.km.is_alive():
            self.km.shutdown_kernel(now=True)
        for process in wait_gone(self.tag, SHUTDOWN_LIMIT_S):
            process.kill()


def shown_text(msg: dict) -> str:
    """The text an IOPub message shows: a stream's, a result's or display's plain text, an error's traceback."""
    content, kind = msg["content"], msg["msg_type"]
    if kind == "stream":
        return content["text"]
    if kind in ("execute_result", "display_data"):
        return content["data"].get("text/plain", "") + "\n"
    if kind == "error":
        return "\n".join(content["traceback"]) + "\n"
    return ""


def rank_pids(status: str) -> list[int]:
    """The pid column of `%hvd status` output."""
    return [int(m.group(1)) for m in re.finditer(r"^\s*\d+\s+\S+\s+\d+\s+(\d+)\s", status, re.MULTILINE)]


@pytest.fixture
def kernel():
    """A fresh kernel for one test."""
    k = Kernel()
    yield k
    k.close()


def with_ranks(cell: str) -> Kernel:
    """A kernel whose ranks ran this first %%hvd cell."""
    k = Kernel()
    k.execute("%load_ext jupyter_hvd")
    reply, out = k.execute(cell)
    assert reply["status"] == "ok", out
    return k


@pytest.fixture(scope="module")
def ranks():
    """A kernel with two running MXNet ranks, shared by the interrupt tests."""
    k = with_ranks("%%hvd -np 2\nimport mxnet as mx\nprint('up', hvd.rank())")
    yield k
    k.close()


def test_kernel_shutdown_stops_every_rank_process(kernel):
    kernel.execute("%load_ext jupyter_hvd")
    reply, out = kernel.execute("%%hvd -np 2 --framework none\nprint('rank', hvd.rank(), 'of', hvd.size())")
    assert reply["status"] == "ok", out
    assert "[rank 0] rank 0 of 2" in out and "[rank 1] rank 1 of 2" in out
    pids = rank_pids(kernel.execute("%hvd status")[1])
    assert len(pids) == 2
    started = tagged(kernel.tag)
    assert set(pids) <= {p.pid for p in started}
    assert any(p.name() in ("mpiexec", "prterun") for p in started), describe(started)
    assert any("ipyparallel.controller" in p.cmdline() for p in started), describe(started)

    began = time.monotonic()
    kernel.km.shutdown_kernel(now=False)
    left = wait_gone(kernel.tag, SHUTDOWN_LIMIT_S)
    elapsed = time.monotonic() - began
    print(f"\nkernel shutdown: {len(started)} processes gone {elapsed:.2f}s after shutdown_kernel(now=False)")
    assert not left, describe(left)


WAITS = {
    "sleep": "time.sleep(60)",
    "allreduce": "if hvd.rank() == 0:\n    hvd.allreduce(mx.nd.ones(3), name='only_rank_0').asnumpy()\n"
                 "else:\n    time.sleep(60)",
    # The interrupt lands in a finalizer, where Python prints a KeyboardInterrupt and drops it (as it did in
    # pyzmq's, while a rank's output was sent, on a busy machine): the ranks must still stop.
    "finalizer": "import weakref\ndoomed = type('Doomed', (), {})()\nweakref.finalize(doomed, time.sleep, 60)\n"
                 "del doomed\ntime.sleep(60)",
}


@pytest.mark.parametrize("wait", WAITS.values(), ids=WAITS.keys())
def test_interrupt_stops_the_cell_and_keeps_the_ranks(ranks, wait, request):
    before = rank_pids(ranks.execute("%hvd status")[1])
    sent = []

    def interrupt_once_both_wait(text: str) -> None:
        if not sent and "[rank 0] waiting" in text and "[rank 1] waiting" in text:
            sent.append(time.monotonic())
            ranks.km.interrupt_kernel()

    cell = f"%%hvd\nimport time\nprint('waiting', flush=True)\n{wait}"
    reply, out = ranks.execute(cell, timeout=90, on_output=interrupt_once_both_wait)
    assert sent, out
    latency = time.monotonic() - sent[0]
    print(f"\n{request.node.name}: the cell ended {latency:.2f}s after interrupt_kernel()")
    assert reply["status"] == "error", out
    assert "the kernel was interrupted" in out and "KeyboardInterrupt" in out, out
    assert "Exception ignored" not in out and "ignored SIGINT" not in out, out
    assert latency < INTERRUPT_LIMIT_S

    reply, out = ranks.execute("%%hvd\nprint('after', hvd.rank(), hvd.allreduce(mx.nd.array([hvd.rank()])).asscalar())")
    assert reply["status"] == "ok", out
    assert "[rank 0] after 0 0.5" in out and "[rank 1] after 1 0.5" in out
    assert "[hvd] started" not in out
    assert rank_pids(ranks.execute("%hvd status")[1]) == before


def test_a_notebook_that_started_the_engine_itself_still_runs_hvd_cells(kernel):
    """``hvd.init()`` in the notebook's own cell (a one-rank job, or ``%run train.py``) once left its
    one-process transport setting to the ranks of every later %%hvd cell, which then could not reach each
    other: the job never started."""
    reply, out = kernel.execute("import jupyter_hvd as hvd\nhvd.init()\nprint('alone', hvd.size())\n"
                                "%load_ext jupyter_hvd")
    assert reply["status"] == "ok" and "alone 1" in out, out
    reply, out = kernel.execute("%%hvd -np 2 --framework none --timeout 60\nimport numpy as np\n"
                                "print('sum', hvd.allreduce(np.ones(1), op=hvd.Sum)[0])")
    assert reply["status"] == "ok", out
    assert "[rank 0] sum 2.0" in out and "[rank 1] sum 2.0" in out, out


def test_killed_kernel_leaves_no_rank_behind(kernel):
    kernel.execute("%load_ext jupyter_hvd")
    reply, out = kernel.execute("%%hvd -np 2 --framework none\nprint('rank', hvd.rank())")
    assert reply["status"] == "ok", out
    started = tagged(kernel.tag)
    assert any(p.name() in ("mpiexec", "prterun") for p in started), describe(started)
    shown = kernel.execute("get_ipython().magics_manager.registry['HvdMagics'].cluster._profile_dir")[1]
    folder = shown.strip().strip("'")  # the job's folder: its ipyparallel profile and mpiexec's session files
    assert os.path.isdir(folder), shown

    began = time.monotonic()
    kernel.km.shutdown_kernel(now=True)  # SIGKILL: the kernel's atexit cleanup never runs
    left = wait_gone(kernel.tag, SHUTDOWN_LIMIT_S)
    print(f"\nkilled kernel: {len(started)} processes gone {time.monotonic() - began:.2f}s later")
    assert not left, describe(left)
    deadline = time.monotonic() + 10
    while os.path.exists(folder) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(folder), "the job's folder outlived its killed kernel"


def test_the_cell_that_starts_the_ranks_chooses_their_framework_by_what_it_imports(kernel):
    """With MXNet and torch installed and neither imported in the notebook, a first cell written for torch got
    MXNet's API (the older default): `hvd.allreduce(torch.ones(2))` raised "expected an mxnet NDArray"."""
    kernel.execute("%load_ext jupyter_hvd")
    reply, out = kernel.execute("%%hvd -np 2 --timeout 60\nimport torch\n"
                                "print(hvd.__name__, hvd.allreduce(torch.ones(1), op=hvd.Sum).item())")
    assert reply["status"] == "ok", out
    assert "[rank 0] jupyter_hvd.torch 2.0" in out and "[rank 1] jupyter_hvd.torch 2.0" in out, out


def test_a_cell_that_imports_the_other_framework_is_told_once_how_to_use_it(ranks):
    told = "[hvd] this cell imports torch, but hvd on the ranks is jupyter_hvd.mxnet, chosen when they started"
    said = [ranks.execute("%%hvd\nimport torch\nprint('ran')")[1] for _ in range(2)]
    assert said[0].count(told) == 1 and "--framework torch (which starts the ranks again)" in said[0], said[0]
    assert told not in said[1] and said[1].count("] ran\n") == 2, said[1]


def test_two_notebooks_run_jobs_at_once_without_mixing(tmp_path):
    """Two kernels (two notebooks open, or two users of one server) each run a %%hvd job on the same machine at
    the same time: each job's ranks reduce their own values, and stopping one leaves the other running. Each
    kernel's client lives in a thread of its own, as its sockets belong to the thread that uses them."""
    outputs: dict[int, list[tuple[str, str]]] = {0: [], 1: []}
    stopped = threading.Event()

    def notebook(job: int) -> None:
        kernel = Kernel()
        try:
            def run(code: str) -> None:
                reply, out = kernel.execute(code, timeout=150)
                outputs[job].append((reply["status"], out))

            run("%load_ext jupyter_hvd")
            run("%%hvd -np 2 --framework none\nimport numpy as np, os, time\n"  # 2 s together, the ranks agreeing
                f"open({str(tmp_path)!r} + '/up{job}', 'w').close()\ndeadline = time.monotonic() + 90\n"
                f"while not os.path.exists({str(tmp_path)!r} + '/up{1 - job}') and time.monotonic() < deadline:\n"
                "    time.sleep(0.01)\n"
                "end, steps, wrong, done = time.monotonic() + 2, 0, 0, False\nwhile not done:\n"
                f"    got = hvd.allreduce(np.full(1000, {job} * 100 + hvd.rank(), np.float64), op=hvd.Sum, name='x')\n"
                f"    wrong += int((got != 2 * {job} * 100 + 1).any())\n    steps += 1\n"
                "    done = hvd.allreduce(np.array([time.monotonic() > end], float), op=hvd.Max, name='done')[0]\n"
                f"print('job {job}:', steps > 0, wrong, 'wrong')")
            if job == 0:
                run("%hvd stop")
                stopped.set()
            elif stopped.wait(150):
                run("%%hvd\nprint('still', hvd.allreduce(np.ones(1), op=hvd.Sum)[0])")
        finally:
            kernel.close()

    threads = [threading.Thread(target=notebook, args=(job,)) for job in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for job in (0, 1):
        statuses, out = [status for status, _ in outputs[job]], "".join(text for _, text in outputs[job])
        assert statuses == ["ok"] * 3, (job, out)
        assert all(f"[rank {r}] job {job}: True 0 wrong" in out for r in (0, 1)), (job, out)
    assert "[rank 1] still 2.0" in outputs[1][2][1] and "[hvd] started" not in outputs[1][2][1], outputs[1]
