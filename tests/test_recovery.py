"""The failure-recovery matrix: every way a %%hvd cell or its job can fail, then the next cell, in a real kernel.

For each failure, at 2 ranks and (where the job's size matters) at 3, the next cell must use unnamed ops,
named ops, a process set made before the failure, broadcast_parameters and %hvd pull, and work; what the
failure costs is checked too: the ranks, their variables and process sets are kept where the job survived,
and where it did not, no process of the old job and no folder of it is left. One kernel serves every
failure it survives; the two that kill the kernel get kernels of their own. A table of the times is
printed at the end.
"""
import glob
import json
import os
import signal
import tempfile
import time

import psutil
import pytest

from jupyter_hvd.magic.reaper import tagged as job_processes
from test_kernel import Kernel, describe, tagged, wait_gone

pytestmark = pytest.mark.timeout(300)

CONTROL_LIMIT_S = 30.0  # a failed cell hands the notebook back within this (failure grace, interrupt grace, ...)
NEXT_CELL_LIMIT_S = 120.0  # the next cell's first output, new ranks (MXNet's import) included, on a loaded box
CLEANUP_LIMIT_S = 20.0  # what a dead job or kernel left is gone within this
STALL_SHUTDOWN_S = 5.0  # every job of the matrix runs with a stall shutdown, for the stall case
SETUP = f"""%%hvd -np {{np}} --framework mxnet -x HOROVOD_STALL_CHECK_TIME_SECONDS=1 \
-x HOROVOD_STALL_SHUTDOWN_TIME_SECONDS={STALL_SHUTDOWN_S:g}
import mxnet as mx, time
tail = hvd.add_process_set(range(1, hvd.size()))
print('ready', hvd.rank())"""

# The next cell. `tail` is the process set made before the failure: kept with the ranks, or made again on new ones.
CHECK = """%%hvd --timeout 90
import mxnet as mx
print('next', hvd.rank(), flush=True)
kept = 'tail' in globals()
if not kept:
    tail = hvd.add_process_set(range(1, hvd.size()))
unnamed = hvd.allreduce(mx.nd.ones(2) * hvd.rank(), op=hvd.Sum).asnumpy().tolist()
named = hvd.allreduce(mx.nd.ones(2), op=hvd.Sum, name='check.named').asnumpy().tolist()
in_set = hvd.allreduce(mx.nd.ones(2), op=hvd.Sum, process_set=tail).asnumpy().tolist() if tail.included() else None
net = mx.gluon.nn.Dense(2, in_units=3, prefix='check_')
net.initialize(mx.init.Constant(hvd.rank() + 1))
hvd.broadcast_parameters(net.collect_params(), root_rank=0)
weights = sorted({float(v) for p in net.collect_params().values() for v in p.data().asnumpy().ravel()})
result = [kept, unnamed, named, in_set, weights]"""

WAITING = "import time\nprint('waiting', flush=True)\n"
# Each failing cell leaves the ranks' counts of unnamed ops apart, as a failed training step does.
FAILURES = {
    "a rank raises": ("%%hvd\nif hvd.rank() == hvd.size() - 1:\n    raise ValueError('boom')\n"
                      "hvd.allreduce(mx.nd.ones(2)).asnumpy()", "rank {last} raised ValueError: boom"),
    "every rank raises": ("%%hvd\nif hvd.rank() == 0:\n    hvd.allreduce(mx.nd.ones(2))\n"
                          "raise RuntimeError(f'all, {hvd.rank()}')", "raised RuntimeError: all, "),
    "kernel interrupt": (f"%%hvd\n{WAITING}hvd.allreduce(mx.nd.ones(2)) if hvd.rank() == 0 else None\n"
                         "time.sleep(60)", "the kernel was interrupted: sent SIGINT to ranks"),
    "--timeout": (f"%%hvd --timeout 3\n{WAITING}hvd.allreduce(mx.nd.ones(2)) if hvd.rank() == 0 else None\n"
                  "time.sleep(60)", "TimeoutError: cell exceeded --timeout 3s"),
    "kill -9 of a rank": (f"%%hvd\n{WAITING}time.sleep(60)", "rank {last} (pid {pid} on"),
    "kill -9 of mpiexec": (f"%%hvd\n{WAITING}time.sleep(60)", "mpiexec (pid {pid}) died. The job was stopped"),
    "kill -9 of the controller": (f"%%hvd\n{WAITING}time.sleep(60)", "the ipyparallel controller (pid {pid}) died"),
    "a stall": ("%%hvd\nhvd.allreduce(mx.nd.ones(2))\n"
                "hvd.allreduce(mx.nd.ones(2), name=f'only.{hvd.rank()}').asnumpy()",
                "raised EngineAbortedError: engine aborted by rank 0: stall shutdown"),
    # The others' PeerArgumentError (an MXNetError) reaches the notebook first; the report still leads with the
    # rank whose argument was bad.
    "a bad argument on one rank": ("%%hvd\nimport time\nx = None if hvd.rank() == hvd.size() - 1 else mx.nd.ones(2)\ntry:\n"
                                   "    hvd.allreduce(x, name='metric').asnumpy()\nexcept TypeError:\n"
                                   "    time.sleep(1)\n    raise",
                                   "rank {last} raised TypeError: allreduce: expected an mxnet NDArray, got NoneType"),
}
KEEPS_THE_JOB = ("a rank raises", "every rank raises", "kernel interrupt", "--timeout", "a stall",
                 "a bad argument on one rank")
CASES = ["kill -9 of the kernel during start-up", "kill -9 of the kernel in a cell", *FAILURES]
# Killing the kernel, mpiexec or the controller ends the whole job whatever its size (the reaper and the
# magic stop every process of it, and the next cell starts one as at first), so those run at 2 ranks only;
# at 3, the cases whose ranks outlive the failure differently: survivors beside the failing rank, a stall's
# report of several missing ranks, a process set of more than one member kept or made again.
WHOLE_JOB = ("kill -9 of the kernel during start-up", "kill -9 of the kernel in a cell", "kill -9 of mpiexec",
             "kill -9 of the controller")


class Lab:
    """The kernel and job the matrix of one rank count runs in, and the table of what each failure cost."""

    def __init__(self, np_: int):
        self.np = np_
        self.kernel: Kernel | None = None
        self.ready = False  # the job runs and `tail` is defined on its ranks
        self.rows: list[dict] = []

    def new_kernel(self) -> Kernel:
        self.close()
        self.kernel = Kernel()
        self.kernel.execute("%load_ext jupyter_hvd")
        return self.kernel

    def close(self) -> None:
        if self.kernel is not None:
            self.kernel.close()
        self.kernel, self.ready = None, False

    def setup(self) -> float:
        """Start the job with `tail` defined; return the seconds until its first rank's output."""
        kernel = self.kernel or self.new_kernel()
        reply, out, first = timed(kernel, SETUP.format(np=self.np), NEXT_CELL_LIMIT_S)
        assert reply["status"] == "ok", out
        self.ready = True
        return first

    def job(self) -> dict:
        """The running job's folder and the pids of its controller, mpiexec and ranks."""
        code = ("c = get_ipython().magics_manager.registry['HvdMagics'].cluster\n"
                "import json; print(json.dumps({'folder': c._profile_dir, 'controller': c._cluster.controller."
                "process.pid, 'mpiexec': next(iter(c._cluster.engines.values())).process.pid, "
                "'ranks': [r.pid for r in c.ranks]}))")
        reply, out = self.kernel.execute(code)
        assert reply["status"] == "ok", out
        return json.loads(out.strip().splitlines()[-1])

    def check_next_cell(self, kept: bool) -> float:
        """Run the next cell and %hvd pull; assert what it computed; return the seconds until its first output."""
        reply, out, first = timed(self.kernel, CHECK, NEXT_CELL_LIMIT_S)
        assert reply["status"] == "ok", out
        last = self.np - 1
        reply, out = self.kernel.execute(f"%hvd pull result --rank {last}\nimport json\nprint('PULLED', "
                                         "json.dumps(result))")
        assert reply["status"] == "ok" and f"[hvd] pulled result from rank {last}" in out, out
        pulled = json.loads(out.split("PULLED", 1)[1])
        total = sum(range(self.np))
        # Rank 0's weights (its rank + 1) everywhere, and biases 0, once broadcast_parameters ran.
        assert pulled == [kept, [total] * 2, [self.np] * 2, [self.np - 1] * 2, [0.0, 1.0]], out
        self.ready = True
        return first

    def record(self, failure: str, control: float | None, first: float, cleanup: float | None, lost: str,
               said: str = "") -> None:
        row = {"np": self.np, "failure": failure, "control_back_s": control, "next_first_output_s": first,
               "cleaned_up_s": cleanup, "lost": lost, "said": said}
        self.rows.append(row)
        print(json.dumps(row))


def timed(kernel: Kernel, code: str, limit: float, on_output=None) -> tuple[dict, str, float | None]:
    """Run a cell; return its reply, its output and the seconds until its first line from a rank."""
    began = time.monotonic()
    first: list[float] = []

    def watch(text: str) -> None:
        if not first and "[rank " in text:
            first.append(time.monotonic() - began)
        if on_output is not None:
            on_output(text)

    reply, out = kernel.execute(code, timeout=limit, on_output=watch)
    return reply, out, first[0] if first else None


def gone_within(folder: str, limit: float) -> float:
    """Seconds until no process of the job whose folder is ``folder`` runs and the folder is removed."""
    began = time.monotonic()
    while job_processes(folder) or os.path.exists(folder):
        assert time.monotonic() - began < limit, (describe(job_processes(folder)), os.path.exists(folder))
        time.sleep(0.05)
    return time.monotonic() - began


def kernel_cleaned_up(kernel: Kernel, kernel_pid: int, began: float) -> float:
    """Seconds from ``began`` until nothing the killed kernel started runs and its jobs' folders are gone."""
    left = wait_gone(kernel.tag, CLEANUP_LIMIT_S)
    assert not left, describe(left)
    pattern = os.path.join(tempfile.gettempdir(), f"jupyter-hvd-{kernel_pid}.*")
    while glob.glob(pattern):
        assert time.monotonic() - began < CLEANUP_LIMIT_S, glob.glob(pattern)
        time.sleep(0.05)
    return time.monotonic() - began


@pytest.fixture(scope="module")
def lab(request):
    lab = Lab(request.param)
    yield lab
    lab.close()
    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        print(f"\nrecovery at {lab.np} ranks: failure | control back s | next cell's first output s | "
              "cleaned up s | lost")
        for row in lab.rows:
            print(" | ".join([row["failure"], _s(row["control_back_s"]), _s(row["next_first_output_s"]),
                              _s(row["cleaned_up_s"]), row["lost"]]))


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


@pytest.mark.parametrize("failure", CASES)
@pytest.mark.parametrize("lab", [2], indirect=True, ids=["np2"])
def test_the_next_cell_works_after(lab, failure):
    run_case(lab, failure)


@pytest.mark.parametrize("failure", [case for case in CASES if case not in WHOLE_JOB])
@pytest.mark.parametrize("lab", [3], indirect=True, ids=["np3"])
def test_the_next_cell_works_after_at_3_ranks(lab, failure):
    run_case(lab, failure)


def run_case(lab: Lab, failure: str) -> None:
    if failure.startswith("kill -9 of the kernel"):
        kernel_killed(lab, during_start=failure.endswith("start-up"))
    else:
        cell_failed(lab, failure)


def kernel_killed(lab: Lab, during_start: bool) -> None:
    """Kill only the kernel's process (as the OOM killer would): the job's reaper must end the rest."""
    if during_start:
        kernel = lab.new_kernel()
        kernel.kc.execute(SETUP.format(np=lab.np))
        deadline = time.monotonic() + NEXT_CELL_LIMIT_S  # kill once mpiexec is starting the ranks
        while not any(p.name() in ("mpiexec", "prterun") for p in tagged(kernel.tag)):
            assert time.monotonic() < deadline, "mpiexec never started"
            time.sleep(0.02)
    else:
        if not lab.ready:
            lab.setup()
        kernel = lab.kernel
        kernel.kc.execute(f"%%hvd\n{WAITING}time.sleep(60)")
        _wait_for_output(kernel, lab.np)
    pid = kernel.km.provisioner.process.pid
    began = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    cleanup = kernel_cleaned_up(kernel, pid, began)
    lab.close()
    first = lab.setup()  # the next cell, in a new kernel: a new job
    lab.check_next_cell(kept=True)
    lab.record(f"kill -9 of the kernel {'during start-up' if during_start else 'in a cell'}", None, first, cleanup,
               "the kernel and its job (a new kernel starts from nothing)")


def _wait_for_output(kernel: Kernel, np_: int) -> None:
    """Read the running cell's output until every rank printed 'waiting'."""
    seen = set()
    deadline = time.monotonic() + NEXT_CELL_LIMIT_S
    while len(seen) < np_:
        assert time.monotonic() < deadline, seen
        msg = kernel.kc.get_iopub_msg(timeout=deadline - time.monotonic())
        if msg["msg_type"] == "stream":
            seen |= {line.split("]")[0] for line in msg["content"]["text"].splitlines() if "waiting" in line}


def cell_failed(lab: Lab, failure: str) -> None:
    if not lab.ready:
        lab.setup()
    job = lab.job()
    source, expected = FAILURES[failure]
    last = lab.np - 1
    victim = {"kill -9 of a rank": job["ranks"][last], "kill -9 of mpiexec": job["mpiexec"],
              "kill -9 of the controller": job["controller"]}.get(failure)
    failed_at: list[float] = []  # when the failure happened

    def inject(text: str) -> None:
        """Interrupt the kernel, or kill the victim, once every rank is inside the cell."""
        if (victim is not None or failure == "kernel interrupt") and not failed_at and text.count("waiting") >= lab.np:
            failed_at.append(time.monotonic())
            if victim is None:
                lab.kernel.km.interrupt_kernel()
            else:
                os.kill(victim, signal.SIGKILL)

    began = time.monotonic()
    reply, out = lab.kernel.execute(source, timeout=NEXT_CELL_LIMIT_S, on_output=inject)
    ended = time.monotonic()
    assert reply["status"] == "error", out
    expected = expected.format(last=last, pid=victim)
    assert expected in out, out
    said = next(line for line in reversed(out.splitlines()) if expected in line)  # the error's, not the monitor's
    # The failure's moment: the injection, the deadline, the stall shutdown, or (a raise) the cell's start.
    failed = {"--timeout": began + 3.0, "a stall": began + STALL_SHUTDOWN_S}.get(failure, (failed_at or [began])[0])
    control = max(0.0, ended - failed)
    assert control < CONTROL_LIMIT_S, out
    keeps = failure in KEEPS_THE_JOB
    cleanup = None
    if keeps:
        assert lab.job()["ranks"] == job["ranks"]  # the same ranks, their variables with them
    else:
        assert "The job was stopped; the next %%hvd cell starts new ranks." in out, out
        cleanup = control + gone_within(job["folder"], CLEANUP_LIMIT_S)
        lab.ready = False
    first = lab.check_next_cell(kept=keeps)
    if not keeps:
        assert set(lab.job()["ranks"]).isdisjoint(job["ranks"])
        assert not psutil.pid_exists(victim) or psutil.Process(victim).status() == psutil.STATUS_ZOMBIE
    lab.record(failure, control, first, cleanup,
               "nothing: the ranks, their variables and process sets are kept (the engine restarts)" if keeps else
               "the ranks and their variables, process sets included (new ranks start)", said)
