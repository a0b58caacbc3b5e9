"""The storm's plan: one global sequence of steps that every rank generates alike from the seed.

Each rank runs the steps in order and skips ops of sets it is not in. Since every step only waits
for steps before it, and every member of an op reaches it, the plan cannot deadlock: any hang is
the engine's. The plan tracks what the engine allows, so the storm stays legal: a name is reused
only once its last op is done on every rank that could still hold it, a set is removed only once
its ops are waited (unless a feature says otherwise).
"""
import math
from dataclasses import dataclass, field
from typing import Iterator, Optional

import numpy as np

from . import settings as engine_settings
from .data import FLOATS, INTS, available_dtypes
from .model import AVERAGE, MAX, MIN, PRODUCT, REDUCES, SUM

MAX_ASYNC = 24     # outstanding async ops before the plan waits for some
MAX_SETS = 6       # live process sets besides the global one
BIG_BYTES = 8 << 20


@dataclass
class Tensor:
    dtype: str
    shapes: tuple          # each member's shape, in set order
    kind: str              # how data.values() fills it
    layout: int = -1       # -1: C-contiguous; else the data.noncontig() layout (read-only inputs only)


@dataclass
class Op:
    index: int
    api: str               # allreduce allgather broadcast alltoall reducescatter barrier broadcast_object
                           # allgather_object
    set_key: int
    ranks: tuple           # global ranks of the set, sorted
    name: Optional[str] = None  # None: unnamed; a grouped op's tensors are name.0, name.1, ...
    group: bool = False
    tensors: list = field(default_factory=list)
    reduce: int = SUM
    pre: float = 1.0
    post: float = 1.0
    in_place: bool = False
    root: int = -1
    splits: Optional[tuple] = None   # alltoall: each member's splits, in set order; None: equal blocks
    mode: str = "sync"               # sync, async (waited by a later Wait) or dropped (never waited)
    device: bool = False
    error: str = ""                  # "": must succeed; else the exception every member must raise
    skew: Optional[tuple] = None     # (global rank, what it submits differently, its value);
                                     # bad input: (-1, the case, None)
    absent: tuple = ()               # members that have joined (a Join's ops): they stand in, or it fails

    def describe(self) -> str:
        parts = [f"op {self.index}: {'grouped_' if self.group else ''}{self.api}{'_' if self.in_place else ''}",
                 f"set {list(self.ranks)}", f"name {self.name!r}", self.mode]
        if self.tensors:
            parts.append("tensors " + ", ".join(f"{t.dtype}{list(t.shapes)}" + (f" layout {t.layout}" * (t.layout >= 0))
                                                for t in self.tensors))
        if self.api in ("allreduce", "reducescatter"):
            parts.append(f"reduce {self.reduce} pre {self.pre} post {self.post}")
        if self.root >= 0:
            parts.append(f"root {self.root}")
        if self.splits is not None:
            parts.append(f"splits {[list(s) for s in self.splits]}")
        if self.device:
            parts.append("on the GPU")
        if self.absent:
            parts.append(f"ranks {list(self.absent)} joined")
        if self.error:
            differs = f" (rank {self.skew[0]} differs: {self.skew[1]})" if self.skew else ""
            parts.append(f"expects {self.error}{differs}")
        return ", ".join(parts)


@dataclass
class Wait:
    ops: list              # indices of async ops; each member waits for its own in its own random order


@dataclass
class AddSet:
    key: int
    ranks: tuple


@dataclass
class RemoveSet:
    key: int


@dataclass
class Join:
    key: int
    ranks: tuple           # the set's global ranks
    early: tuple           # members that join first; the others run `ops` (on the set), then join too
    ops: list

    def describe(self) -> str:
        return f"join in set {self.key}: ranks {list(self.early)} first, then {len(self.ops)} ops, then the rest"


@dataclass
class Restart:
    settings: dict         # the engine's environment for the next segment


@dataclass
class _NameUse:
    set_key: int
    ranks: tuple
    done_at: Optional[int]  # the step after which every member is done with it; None while in flight
    template: Optional[Op] = None


class Planner:
    """Generates the steps of one storm; the same (seed, size, features, gpu, torch) gives the same steps.
    ``torch``: the ops go through jupyter_hvd.torch, whose bad inputs differ a little (Horovod's torch API
    takes an empty name as none)."""

    def __init__(self, seed: int, size: int, features: frozenset, gpu: bool, torch: bool = False):
        self.rng = np.random.default_rng([seed, size, 0x5707])
        self.seed, self.size, self.f, self.gpu, self.torch = seed, size, features, gpu, torch
        self.sets: dict = {0: tuple(range(size))}
        self.next_set_key = 1
        self.outstanding: dict = {}       # async op index -> Op
        self.names: dict = {}             # name -> _NameUse
        self.step = 0                     # steps emitted so far
        self.last_global_sync = 0         # the step of the last op every rank waited for
        self.ops = 0                      # ops emitted so far
        self.on_gpu: set = set()          # ranks whose engine has run a GPU op (it stands in on that GPU)

    def first_settings(self) -> dict:
        return engine_settings.draw(self.rng, self.f, self.gpu)

    def finish(self) -> "Wait":
        """The last step: every op still outstanding."""
        return self._wait(everything=True)

    # -- the sequence -------------------------------------------------------------------------------
    def steps(self) -> Iterator:
        """Steps without end; the caller stops after as many ops as it wants."""
        while True:
            for s in self._next():
                self.step += 1
                yield s

    def _next(self) -> list:
        r = self.rng.random()
        if "restart" in self.f and r < 0.0015:
            return self._restart()
        if "sets" in self.f and r < 0.02:
            return self._change_sets()
        if "join" in self.f and r < 0.026:
            return self._join()
        if self.outstanding and (len(self.outstanding) >= MAX_ASYNC or r > 0.9):
            return [self._wait(everything=self.rng.random() < 0.3)]
        if "same_name_sets" in self.f and r > 0.88:
            return self._same_name_in_disjoint_sets()
        return [self._op()]

    def _same_name_in_disjoint_sets(self) -> list:
        """One name in flight in several disjoint sets at once, as when each rank group trains its own model
        under the same layer names (issue 17, sections 1 and 5)."""
        keys = [k for k in self.sets if k != 0]
        self.rng.shuffle(keys)
        chosen, used = [], set()
        for k in keys:
            if not used & set(self.sets[k]):
                chosen.append(k)
                used |= set(self.sets[k])
        if len(chosen) < 2:
            return [self._op()]
        name = f"f{self.ops}"
        steps = []
        for k in chosen:
            op = self._op(key=k, name=name)
            steps.append(op)
        steps.append(self._wait(everything=True))
        return steps

    def _wait(self, everything: bool = False, only_set: Optional[int] = None) -> Wait:
        keys = [k for k, op in self.outstanding.items() if only_set is None or op.set_key == only_set]
        if not everything and only_set is None and len(keys) > 1:
            keys = [k for k in keys if self.rng.random() < 0.5] or keys[:1]
        for k in keys:
            op = self.outstanding.pop(k)
            if op.name is not None and op.name in self.names and self.names[op.name].done_at is None:
                self.names[op.name].done_at = self.step
        return Wait(sorted(keys))

    def _global_sync(self) -> None:
        self.last_global_sync = self.step

    def _restart(self) -> list:
        steps = [self._wait(everything=True)] if self.outstanding else []
        steps.append(Restart(engine_settings.draw(self.rng, self.f, self.gpu)))
        self.sets = {0: tuple(range(self.size))}
        self.names.clear()  # a new engine: nothing is in flight, no GPU is claimed
        self.on_gpu.clear()
        self._global_sync()
        return steps

    def _change_sets(self) -> list:
        removable = [k for k in self.sets if k != 0]
        if removable and (len(removable) >= MAX_SETS or self.rng.random() < 0.4):
            key = removable[int(self.rng.integers(len(removable)))]
            pending = [i for i, op in self.outstanding.items() if op.set_key == key]
            late = bool(pending) and "remove_pending" in self.f
            steps = [] if not pending or late else [self._wait(only_set=key)]
            del self.sets[key]
            steps.append(RemoveSet(key))
            self._global_sync()
            if late:  # their handles are waited after the set is gone
                steps.append(self._wait(only_set=key))
            return steps
        k = int(self.rng.integers(1, self.size + 1))
        ranks = tuple(sorted(int(x) for x in self.rng.choice(self.size, size=k, replace=False)))
        if ranks in self.sets.values():
            return []  # add_process_set refuses a set that exists; nothing to do this step
        self._global_sync()
        key = self.next_set_key
        self.next_set_key += 1
        self.sets[key] = ranks
        return [AddSet(key, ranks)]

    def _join(self) -> list:
        """Some members of a set join (hvd.join); the others run a few ops, which the joined ones stand in
        for where they can (allreduces and barriers; anything else raises TensorMismatchError on the
        members that call it), and then join too."""
        keys = [k for k in sorted(self.sets) if len(self.sets[k]) > 1]
        if not keys:
            return [self._op()]
        key = keys[int(self.rng.integers(len(keys)))]
        ranks = self.sets[key]
        count = int(self.rng.integers(1, len(ranks)))
        early = tuple(sorted(int(x) for x in self.rng.choice(ranks, size=count, replace=False)))
        ops, on_gpu = [], set(self.on_gpu)
        for _ in range(int(self.rng.integers(1, 5))):
            op = self._op(key=key)
            op.device &= set(early) <= on_gpu  # a joined rank stands in on the GPU its own GPU ops ran on
            self.outstanding.pop(op.index, None)
            op.mode, op.absent = "sync", early
            if op.name in self.names:
                self.names[op.name].done_at = self.step
            if op.api in ("broadcast_object", "allgather_object"):
                op.api, op.name = "barrier", None
            if op.error not in ("ValueError", "TypeError"):  # refused at the call, joined or not
                op.skew = None
                stands_in = op.api == "barrier" or (op.api == "allreduce" and
                                                    (op.reduce in (SUM, AVERAGE) or op.pre == 1.0))
                op.error = "" if stands_in else "TensorMismatchError"
            ops.append(op)
        self.on_gpu = on_gpu | {r for o in ops if o.device and not o.error for r in o.ranks if r not in early}
        if key == 0:
            self._global_sync()
        return [Join(key, ranks, early, ops)]

    # -- one op ---------------------------------------------------------------------------------------
    def _op(self, key: Optional[int] = None, name: Optional[str] = None) -> Op:
        rng = self.rng
        index = self.ops
        self.ops += 1
        keys = sorted(self.sets)
        if key is None:
            key = 0 if rng.random() < 0.35 else keys[int(rng.integers(len(keys)))]
        ranks = self.sets[key]
        api = self._pick([("allreduce", 30), ("allgather", 12), ("broadcast", 12), ("alltoall", 10),
                          ("reducescatter", 10), ("barrier", 3),
                          ("objects", 3 if "objects" in self.f else 0),
                          ("bad_input", 2 if "bad_input" in self.f else 0)])
        op = Op(index, api, key, ranks)
        if api == "objects":
            op.api = "broadcast_object" if rng.random() < 0.5 else "allgather_object"
            op.root = ranks[int(rng.integers(len(ranks)))]
            op.name = None if rng.random() < 0.5 else f"o{index}"
        elif api == "barrier":
            pass
        elif api == "bad_input":
            self._bad_input(op)
        else:
            self._collective(op, name)
        if op.api in ("barrier", "broadcast_object", "allgather_object") or op.error in ("ValueError", "TypeError"):
            op.mode = "sync"
        if op.mode == "sync" and key == 0 and not op.error:
            self._global_sync()
        return op

    def _pick(self, weighted: list) -> str:
        total = sum(w for _, w in weighted)
        x = self.rng.random() * total
        for name, w in weighted:
            x -= w
            if x < 0:
                return name
        return weighted[-1][0]

    def _shape(self, min_ndim: int, itemsize: int, small: bool = False) -> tuple:
        rng = self.rng
        r = rng.random() * (0.9 if small else 1.0)
        if r < 0.06 and min_ndim == 0:
            return ()
        if r < 0.14:
            return [(0,), (0, 3), (2, 0), (0, 1, 5)][int(rng.integers(4))]
        if r < 0.22:
            return (1,) * int(rng.integers(max(1, min_ndim), 4))
        if r < 0.90:
            return tuple(int(d) for d in rng.integers(1, 18, size=int(rng.integers(max(1, min_ndim), 4))))
        if r < 0.995 or "big" not in self.f:
            n = int(rng.integers(1000, 100000))
            return (n,) if rng.random() < 0.5 else (n // 7 + 1, 7)
        n = int(rng.integers(BIG_BYTES // 4, BIG_BYTES)) // itemsize
        return (n,) if rng.random() < 0.5 else (n // 1001 + 1, 1001)

    def _dtype(self, device: bool, allow_bool: bool = True) -> str:
        choices = [d for d in available_dtypes(device) if allow_bool or d != "bool"]
        return choices[int(self.rng.integers(len(choices)))]

    def _collective(self, op: Op, name: Optional[str] = None) -> None:
        rng, f = self.rng, self.f
        n = len(op.ranks)
        op.mode = "sync"
        if "async" in f:
            r = rng.random()
            op.mode = "async" if r < 0.5 else "dropped" if (r < 0.53 and "dropped" in f) else "sync"
        op.group = "groups" in f and op.api in ("allreduce", "allgather", "reducescatter") and rng.random() < 0.25
        op.device = self.gpu and rng.random() < 0.4
        count = 1
        if op.group:  # mostly a few tensors, sometimes many
            count = int(rng.integers(1, 7)) if rng.random() < 0.9 else int(rng.integers(7, 25))
        if op.api == "allreduce":
            op.reduce = REDUCES[int(rng.integers(len(REDUCES)))]
        elif op.api == "reducescatter":
            op.reduce = SUM if rng.random() < 0.5 else AVERAGE
        if op.api in ("allreduce", "broadcast"):
            op.in_place = "in_place" in f and rng.random() < 0.3
        if op.api == "broadcast":
            op.root = op.ranks[int(rng.integers(n))]
        mixed = op.group and rng.random() < 0.3
        dtype = self._dtype(op.device, allow_bool=op.reduce != AVERAGE)
        min_ndim = 0 if op.api in ("allreduce", "broadcast") and not op.device else 1
        total = 0
        for _ in range(count):
            dt = self._dtype(op.device, allow_bool=op.reduce != AVERAGE) if mixed else dtype
            op.tensors.append(self._tensor(op, dt, min_ndim, small=total > BIG_BYTES // 8))
            total += max(int(np.prod(s, dtype=np.int64)) for s in op.tensors[-1].shapes) * 8
        self._scaling(op)
        for t in op.tensors:
            t.kind = self._kind(op, t.dtype)
        if op.api == "alltoall":
            self._splits(op)
        if "noncontig" in f and not op.in_place and not op.device and rng.random() < 0.2:
            for t in op.tensors:
                if all(len(s) for s in t.shapes):
                    t.layout = int(rng.integers(3))
        if name is not None:  # in flight in other sets too: async, never a dropped handle
            op.mode, op.name = "async", name
        else:
            op.name = self._name(op)
        if "mismatch" in f and n > 1 and rng.random() < 0.03:
            self._mismatch(op)
        if op.mode == "async":
            self.outstanding[op.index] = op
        if op.device and not op.error:
            self.on_gpu |= set(op.ranks)

    def _tensor(self, op: Op, dtype: str, min_ndim: int, small: bool) -> Tensor:
        n = len(op.ranks)
        itemsize = 2 if dtype in ("float16", "bfloat16") else 1 if dtype in ("uint8", "int8", "bool") else 8
        shape = self._shape(min_ndim, itemsize, small)
        if op.api == "allgather":  # each member its own first dimension, zero included
            firsts = [int(x) for x in self.rng.integers(0, max(shape[0], 1) + 2, size=n)]
            if shape[0] * int(np.prod(shape[1:], dtype=np.int64)) > 100000:
                firsts = [shape[0]] * n  # big: all alike, so the op stays a few MiB
            shapes = tuple((d,) + shape[1:] for d in firsts)
        elif op.api == "alltoall":
            shapes = (shape,) * n  # first dimensions are set with the splits
        else:
            shapes = (shape,) * n
        return Tensor(dtype, shapes, "bits")

    def _scaling(self, op: Op) -> None:
        if op.api not in ("allreduce", "reducescatter") or "scale" not in self.f or self.rng.random() > 0.3:
            return
        dtypes = {t.dtype for t in op.tensors}
        has_int = bool(dtypes & set(INTS)) or "bool" in dtypes
        if "bool" in dtypes or (has_int and ("int_scale" not in self.f or op.device or op.reduce == PRODUCT)):
            return
        if op.reduce in (MIN, MAX, PRODUCT) and (op.device or "scale_min_max" not in self.f):
            return
        factors = [0.5, 2.0, 0.25, 1.5, 1.0] if has_int else [0.5, 2.0, 0.25, 1.5, 3.0, 0.1, -1.0, -0.5, 1.0]
        op.pre = factors[int(self.rng.integers(len(factors)))]
        # An integer Average with a postscale is left out: Horovod folds 1/n into the postscale in float64,
        # the engine divides the integer sum; the two round differently.
        if not (has_int and op.reduce == AVERAGE):
            op.post = factors[int(self.rng.integers(len(factors)))]
        if "nan_scale" in self.f and not has_int and self.rng.random() < 0.1:
            op.pre = float("nan")

    def _kind(self, op: Op, dtype: str) -> str:
        if op.api not in ("allreduce", "reducescatter"):
            return "bits"
        if dtype in INTS and (op.pre != 1.0 or op.post != 1.0):
            return "scaled"
        if op.reduce == PRODUCT:
            return "wrap" if dtype in ("uint8", "int8") and "wrap" in self.f and self.rng.random() < 0.3 else "product"
        if op.reduce in (MIN, MAX):
            return "minmax"
        if dtype in ("uint8", "int8") and "wrap" in self.f and self.rng.random() < 0.3:
            return "wrap"
        return "sum"

    def _splits(self, op: Op) -> None:
        rng, n = self.rng, len(op.ranks)
        t = op.tensors[0]
        tail = t.shapes[0][1:]
        if rng.random() < 0.4:  # equal blocks: each member k rows to each
            op.splits = None
            t.shapes = tuple((n * int(rng.integers(0, 4)),) + tail for _ in range(n))
        else:
            most = 2 if np.prod(tail, dtype=np.int64) > 10000 else 6
            op.splits = tuple(tuple(int(x) if rng.random() > 0.3 else 0 for x in rng.integers(0, most, size=n))
                              for _ in range(n))
            t.shapes = tuple((sum(s),) + tail for s in op.splits)

    # -- names ------------------------------------------------------------------------------------------
    def _free(self, name: str, op: Op) -> bool:
        use = self.names[name]
        if use.set_key == op.set_key:
            return use.done_at is not None
        if use.done_at is not None and use.done_at < self.last_global_sync:
            return True
        # The same name in flight in another set of other ranks (issue 17, section 5).
        return "same_name_sets" in self.f and not set(use.ranks) & set(op.ranks)

    def _name(self, op: Op) -> Optional[str]:
        rng = self.rng
        prefix = "g" if op.group else "s"
        if "names" not in self.f:
            name = f"{prefix}{op.index}"
        else:
            r = rng.random()
            if r < 0.15:
                return None  # the API names it; counted per process set, alike on every member
            reusable = [n for n in self.names if n.startswith(prefix) and self._free(n, op)] if r < 0.6 else []
            if reusable:
                name = reusable[int(rng.integers(len(reusable)))]
                template = self.names[name].template
                if template is not None and template.set_key == op.set_key and rng.random() < 0.7:
                    self._copy_signature(template, op)  # the same request again: a response cache hit
            else:
                name = f"{prefix}{op.index}" + ("/ü層" if rng.random() < 0.05 else "")
        if op.mode != "dropped":
            done = self.step if op.mode == "sync" else None
            self.names[name] = _NameUse(op.set_key, op.ranks, done, template=op)
        else:
            self.names.pop(name, None)  # never reused: nobody waits for it
        return name

    @staticmethod
    def _copy_signature(template: Op, op: Op) -> None:
        if template.api != op.api or template.group != op.group or template.error:
            return
        for attr in ("reduce", "pre", "post", "in_place", "root", "splits", "device"):
            setattr(op, attr, getattr(template, attr))
        op.tensors = [Tensor(t.dtype, t.shapes, t.kind, -1 if op.in_place else t.layout) for t in template.tensors]

    # -- errors on purpose --------------------------------------------------------------------------------
    def _mismatch(self, op: Op) -> None:
        """One member submits the op differently: every member must get TensorMismatchError.
        ``op.skew`` is (that rank, what differs, its value), always a call that rank itself accepts."""
        rng = self.rng
        t = op.tensors[0]
        floats = all(x.dtype in FLOATS for x in op.tensors)
        whats = ["dtype", "shape"]
        if op.api == "allreduce" or (op.api == "reducescatter" and all(x.dtype != "bool" for x in op.tensors)):
            whats.append("reduce")
        if op.api in ("allreduce", "reducescatter") and floats:
            whats.append("scale")
        if op.api == "broadcast":
            whats.append("root")
        if self.gpu and not op.group and t.dtype != "bfloat16" and op.pre == op.post == 1.0:
            whats.append("device")
        if op.group:
            whats.append("count")
        what = whats[int(rng.integers(len(whats)))]
        if what == "dtype":
            same_class = FLOATS if t.dtype in FLOATS else INTS if t.dtype in INTS else ("uint8",)
            others = [d for d in same_class if d != t.dtype and d in available_dtypes(op.device)]
            value = others[int(rng.integers(len(others)))]
        elif what == "shape":
            value = "one more dimension"
        elif what == "reduce":
            choices = [SUM, AVERAGE] if op.api == "reducescatter" else [SUM, MIN, MAX, PRODUCT] + \
                ([] if t.dtype == "bool" or any(x.dtype == "bool" for x in op.tensors) else [AVERAGE])
            value = [c for c in choices if c != op.reduce][int(rng.integers(len(choices) - (op.reduce in choices)))]
        elif what == "scale":  # a NaN factor differs from every number (and equals a NaN)
            value = 1.0 if math.isnan(op.pre) else op.pre * 2.0
        elif what == "root":
            value = [r for r in op.ranks if r != op.root][int(rng.integers(len(op.ranks) - 1))]
        elif what == "count":  # that rank's list is shorter (down to empty) or longer
            counts = [c for c in range(len(op.tensors) + 2) if c != len(op.tensors)]
            value = counts[int(rng.integers(len(counts)))]
        else:
            value = not op.device
        op.skew = (op.ranks[int(rng.integers(len(op.ranks)))], what, value)
        op.error = "TensorMismatchError"
        if op.mode == "dropped":
            op.mode = "sync"
        for x in op.tensors:
            x.layout = -1

    def _bad_input(self, op: Op) -> None:
        """A call every member rejects the same way before it reaches the engine."""
        rng = self.rng
        n = len(op.ranks)
        named = ("allreduce", "not a tensor", "TypeError") if self.torch else ("allreduce", "empty name", "ValueError")
        cases = [("allreduce", "uint32", "TypeError"), ("allgather", "0-d", "ValueError"),
                 ("reducescatter", "0-d", "ValueError"), ("reducescatter", "Min", "ValueError"),
                 ("broadcast", "root", "ValueError"), ("allreduce", "bool Average", "TypeError"),
                 ("alltoall", "splits sum", "ValueError"), named, ("allreduce_", "non-contiguous", "ValueError")]
        if n > 1:
            cases.append(("alltoall", "indivisible", "ValueError"))
        if "frac_splits" in self.f and n > 0:
            cases.append(("alltoall", "fractional splits", "ValueError"))
        api, what, error = cases[int(rng.integers(len(cases)))]
        op.api, op.error, op.skew = api.rstrip("_"), error, (-1, what, None)
        op.in_place = api.endswith("_")
        op.tensors = [Tensor("float32", ((2 * n + 1, 3),) * n, "bits")]
        op.name = f"b{op.index}"
