"""A two-minute tour of the engine: collectives and a tiny data-parallel regression, per rank.

Run:  hvdrun -np 2 python examples/allreduce_demo.py
"""
import numpy as np

import jupyter_hvd as hvd


def main() -> None:
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    say = lambda *a: print(f"[rank {r}/{n}]", *a, flush=True)  # noqa: E731

    say("allreduce (Sum) of [rank+1]*3:", hvd.allreduce(np.full(3, r + 1.0), op=hvd.Sum))
    say("allgather of rank-sized blocks:", hvd.allgather(np.full(r + 1, r, dtype=np.int32)))
    say("broadcast from rank 0:", hvd.broadcast(np.array([r * 10.0]), root_rank=0))
    say("allgather_object:", hvd.allgather_object({"rank": r}))

    # Data-parallel least squares: each rank sees its own shard, gradients are averaged.
    rng = np.random.default_rng(r)
    true_w = np.array([2.0, -3.0, 0.5])
    x = rng.normal(size=(256, 3))
    y = x @ true_w + 0.01 * rng.normal(size=256)
    w = hvd.broadcast(rng.normal(size=3), root_rank=0, name="w0")
    for step in range(200):
        grad = 2 * x.T @ (x @ w - y) / len(x)
        w -= 0.1 * hvd.allreduce(grad, name="grad")  # op defaults to Average, as in Horovod
    say("learned weights:", np.round(w, 3), "(true:", true_w, ")")
    m = hvd.metrics()
    say(f"engine: {m['ops']['allreduce']} allreduces, {m['cached_requests']} negotiated via the cache")
    hvd.shutdown()


if __name__ == "__main__":
    main()
