"""Run on every rank of a job across hosts (tests/hosts): the topology matches the hosts the job was given,
and collectives that cross hosts give the same answers as on one."""
import os
import socket

import numpy as np

import jupyter_hvd as hvd
from jupyter_hvd.basics import is_homogeneous


def layout() -> list[tuple[str, int]]:
    """The hosts and slots the job was placed on, in order (JHVD_EXPECT_HOSTS="h1:2,h2:2")."""
    return [(host, int(slots)) for host, slots in (item.split(":") for item in os.environ["JHVD_EXPECT_HOSTS"].split(","))]


def test_every_rank_knows_its_host_and_its_place_there():
    hosts = layout()
    owner = [(h, i, local) for i, (h, slots) in enumerate(hosts) for local in range(slots)]  # ranks fill hosts in order
    host, index, local = owner[hvd.rank()]
    assert hvd.size() == len(owner)
    assert socket.gethostname() == host
    assert (hvd.local_rank(), hvd.local_size()) == (local, hosts[index][1])
    sharing = [i for i, (_, slots) in enumerate(hosts) if slots > local]  # the hosts with a rank of this local rank
    assert (hvd.cross_rank(), hvd.cross_size()) == (sharing.index(index), len(sharing))
    assert is_homogeneous() == (len({slots for _, slots in hosts}) == 1)


def test_collectives_across_hosts():
    n, me = hvd.size(), hvd.rank()
    np.testing.assert_array_equal(hvd.allreduce(np.full(1000, me, np.float64), op=hvd.Sum, name="sum"),
                                  np.full(1000, n * (n - 1) / 2))
    big = np.full(1 << 20, 1.0, np.float32)  # 4 MiB: the ring path across hosts
    np.testing.assert_array_equal(hvd.allreduce(big, op=hvd.Sum, name="big"), big * n)
    np.testing.assert_array_equal(hvd.allgather(np.array([me] * (me + 1)), name="gather"),
                                  np.concatenate([[r] * (r + 1) for r in range(n)]))
    np.testing.assert_array_equal(hvd.broadcast(np.arange(5) * (me + 1), root_rank=n - 1, name="bcast"),
                                  np.arange(5) * n)


def test_many_named_allreduces_for_the_timeline():
    for step in range(20):
        hvd.allreduce(np.ones(256, np.float32), name=f"tl.{step}")
