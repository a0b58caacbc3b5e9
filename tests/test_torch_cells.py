"""PyTorch training in a real kernel the way people run it: a training cell stopped mid-step with the stop
button, the cell that builds the optimizer run again, then training on, on the same two ranks."""
import re
import time

import pytest

pytest.importorskip("torch")

from test_kernel import Kernel  # noqa: E402

pytestmark = pytest.mark.timeout(300)

SETUP = """%%hvd -np 2 --framework torch
import time, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
x = torch.randn(64, 8) + hvd.rank()
y = x.sum(1, keepdim=True)

def train(steps, pause_before_step=False):
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if pause_before_step:
            print('waiting', flush=True)
            time.sleep(60)
        opt.step()
    return loss.item()

def agree():
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = hvd.allgather(flat[None])
    return all(torch.equal(everyone[0], row) for row in everyone)"""

OPTIMIZER = """%%hvd
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
                               named_parameters=model.named_parameters())"""

TRAIN_ON = "%%hvd --timeout 60\nprint('loss', train(20), 'agree', agree())"


@pytest.fixture(scope="module")
def kernel():
    k = Kernel()
    k.execute("%load_ext jupyter_hvd")
    for cell in (SETUP, OPTIMIZER):
        reply, out = k.execute(cell, timeout=180)
        assert reply["status"] == "ok", out
    yield k
    k.close()


def losses(out: str) -> list[float]:
    found = [(int(r), float(v), a) for r, v, a in re.findall(r"\[rank (\d)\] loss (\S+) agree (\w+)", out)]
    assert sorted(r for r, _, _ in found) == [0, 1] and all(a == "True" for _, _, a in found), out
    return [v for _, v, _ in sorted(found)]


def test_training_goes_on_after_the_stop_button_cut_a_step_short(kernel):
    reply, out = kernel.execute(TRAIN_ON)
    assert reply["status"] == "ok", out
    first = losses(out)
    sent = []

    def stop_once_both_wait(text: str) -> None:
        if not sent and "[rank 0] waiting" in text and "[rank 1] waiting" in text:
            sent.append(time.monotonic())
            kernel.km.interrupt_kernel()

    # Both ranks stop with their gradients' allreduces started and the step not taken.
    reply, out = kernel.execute("%%hvd\ntrain(1, pause_before_step=True)", timeout=90, on_output=stop_once_both_wait)
    assert sent and reply["status"] == "error" and "KeyboardInterrupt" in out, out

    reply, out = kernel.execute(TRAIN_ON)
    assert reply["status"] == "ok", out
    second = losses(out)
    assert all(b < a for a, b in zip(first, second)), (first, second)


def test_training_goes_on_after_the_optimizer_cell_runs_again(kernel):
    reply, out = kernel.execute(OPTIMIZER)
    assert reply["status"] == "ok", out
    reply, out = kernel.execute(TRAIN_ON)
    assert reply["status"] == "ok", out
    assert "already in flight" not in out
    losses(out)


def test_ranks_a_failed_cell_left_a_step_apart_agree_again(kernel):
    """As when a failure lands between one rank's update and the other's: rank 1 takes a step alone."""
    cell = ("%%hvd\nif hvd.rank() == 1:\n    opt.zero_grad()\n"
            "    torch.nn.functional.mse_loss(model(x), y).backward()\n"
            "    with opt.skip_synchronize():\n        opt.step()\nelse:\n    raise RuntimeError('cut short')")
    reply, out = kernel.execute(cell, timeout=90)
    assert reply["status"] == "error" and "cut short" in out, out
    reply, out = kernel.execute(TRAIN_ON)
    assert reply["status"] == "ok", out
    losses(out)
    assert "rank 1's parameters differed from rank 0's after the failed cell" in out, out


ELASTIC = """%%hvd
@hvd.elastic.run
def train_elastic(state, steps, fail_at=None):
    for state.step in range(state.step, steps):
        train(1)
        if state.step == fail_at:
            hvd.allreduce(torch.zeros(hvd.rank() + 1), name='mismatch')  # a TensorMismatchError on every rank
        state.commit()
    return agree()

state = hvd.elastic.TorchState(model, opt, step=0)"""


def test_an_elastic_run_that_fails_goes_on_from_its_last_commit_in_the_next_cell(kernel):
    """Horovod's hvd.elastic in cells: the failed run's state goes back to its last commit on every rank (the
    traceback of the first rank to report its error says so), and the next cell's run syncs it and trains on
    from there."""
    reply, out = kernel.execute(ELASTIC)
    assert reply["status"] == "ok", out
    reply, out = kernel.execute("%%hvd\ntrain_elastic(state, 10, fail_at=4)", timeout=90)
    assert reply["status"] == "error" and "TensorMismatchError" in out, out
    first = re.search(r"rank (\d) raised TensorMismatchError", out)  # whichever rank reported first
    assert first and f"also failed: rank {1 - int(first.group(1))} (TensorMismatchError)" in out, out
    assert "the elastic state was restored to its last commit()" in out, out
    reply, out = kernel.execute("%%hvd\nprint('at', state.step)\nprint('agree', train_elastic(state, 10))")
    assert reply["status"] == "ok", out
    assert "[rank 0] at 3" in out and "[rank 1] at 3" in out, out  # step 4 was not committed
    assert "[rank 0] agree True" in out and "[rank 1] agree True" in out, out


WORKERS = """%%hvd --timeout 120
import math, multiprocessing
from torch.utils.data import DataLoader, Dataset

class Squares(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        return torch.tensor([float(i * i)])

def root(x):
    return math.sqrt(x)

sums = [float(sum(b.sum() for b in DataLoader(Squares(), batch_size=16, num_workers=1, multiprocessing_context=how,
                                              collate_fn=lambda items: torch.cat(items))))
        for how in ('forkserver', 'spawn', 'fork')]
with multiprocessing.get_context('spawn').Pool(1) as pool:
    roots = pool.map(root, [4, 9])
print('workers', sums, roots)"""


def test_workers_started_with_spawn_or_forkserver_get_the_cells_definitions(kernel):
    """Horovod's PyTorch examples give DataLoader a 'forkserver' context: with a Dataset class or a function
    the cells defined, each worker died with "Can't get attribute 'Squares' on <module '__main__'>" (in a
    notebook's kernel too), since multiprocessing pickles them by their name in __main__."""
    reply, out = kernel.execute(WORKERS, timeout=150)
    assert reply["status"] == "ok", out
    for rank in (0, 1):
        assert f"[rank {rank}] workers [85344.0, 85344.0, 85344.0] [2.0, 3.0]" in out, out
