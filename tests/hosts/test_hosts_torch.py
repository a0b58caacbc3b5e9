"""jupyter_hvd.torch across the namespace hosts: the torch training suite on two ranks on each of two hosts, the
digits example under hvdrun, %%hvd --framework torch cells training on ranks of two hosts, and a host lost in the
middle of DistributedOptimizer's steps."""
import os
import re
import sys

import pytest
from host_loss_runs import TORCH_STEPS, hvdrun_loss
from hosts_jobs import rank_tests, run_job
from test_kernel import Kernel
from test_hosts_loss import MARGIN_S

from jupyter_hvd.runner.host_loss import HOST_SILENCE_S

pytest.importorskip("torch")
pytestmark = pytest.mark.timeout(400)

ONE_THREAD = {"OMP_NUM_THREADS": "1"}  # four ranks share the machine's cores


def test_training_on_two_hosts_matches_one_process_with_the_whole_batch(cluster):
    """Every case of rank_torch_training (fp16 compression, backward_passes_per_step, groups, SyncBatchNorm,
    channels_last...) with the gradients crossing between hosts."""
    rank_tests(cluster, "h1:2,h2:2", "rank_torch_training.py", flags=("-x", "OMP_NUM_THREADS"), **ONE_THREAD)


def test_the_digits_example_trains_across_hosts(cluster):
    result = run_job(cluster, "-np", "4", "-H", "h1:2,h2:2", "-x", "OMP_NUM_THREADS", sys.executable,
                     "examples/torch_mnist.py", "--epochs", "12", **ONE_THREAD)
    out = result.stdout
    assert result.returncode == 0, out[-6000:]
    accuracy = float(re.search(r"final test accuracy: ([0-9.]+) on 4 rank", out).group(1))
    assert accuracy >= 0.90, out[-3000:]
    last = {rank: re.findall(rf"\[rank {rank}\] epoch 12/12: train loss [0-9.]+, test accuracy ([0-9.]+)", out)
            for rank in range(4)}
    assert all(len(found) == 1 for found in last.values()), out[-3000:]
    assert len({found[0] for found in last.values()}) == 1, last  # the test shards' counts summed on every rank


CELLS = ("""%%hvd -np 4 --hosts h1:2,h2:2 --framework torch
import socket, torch
torch.manual_seed(hvd.rank())  # a model of its own on each rank, until the broadcast
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.003),
                               named_parameters=model.named_parameters())
x = torch.randn(64, 8) + hvd.rank()
y = x.sum(1, keepdim=True)

def train(steps):
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return loss.item()

def agree():
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return all(torch.equal(flat, other) for other in hvd.allgather_object(flat))""",
         "%%hvd\nprint('on', socket.gethostname(), 'loss', train(30), 'agree', agree())",
         "%%hvd\nprint('on', socket.gethostname(), 'loss', train(30), 'agree', agree())")


def test_cells_train_on_ranks_of_two_hosts(cluster):
    saved = dict(os.environ)  # the kernel inherits this process's environment: ssh to the hosts with its config
    os.environ.update({k: v for k, v in cluster.env().items() if k.startswith("PRTE_")})
    kernel = Kernel()
    try:
        kernel.execute("%load_ext jupyter_hvd")
        losses = []
        for cell in CELLS:
            reply, out = kernel.execute(cell, timeout=240)
            assert reply["status"] == "ok", out
            found = re.findall(r"\[rank (\d)\] on (h\d) loss (\S+) agree (\w+)", out)
            if found:
                assert sorted((r, h, a) for r, h, _, a in found) == [
                    ("0", "h1", "True"), ("1", "h1", "True"), ("2", "h2", "True"), ("3", "h2", "True")], out
                losses.append([float(v) for _, _, v, _ in sorted(found)])
        assert all(b < a for a, b in zip(*losses)), losses  # every rank's loss fell from one cell to the next
    finally:
        kernel.close()
        os.environ.clear()
        os.environ.update(saved)


@pytest.mark.parametrize("link_down", [False, True], ids=["processes killed", "link down"])
def test_a_host_lost_in_training_releases_every_other_rank(cluster, link_down):
    loss = hvdrun_loss(cluster, link_down, script=TORCH_STEPS)
    print(f"\nhvdrun, torch training, h2 lost ({'link down' if link_down else 'processes killed'}): every rank "
          f"on h1 released {loss.released_s:.1f} s after, hvdrun exited {loss.reported_s:.1f} s after")
    assert loss.released_s < HOST_SILENCE_S + MARGIN_S
    assert "hvdrun: lost host h2 (ranks 2, 3)" in loss.output, loss.output
