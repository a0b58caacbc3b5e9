"""Runs a storm on this rank: every step of the plan, each result checked against the model.

On the first divergence, error or hang the rank prints what it was doing, with the seed, the op
index and the command that replays it, aborts the engine (so the other ranks stop too) and exits
non-zero.
"""
import argparse
import faulthandler
import json
import os
import shlex
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from . import data, features, model, settings as engine_settings
from .plan import AddSet, Join, Op, Planner, RemoveSet, Restart, Wait

SIM_LIBS = {"JUPYTER_HVD_CUDART_LIB": "libjhvd_sim_cudart.so", "JUPYTER_HVD_NCCL_LIB": "libjhvd_sim_nccl.so",
            "JUPYTER_HVD_CUDA_DRIVER_LIB": "libjhvd_sim_cuda.so"}


class StormFailure(Exception):
    """A result or an exception that the model does not allow."""


@dataclass
class Pending:
    op: Op
    handle: Any
    passed: list      # the tensors given to the engine (in place: also the results)


def parse(argv: Optional[list] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m storm", description=__doc__)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ops", type=int, default=3000, help="collective ops in the plan (every rank counts the same)")
    p.add_argument("--stop-after", type=int, default=None, metavar="INDEX",
                   help="end the storm once op INDEX has run (to replay a failure quickly)")
    p.add_argument("--enable", default="", help="comma-separated features to turn on ('all' for every one)")
    p.add_argument("--disable", default="", help="comma-separated features to turn off")
    p.add_argument("--gpu", metavar="SIM_DIR", default=None,
                   help="also run ops on the simulated GPU whose libraries are in SIM_DIR (make sim-gpu: build/engine)")
    p.add_argument("--torch", action="store_true",
                   help="run the ops through jupyter_hvd.torch on CPU tensors (not with --gpu)")
    p.add_argument("--gpu-devices", type=int, default=0,
                   help="simulated devices (default: one per rank, so NCCL runs; fewer: ranks share them and stage)")
    p.add_argument("--watchdog", type=float, default=180.0, help="seconds without progress that count as a hang")
    p.add_argument("--trace", action="store_true", help="print every step before running it")
    p.add_argument("--list-features", action="store_true", help="print the features and exit")
    p.add_argument("--corrupt", type=int, default=None, metavar="INDEX",
                   help="flip a bit of the first non-empty allgather, broadcast or alltoall result from op INDEX on "
                        "(on that op's first member) before checking it: what a failure looks like")
    return p.parse_args(argv)


def _sim_environment(sim_dir: str, devices: int) -> None:
    """What makes the engine and simcupy load the simulated CUDA runtime, driver and NCCL."""
    for var, lib in SIM_LIBS.items():
        os.environ[var] = os.path.join(os.path.abspath(sim_dir), lib)
    os.environ.update(JUPYTER_HVD_TEST_SIM_GPU="1", JUPYTER_HVD_SIM_DEVICES=str(devices),
                      CUDA_VISIBLE_DEVICES=",".join(str(i) for i in range(devices)))


class Runner:
    def __init__(self, args: argparse.Namespace, size: int, rank: int):
        import jupyter_hvd as hvd

        self.core = hvd  # the numpy API, for what Horovod's torch API lacks
        self.torch = None
        if args.torch:
            if args.gpu is not None:
                raise SystemExit("--torch runs CPU tensors: leave out --gpu")
            import jupyter_hvd.torch as hvd
            import torch

            self.torch = torch
        self.hvd, self.args, self.size, self.rank = hvd, args, size, rank
        self.features = features.resolve([x for x in args.enable.split(",") if x],
                                         [x for x in args.disable.split(",") if x])
        self.gpu = args.gpu is not None
        self.cupy = None
        if self.gpu:
            import simcupy

            self.cupy = simcupy
        self.planner = Planner(args.seed, size, self.features, self.gpu, self.torch is not None)
        self.sets: dict = {}
        self.pending: dict = {}
        self.workdir = tempfile.mkdtemp(prefix=f"storm.{rank}.")
        self.timeline: Optional[str] = None
        self.segments: list = []
        self.counts: dict = {}
        self.step_text = "starting"
        self.current_op: Optional[Op] = None  # the op whose handle is being waited for
        self.op_index = 0                      # the last op this rank ran or waited for
        self.beat = time.monotonic()
        self.done = False

    # -- reporting --------------------------------------------------------------------------------------
    def replay(self, index: Optional[int]) -> str:
        python = os.environ.get("JUPYTER_HVD_STORM_PYTHON") or os.path.relpath(sys.executable)
        hvdrun = os.path.join(os.path.dirname(os.path.relpath(sys.executable)), "hvdrun")
        flags = [f"--seed {self.args.seed}", f"--ops {self.args.ops}", features.describe(self.features),
                 "--torch" if self.torch else ""]
        if self.gpu:
            flags.append(f"--gpu {shlex.quote(os.path.relpath(self.args.gpu))}")
            if self.args.gpu_devices:
                flags.append(f"--gpu-devices {self.args.gpu_devices}")
        if index is not None:
            flags.append(f"--stop-after {index}")
        return (f"PYTHONPATH=tests/ranks {hvdrun} -np {self.size} {python} -m storm "
                + " ".join(f for f in flags if f))

    def _say(self, text: str) -> None:
        print(f"[storm rank {self.rank}] {text}", file=sys.stderr, flush=True)

    def _watch(self) -> None:
        """A hang is a failure too: say where, with the stacks, and end the process."""
        while not self.done:
            time.sleep(1.0)
            if time.monotonic() - self.beat > self.args.watchdog and not self.done:
                self._say(f"HANG: no progress for {self.args.watchdog:.0f} s in {self.step_text}")
                self._say(f"seed {self.args.seed}; replay: {self.replay(self.op_index)}")
                faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
                sys.stderr.flush()
                os._exit(3)

    # -- the run ----------------------------------------------------------------------------------------
    def run(self) -> int:
        hvd = self.hvd
        threading.Thread(target=self._watch, daemon=True).start()
        self._start_segment(self.planner.first_settings())
        last = self.args.ops - 1 if self.args.stop_after is None else min(self.args.stop_after, self.args.ops - 1)
        start = time.perf_counter()
        current: Any = None
        try:
            for step in self.planner.steps():
                first_op = step if isinstance(step, Op) else step.ops[0] if isinstance(step, Join) else None
                if first_op is not None and first_op.index > last:
                    break
                current = step
                self._step(step)
            current = None
            self._step(self.planner.finish())
            hvd.barrier()
            elapsed = time.perf_counter() - start
            self._end_segment()
        except Exception as e:  # noqa: BLE001 - every failure is reported the same way, with the replay
            return self._fail(current, e)
        finally:
            self.done = True
        if self.rank == 0:
            self._report(elapsed, last + 1)
        shutil.rmtree(self.workdir, ignore_errors=True)
        return 0

    def _fail(self, step: Any, e: Exception) -> int:
        op = self.current_op if isinstance(step, (Wait, Join)) and self.current_op is not None else step
        where = op.describe() if isinstance(op, (Op, Join)) else repr(op)
        if isinstance(step, Join) and op is not step:
            where = f"{step.describe()}: {where}"
        index = op.index if isinstance(op, Op) else self.planner.ops - 1
        aborted = isinstance(e, self.hvd.EngineAbortedError) and e.origin_rank != self.rank
        kind = "stopped: another rank failed" if aborted else "FAILURE"
        self._say(f"{kind} at {where}\n    {type(e).__name__}: {e}")
        if not aborted:
            self._say(f"seed {self.args.seed}, op {index}, {self.size} ranks; replay with:\n    {self.replay(index)}")
            if self.hvd.is_initialized():
                self.hvd.abort(f"storm failure on rank {self.rank} at op {index}: {type(e).__name__}: {e}"[:2000])
                time.sleep(1.0)  # the other ranks say where they were before mpiexec ends the job
        return 1

    def _report(self, elapsed: float, ops: int) -> None:
        rate = ops / elapsed if elapsed > 0 else 0.0
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        through = " + simulated GPU" if self.gpu else " through jupyter_hvd.torch" if self.torch else ""
        print(f"storm: seed {self.args.seed}, {self.size} ranks{through}: "
              f"{ops} ops in {elapsed:.1f} s = {rate:.0f} ops/s; {len(self.segments)} engine segments", flush=True)
        print(f"storm: rank 0 ran {kinds}", flush=True)
        print("STORM_RESULT " + json.dumps({"seed": self.args.seed, "ranks": self.size, "gpu": self.gpu, "ops": ops,
                                            "seconds": round(elapsed, 3), "ops_per_s": round(rate, 1),
                                            "segments": len(self.segments)}), flush=True)

    def _step(self, step: Any) -> None:
        self.beat = time.monotonic()
        self.step_text = step.describe() if isinstance(step, (Op, Join)) else repr(step)
        if self.args.trace:
            self._say(self.step_text)
        if isinstance(step, Op):
            self.op_index = step.index
            if self.rank in step.ranks:
                self._op(step)
        elif isinstance(step, Wait):
            self._wait(step)
        elif isinstance(step, AddSet):
            self.sets[step.key] = self.hvd.add_process_set(list(step.ranks))
        elif isinstance(step, RemoveSet):
            if not self.hvd.remove_process_set(self.sets.pop(step.key)):
                raise StormFailure(f"remove_process_set of set {step.key} returned False")
        elif isinstance(step, Join):
            self._join(step)
        elif isinstance(step, Restart):
            self.hvd.barrier()
            self._end_segment()
            self._start_segment(step.settings)

    def _start_segment(self, s: dict) -> None:
        engine_settings.apply(s, self.workdir)
        self.timeline = os.environ.get("HOROVOD_TIMELINE")
        self.hvd.init()
        if (self.hvd.rank(), self.hvd.size()) != (self.rank, self.size):
            raise StormFailure(f"launched as rank {self.rank} of {self.size}, the engine says "
                               f"{self.hvd.rank()} of {self.hvd.size()}")
        self.sets = {0: self.hvd.global_process_set}
        self.segments.append(s)
        if self.gpu:
            self.cupy.cuda.Device(self.hvd.local_rank() % self.cupy.cuda.runtime.getDeviceCount()).use()
        if self.args.trace:
            self._say(f"engine settings: {engine_settings.describe(s)}")

    def _end_segment(self) -> None:
        self.hvd.shutdown()
        if self.timeline and self.rank == 0:  # every timeline is valid JSON once written
            with open(self.timeline) as f:
                events = json.load(f)
            if not isinstance(events, dict) or "traceEvents" not in events:
                raise StormFailure(f"timeline {self.timeline} has no traceEvents")
            os.unlink(self.timeline)

    # -- ops ----------------------------------------------------------------------------------------------
    def _inputs(self, op: Op, rank: int, own: bool) -> list:
        """Member ``rank``'s inputs as the model sees them; ``own``: as this rank submits them (skewed)."""
        j = op.ranks.index(rank)
        out = []
        for i, t in enumerate(op.tensors):
            dtype, shape = t.dtype, t.shapes[j]
            skew = op.skew if own and op.skew and op.skew[0] == rank and i == 0 else None
            if skew and skew[1] == "dtype":
                dtype = skew[2]
            if skew and skew[1] == "shape":
                shape = shape + (1,)
            out.append(data.values(self.args.seed, op.index, i, rank, dtype, shape, t.kind))
        if own and op.skew and op.skew[0] == rank and op.skew[1] == "count":  # a list of another length
            t = op.tensors[0]
            extra = range(len(out), op.skew[2])
            out = out[:op.skew[2]] + [data.values(self.args.seed, op.index, i, rank, t.dtype, t.shapes[j], t.kind)
                                      for i in extra]
        return out

    def _submitted(self, op: Op, own: list) -> list:
        """The tensors as this rank passes them: a non-contiguous view, or on the GPU."""
        device = op.device
        if op.skew and op.skew[0] == self.rank and op.skew[1] == "device":
            device = op.skew[2]
        out = []
        for i, x in enumerate(own):
            t = op.tensors[min(i, len(op.tensors) - 1)]  # a longer list's extra tensors are like the last
            if device:
                out.append(self.cupy.asarray(x))
            elif self.torch:
                out.append(data.to_torch(x) if t.layout < 0 else data.noncontig_torch(data.to_torch(x), t.layout))
            elif t.layout >= 0:
                out.append(data.noncontig(x, t.layout))
            else:
                out.append(x)
        return out

    def _op(self, op: Op) -> None:
        hvd = self.hvd
        key = op.api + (" on the GPU" if op.device else "")
        self.counts[key] = self.counts.get(key, 0) + 1
        if op.error in ("ValueError", "TypeError"):
            return self._bad_input(op)
        ps = self.sets[op.set_key]
        if op.api == "barrier":
            return self._expect(op, lambda: hvd.barrier(process_set=ps), None)
        if op.api == "broadcast_object":
            mine = data.obj(self.args.seed, op.index, self.rank)
            got = hvd.broadcast_object(mine, root_rank=op.root, name=op.name, process_set=ps)
            if not model.objects_equal(got, data.obj(self.args.seed, op.index, op.root)):
                raise StormFailure(f"broadcast_object returned another object than root {op.root}'s")
            return None
        if op.api == "allgather_object":
            got = hvd.allgather_object(data.obj(self.args.seed, op.index, self.rank), name=op.name, process_set=ps)
            want = [data.obj(self.args.seed, op.index, r) for r in op.ranks]
            if not model.objects_equal(got, want):
                raise StormFailure("allgather_object returned other objects than the members'")
            return None
        passed = self._submitted(op, self._inputs(op, self.rank, own=True))
        asynchronous = op.mode in ("async", "dropped")
        fn = getattr(hvd, f"{'grouped_' if op.group else ''}{op.api}{'_async' if asynchronous else ''}"
                          f"{'_' if op.in_place else ''}")
        mine = op.skew is not None and op.skew[0] == self.rank
        reduce = op.skew[2] if mine and op.skew[1] == "reduce" else op.reduce
        pre = op.skew[2] if mine and op.skew[1] == "scale" else op.pre
        root = op.skew[2] if mine and op.skew[1] == "root" else op.root
        arg = passed if op.group else passed[0]
        if op.api == "allreduce":
            call = lambda: fn(arg, name=op.name, op=reduce, prescale_factor=pre, postscale_factor=op.post,  # noqa: E731
                              process_set=ps)
        elif op.api == "reducescatter":
            call = lambda: fn(arg, op=reduce, name=op.name, process_set=ps, prescale_factor=pre,  # noqa: E731
                              postscale_factor=op.post)
        elif op.api == "allgather":
            call = lambda: fn(arg, name=op.name, process_set=ps)  # noqa: E731
        elif op.api == "broadcast":
            call = lambda: fn(arg, root, name=op.name, process_set=ps)  # noqa: E731
        else:
            splits = None if op.splits is None else list(op.splits[op.ranks.index(self.rank)])
            call = lambda: fn(arg, splits=splits, name=op.name, process_set=ps)  # noqa: E731
        if op.mode == "sync":
            return self._expect(op, call, passed)
        handle = call()
        if op.mode == "async":
            if self.rng_for(op.index).random() < 0.2:
                hvd.poll(handle)
            self.pending[op.index] = Pending(op, handle, passed)
        return None

    def _join(self, step: Join) -> None:
        """The early members join at once; the others run the ops (the early ones stand in), then join."""
        ranks = step.ranks
        if self.rank not in ranks:
            return
        self.counts["join"] = self.counts.get("join", 0) + 1
        if self.rank not in step.early:
            for op in step.ops:
                self.op_index, self.current_op = op.index, op
                self.step_text = f"while ranks {list(step.early)} have joined: {op.describe()}"
                self._op(op)
        self.current_op = None
        if self.torch and step.key == 0:
            last = self.hvd.join()  # Horovod's torch join: the global set's only
        else:
            last = self.core.join(process_set=self.sets[step.key])
        # An op that reaches the engine finishes only once the early members' joins have: the others join
        # later. Calls refused before the engine leave the order of the joins to chance.
        ordered = any(op.error not in ("ValueError", "TypeError") for op in step.ops)
        late = [r for r in ranks if r not in step.early] if ordered else list(ranks)
        if last not in late:
            raise StormFailure(f"join returned {last}; the last to join was one of {late}")

    def rng_for(self, *key: int) -> np.random.Generator:
        """This rank's own choices (wait order, poll or not), from the seed."""
        return np.random.default_rng([self.args.seed, self.rank, *key])

    def _wait(self, step: Wait) -> None:
        self.current_op = None
        mine = [i for i in step.ops if i in self.pending]
        order = self.rng_for(mine[0] if mine else 0, len(mine)).permutation(len(mine))
        for k in order:
            p = self.pending.pop(mine[int(k)])
            self.step_text = f"waiting for {p.op.describe()}"
            self.beat = time.monotonic()
            wait = p.handle.wait
            if self.rng_for(p.op.index, 1).random() < 0.5:
                wait = lambda h=p.handle: self.hvd.synchronize(h)  # noqa: E731 - Horovod's spelling
            self.current_op = p.op
            self.op_index = max(self.op_index, p.op.index)
            self._expect(p.op, wait, p.passed)
            if self.rng_for(p.op.index, 2).random() < 0.1 and not p.op.error:
                self._check(p.op, p.handle.wait(), p.passed)  # a second wait returns the same result

    def _expect(self, op: Op, call, passed: Optional[list]) -> None:
        """Runs ``call`` and checks its result, or that it raised what the op must raise."""
        hvd = self.hvd
        if op.error == "TensorMismatchError":
            try:
                call()
            except hvd.TensorMismatchError:
                return
            raise StormFailure(f"expected TensorMismatchError, the call succeeded")
        result = call()
        if op.api == "barrier":
            if result is not None:
                raise StormFailure(f"barrier returned {result!r}")
            return
        self._check(op, result, passed)

    def _host(self, x: Any, on_device: bool, what: str) -> np.ndarray:
        if self.torch:
            if not isinstance(x, self.torch.Tensor) or x.device.type != "cpu":
                raise StormFailure(f"{what}: returned {type(x).__name__}, not a CPU tensor")
            return data.from_torch(x)
        if on_device:
            if not isinstance(x, self.cupy.ndarray):
                raise StormFailure(f"{what}: a GPU op returned {type(x).__name__}, not a device array")
            return self.cupy.asnumpy(x)
        if not isinstance(x, np.ndarray):
            raise StormFailure(f"{what}: returned {type(x).__name__}, not a numpy array")
        return x

    def _group_type(self, op: Op) -> type:
        """What a group's result is: a list from the numpy API; horovod.torch's types through the torch one,
        tuples from grouped_allgather, grouped_allreduce_ and synchronize(), lists from the others."""
        if self.torch is None:
            return list
        return tuple if op.mode in ("async", "dropped") or op.in_place or op.api == "allgather" else list

    def _check(self, op: Op, result: Any, passed: list) -> None:
        results = result if op.group else [result]
        if op.group and (type(result) is not self._group_type(op) or len(result) != len(op.tensors)):
            raise StormFailure(f"a group of {len(op.tensors)} returned {type(result).__name__} "
                               f"of length {len(result) if hasattr(result, '__len__') else '?'}")
        me, n = op.ranks.index(self.rank), len(op.ranks)
        seed = self.args.seed
        for i, (t, got) in enumerate(zip(op.tensors, results)):
            what = f"tensor {i} ({t.dtype})"
            want_splits = None
            # Horovod's torch alltoall returns the received splits when given splits, and from a handle always.
            if op.api == "alltoall" and (op.splits is not None or (self.torch and op.mode != "sync")):
                if not isinstance(got, tuple) or len(got) != 2:
                    raise StormFailure(f"alltoall with splits returned {type(got).__name__}, not (tensor, splits)")
                got, want_splits = got
            if op.in_place and got is not passed[i]:
                raise StormFailure(f"{what}: an in-place op returned another object than the tensor it was given")
            host = self._host(got, op.device, what)
            if self.args.corrupt is not None and op.index >= self.args.corrupt and host.size and \
                    self.rank == op.ranks[0] and op.api in ("allgather", "broadcast", "alltoall"):
                host = host.copy()
                host.reshape(-1).view(np.uint8)[0] ^= 1
                self.args.corrupt = None
            if not op.in_place and not op.device and np.shares_memory(host, self._host(passed[i], False, what)):
                raise StormFailure(f"{what}: the result shares memory with the input")
            ins = lambda: [model.identity(t.dtype, op.reduce, t.shapes[j]) if r in op.absent  # noqa: E731
                           else data.values(seed, op.index, i, r, t.dtype, t.shapes[j], t.kind)
                           for j, r in enumerate(op.ranks)]
            if op.api == "allreduce":
                model.check_reduce(host, ins(), op.reduce, op.pre, op.post, what)
            elif op.api == "reducescatter":
                rows = model.reducescatter_rows(t.shapes[0][0], n, me)
                model.check_reduce(host, ins(), op.reduce, op.pre, op.post, what, rows=rows)
            elif op.api == "allgather":
                model.check_equal(host, np.concatenate(ins()), what)
            elif op.api == "broadcast":
                j = op.ranks.index(op.root)
                root_in = data.values(seed, op.index, i, op.root, t.dtype, t.shapes[j], t.kind)
                model.check_equal(host, root_in, what)
            elif op.api == "alltoall":
                splits = op.splits or [[s[0] // n] * n for s in t.shapes]
                want, recv = model.alltoall_expected(ins(), splits, me)
                model.check_equal(host, want, what)
                if want_splits is not None:
                    model.check_equal(np.asarray(want_splits), recv, f"{what}: received splits")
            if not op.in_place:  # the input is only read
                original = data.values(seed, op.index, i, self.rank, t.dtype, t.shapes[me], t.kind)
                model.check_equal(self._host(passed[i], op.device, what), original,
                                  f"{what}: the input after the op")

    def _bad_input(self, op: Op) -> None:
        """Each case must raise its error at the call, on every member alike."""
        hvd = self.hvd
        ps = self.sets[op.set_key]
        n = len(op.ranks)
        what = op.skew[1]
        t = data.to_torch if self.torch else (lambda a: a)  # noqa: E731 - each input as this frontend takes it
        x = t(np.ones((2 * n + 1, 3), np.float32))
        calls = {
            "uint32": lambda: hvd.allreduce(t(np.ones(3, np.uint32)), name=op.name, process_set=ps),
            "0-d": lambda: getattr(hvd, op.api)(t(np.float32(1.0).reshape(())), name=op.name, process_set=ps),
            "Min": lambda: hvd.reducescatter(x, op=hvd.Min, name=op.name, process_set=ps),
            "root": lambda: hvd.broadcast(x, root_rank=max(op.ranks) + 1, name=op.name, process_set=ps),
            "bool Average": lambda: hvd.allreduce(t(np.ones(3, np.bool_)), op=hvd.Average, name=op.name,
                                                  process_set=ps),
            "splits sum": lambda: hvd.alltoall(x, splits=[1] * n, name=op.name, process_set=ps),
            "empty name": lambda: hvd.allreduce(x, name="", process_set=ps),
            "not a tensor": lambda: hvd.allreduce(np.ones(3, np.float32), name=op.name, process_set=ps),
            "non-contiguous": lambda: hvd.allreduce_(t(np.ones((4, 6), np.float32)[:, ::2]), name=op.name,
                                                     process_set=ps),
            "indivisible": lambda: hvd.alltoall(x, name=op.name, process_set=ps),
            "fractional splits": lambda: hvd.alltoall(t(np.ones((2 * n, 3), np.float32)), splits=[2.5] * n,
                                                      name=op.name, process_set=ps),
        }
        error = {"ValueError": ValueError, "TypeError": TypeError}[op.error]
        try:
            calls[what]()
        except error as e:
            if isinstance(e, hvd.HorovodInternalError):
                raise StormFailure(f"{what}: expected a {op.error} at the call, got {type(e).__name__}: {e}") from e
            return
        except Exception as e:
            raise StormFailure(f"{what}: expected {op.error}, got {type(e).__name__}: {e}") from e
        raise StormFailure(f"{what}: expected {op.error}, the call succeeded")


def main(argv: Optional[list] = None) -> int:
    args = parse(argv)
    if args.list_features:
        for name, (default, text) in features.FEATURES.items():
            print(f"{name:16} {'on ' if default else 'off'}  {text}")
        return 0
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    if args.gpu is not None:
        _sim_environment(args.gpu, args.gpu_devices or size)
    faulthandler.enable()
    runner = Runner(args, size, rank)
    code = runner.run()
    sys.stdout.flush()
    return code
