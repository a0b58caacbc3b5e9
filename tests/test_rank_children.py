"""Processes a rank starts (multiprocessing children, DataLoader workers, subprocesses) under hvdrun: a script
that calls hvd.init() at its top level runs it again in every 'spawn' or 'forkserver' child, which then joined
the job as a second copy of its rank (a segfault in MPI, or the launcher stopping the job when the child exited,
and hvdrun hanging). Now such a child, and any forked one, answers the topology queries with its rank's and
refuses collectives with a clear error; a job started from within a rank is a job of its own."""
import sys
import textwrap

import pytest
from hvdrun_cli import run_hvdrun

pytestmark = pytest.mark.timeout(180)

CHILD = textwrap.dedent("""
    import multiprocessing, sys
    from queue import Empty
    import numpy as np
    import jupyter_hvd as hvd
    from jupyter_hvd.basics import is_homogeneous
    hvd.init()  # at the top level, as many scripts do: 'spawn' and 'forkserver' children run it again

    def topology():
        return (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), hvd.cross_rank(), hvd.cross_size(),
                is_homogeneous())

    def child(queue):
        def collective():
            hvd.init()
            hvd.allreduce(np.ones(1), name="from.a.child")
            return "no error"

        answers = []
        for ask in (collective, topology):  # each error is the answer, so that the parent never waits for one
            try:
                answers.append(ask())
            except Exception as e:
                answers.append(f"{type(e).__name__}: {e}")
        queue.put((hvd.is_initialized(), answers[1], answers[0]))

    def answer(process, queue):
        # A child that dies before it answers (its init crashed) ends the wait at once, with its exit code.
        while process.is_alive() or not queue.empty():
            try:
                return queue.get(timeout=1)
            except Empty:
                pass
        return None, None, f"the child exited with {process.exitcode} before answering"

    if __name__ == "__main__":
        context = multiprocessing.get_context(sys.argv[1])
        queue = context.Queue()
        process = context.Process(target=child, args=(queue,))
        process.start()
        initialized, seen, error = answer(process, queue)
        process.join(60)
        print(f"rank {hvd.rank()}: child initialized={initialized} same={seen == topology()} "
              f"exit={process.exitcode} {error}", flush=True)
        print(f"rank {hvd.rank()}: sum {hvd.allreduce(np.ones(1), op=hvd.Sum)[0]:g}", flush=True)
""")

LOADER = textwrap.dedent("""
    import sys
    import torch
    from torch.utils.data import DataLoader, Dataset
    import jupyter_hvd.torch as hvd
    hvd.init()

    class Items(Dataset):
        def __len__(self):
            return 16

        def __getitem__(self, i):
            if i == 13:
                raise ValueError(f"item {i} is bad")
            return torch.tensor([float(hvd.rank()), float(i)])

    if __name__ == "__main__":
        loader = DataLoader(Items(), batch_size=4, num_workers=2, multiprocessing_context=sys.argv[1])
        seen = []
        try:
            for batch in loader:
                assert (batch[:, 0] == hvd.rank()).all()  # the workers answered hvd.rank() with their rank's
                seen.append(float(hvd.allreduce(batch[:, 1].sum(), op=hvd.Sum)))
        except ValueError as e:
            print(f"rank {hvd.rank()}: {e} after {seen}", flush=True)
        print(f"rank {hvd.rank()}: sum {float(hvd.allreduce(torch.ones(1), op=hvd.Sum)):g}", flush=True)
""")

NESTED = textwrap.dedent("""
    import subprocess, sys
    import numpy as np
    import jupyter_hvd as hvd
    hvd.init()
    if sys.argv[1:] == ["inner"]:
        print(f"inner size {hvd.size()} sum {hvd.allreduce(np.ones(1), op=hvd.Sum)[0]:g}", flush=True)
    elif hvd.rank() == 0:
        inner = subprocess.run([sys.executable, "-m", "jupyter_hvd.runner.hvdrun", "-np", "2", sys.executable,
                                __file__, "inner"], capture_output=True, text=True, timeout=90)
        print(inner.stdout + inner.stderr[-2000:], flush=True)
    hvd.barrier()
""")


def run_script(tmp_path, source: str, *args: str):
    script = tmp_path / "script.py"
    script.write_text(source)
    return run_hvdrun("-np", "2", sys.executable, str(script), *args)


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_a_child_of_a_rank_reads_its_ranks_place_and_is_refused_collectives(tmp_path, method):
    done = run_script(tmp_path, CHILD, method)
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in (0, 1):
        assert (f"rank {rank}: child initialized=True same=True exit=0 RuntimeError: this process was started by "
                f"rank {rank} (a DataLoader worker or another child process): it can ask hvd.rank()") in done.stdout, \
            done.stdout + done.stderr
        assert f"rank {rank}: sum 2" in done.stdout


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_dataloader_workers_of_a_script_that_inits_at_its_top_level(tmp_path, method):
    pytest.importorskip("torch")
    done = run_script(tmp_path, LOADER, method)
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in (0, 1):
        assert f"rank {rank}: sum 2" in done.stdout, done.stdout + done.stderr
        assert f"rank {rank}: Caught ValueError in DataLoader worker process" in done.stdout, done.stdout


def test_a_job_started_from_a_rank_is_a_job_of_its_own(tmp_path):
    done = run_script(tmp_path, NESTED)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("inner size 2 sum 2") == 2, done.stdout + done.stderr
