"""The cell storm's plan: a seeded random sequence of notebook cells, and what each must show.

A `Planner` walks a model of what the notebook and its ranks hold (the job and its size, each rank's `store`
and `pushed` variables, the process sets, a handle left for a later cell, an engine shut down, a cell running
in the background) and draws the next cell from what a person does in a notebook: collectives checked against
numpy on the ranks, a rank that raises, a bad argument on one rank, the stop button, `--timeout`, a stall, a
rank killed, `exit()`, `hvd.shutdown()` and `hvd.init()`, `%hvd restart`, another `-np`, `%hvd push`, `pull`
and `status`, process sets made and removed, `--noblock` cells (failing, stopped and killed ones too),
`--rank` and `-o`. The cells' tensors are numpy arrays, torch tensors or MXNet NDArrays, as the framework
asks. Each `Cell` carries the code, whether it must succeed, the texts it must and must not show, and an
action for the runner (`tests/test_cell_storm.py`) to take while it runs. The plan depends on the seed alone.
"""
import math
import random
from dataclasses import dataclass, field
from typing import Optional

# Every job of the storm: a stall ends the cell within seconds.
FLAGS = "-x HOROVOD_STALL_CHECK_TIME_SECONDS=1 -x HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=3"
# The ranks' tensors, made from numpy arrays (T) and read back (N), by the framework the cells use.
CONVERT = {"none": ["T = N = np.asarray"],
           "torch": ["import torch", "T, N = torch.from_numpy, lambda t: t.numpy()"],
           "mxnet": ["import mxnet as mx", "T, N = lambda a: mx.nd.array(a, dtype=a.dtype), lambda t: t.asnumpy()"]}
# How an op is left running and waited for: its handle (Horovod's numpy and torch APIs), or for MXNet, whose
# engine runs every op asynchronously, its output NDArray, read when wanted.
START = {"none": "hvd.allreduce_async", "torch": "hvd.allreduce_async", "mxnet": "hvd.allreduce"}
WAIT = {"none": "hvd.synchronize({})", "torch": "hvd.synchronize({})", "mxnet": "{}"}
SIZES = (2, 3)
DTYPES = ("int32", "int64", "float32", "float64", "uint8", "float16")


@dataclass
class Cell:
    index: int
    kind: str
    code: str
    ok: bool = True
    shows: list = field(default_factory=list)      # texts its output must hold (a tuple: one of them)
    hides: list = field(default_factory=list)      # texts it must not
    counts: dict = field(default_factory=dict)     # text -> how many times it must show
    action: Optional[tuple] = None                  # ("interrupt", waiting, n) or ("kill", waiting, rank, n)
    then: Optional[tuple] = None                    # (code, texts) run next in the notebook: what it must print
    background: bool = False                        # --noblock: its own lines come later, under it
    later: list = field(default_factory=list)       # for a background cell: texts shown under it once waited for

    def describe(self) -> str:
        head = self.code.splitlines()[0] if self.code else ""
        return f"cell {self.index} ({self.kind}): {head}"


@dataclass
class Background:
    """The `--noblock` cell not yet waited for, and what the cell that waits for it must show."""
    cell: Cell
    failure: list = field(default_factory=list)  # its failure's texts; empty where it succeeds
    ends_job: bool = False                        # its failure was a rank's death: the job is lost with it


@dataclass
class Job:
    """What the running ranks hold (their number is the planner's `np`)."""
    store: Optional[dict] = None     # key -> base value; rank r holds base + r. None: `store` undefined
    pushed: object = None            # what `%hvd push pushed` last sent (None: not defined)
    sets: dict = field(default_factory=dict)   # name -> ranks, as `sets[name]` on every rank
    down: bool = False               # a cell called hvd.shutdown() (the sets are forgotten with the engine)
    pending: Optional[int] = None    # `pending`: the handle of an allreduce_async a cell started and left, its n
    pending_sure: bool = True        # no cell failed since: its op ended well (else it may have been in flight)


class Planner:
    def __init__(self, seed: int, framework: str = "none"):
        self.rng = random.Random(seed)
        self.framework = framework
        self.np = self.rng.choice(SIZES)
        self.job: Optional[Job] = None
        self.background: Optional[Background] = None
        self.index = 0
        self.drawn: set = set()

    def cells(self, count: int) -> list:
        out = []
        while len(out) < count:
            self.index += 1
            out.append(self._next())
        if self.background is not None:
            self.index += 1
            out.append(self._wait())
        return out

    # --- choosing ---------------------------------------------------------------------------------------------

    def _next(self) -> Cell:
        if self.job is None:  # the first cell, or after the job was lost: -np again, or a plain %%hvd
            if self.index > 1 and self.rng.random() < 0.2:
                return self._status()
            return self._ops(start=self.index == 1 or self.rng.random() < 0.5)
        if self.background is not None:
            kind = self._pick({"ops": 3, "wait": 3, "notebook": 2, "push": 1, "pull": 1})
        elif self.job.down:  # the cells shut the engine down: it stays down until a cell calls hvd.init()
            kind = self._pick({"init": 3, "downop": 1, "push": 1, "pull": 1, "notebook": 1, "restart": 1,
                               "status": 1})
        else:
            kind = self._pick({"ops": 8, "background": 3, "stopped_in_background": 1, "raise": 3, "bad": 2,
                               "interrupt": 2, "timeout": 1, "stall": 1, "kill": 1, "exit": 1, "restart": 1,
                               "resize": 1, "push": 2, "pull": 2, "set": 2, "notebook": 1, "shutdown": 1,
                               "status": 1})
        return getattr(self, "_" + kind)()

    def _pick(self, weights: dict) -> str:
        """A kind of cell by its weight, five times as likely while no cell of it has been drawn."""
        kinds = list(weights)
        kind = self.rng.choices(kinds, weights=[w * (1 if k in self.drawn else 5) for k, w in weights.items()])[0]
        self.drawn.add(kind)
        return kind

    # --- the model's effects ----------------------------------------------------------------------------------

    def _surfacing(self, cell: Cell) -> bool:
        """A cell that waits for the background cell first: True where that one failed, so this one must fail
        with its error and not run."""
        bg, self.background = self.background, None
        if bg is None or not bg.failure:
            return False
        cell.ok, cell.shows, cell.hides, cell.action = False, bg.failure, cell.hides + cell.shows, None
        if bg.ends_job:
            self.job = None
        return True

    # --- cells ------------------------------------------------------------------------------------------------

    def _prologue(self) -> list:
        """Lines that check, on every rank, what the model says the ranks hold."""
        job = self.job
        store = "None" if job is None or job.store is None else repr(job.store)
        pushed = "None" if job is None else repr(job.pushed)
        sets = {} if job is None else job.sets
        return self._imports() + [
            f"_want = {store}",
            "_have = globals().get('store')",
            "assert _have == (None if _want is None else {k: v + hvd.rank() for k, v in _want.items()}), "
            "('store', _have, _want)",
            f"assert globals().get('pushed') == {pushed}, ('pushed', globals().get('pushed'))",
            "sets = globals().get('sets', {})",
            f"assert {{n: s.ranks for n, s in sets.items()}} == {sets!r}, ('sets', sets)",
            f"assert ('pending' in globals()) == {job is not None and job.pending is not None}, 'pending'",
        ]

    def _imports(self) -> list:
        return ["import numpy as np"] + CONVERT[self.framework]

    def _consume(self, lines: list) -> None:
        """Wait for the handle an earlier cell left (its op ended then, whatever failed since), and check it."""
        n, want = self.job.pending, f"np.full({self.job.pending}, {self.job.pending} * hvd.size(), 'float32')"
        if self.job.pending_sure:
            lines += [f"_r = N({WAIT[self.framework].format('pending')})"]
        else:  # a failed cell since may have found the op in flight: then it failed, and wait() says so
            lines += ["try:", f"    _r = N({WAIT[self.framework].format('pending')})",
                      "except (hvd.EngineAbortedError, hvd.EngineShutdownError):", f"    _r = {want}"]
        lines += ["del pending", f"assert np.array_equal(_r, {want}), ('pending', _r)"]
        self.job.pending = None

    def _leave(self, lines: list) -> None:
        """Start an allreduce and keep its handle for a later cell, as a cell that overlaps work does."""
        n = self.rng.randint(1, 9)
        lines += [f"pending = {START[self.framework]}(T(np.full({n}, {n}, 'float32')), op=hvd.Sum)"]
        self.job.pending, self.job.pending_sure = n, True

    def _fails(self) -> None:
        """A cell fails and the job lives on: its ranks' engines start again at the next cell."""
        if self.job is not None:
            self.job.pending_sure = False

    def _header(self, start: bool, extra: str = "") -> tuple:
        """The magic's line (with -np and the job's flags, or a plain one), and what it must print about
        starting ranks: a plain %%hvd after the job was lost starts ranks as the last -np did."""
        line = f"%%hvd -np {self.np} --framework {self.framework} {FLAGS}" if start else "%%hvd"
        shows = [f"[hvd] started {self.np} ranks"] if self.job is None else []
        return (line + (" " + extra if extra else "")), shows

    def _store_line(self, lines: list, key: str, base: int) -> None:
        lines += ["store = globals().get('store') or {}", f"store[{key!r}] = {base} + hvd.rank()"]
        if self.job.store is None:
            self.job.store = {}
        self.job.store[key] = base

    def _ops(self, start: bool = False) -> Cell:
        i = self.index
        flags = []
        shown_rank = None
        if not start and self.rng.random() < 0.2:
            shown_rank = self.rng.randrange(self.np)
            flags.append(f"--rank {shown_rank}")
        out_name = f"vals{i}" if self.rng.random() < 0.2 else None
        if out_name:
            flags.append(f"-o {out_name}")
        line, shows = self._header(start, " ".join(flags))
        cell = Cell(i, "start" if start else "ops", "", shows=shows)
        if self._surfacing(cell):
            cell.code = line + f"\nprint('ran {i}', flush=True)"
            cell.hides = [f"ran {i}"]
            return cell
        lines = self._prologue()
        if self.job is None:
            self.job = Job()
        self._store_line(lines, f"c{i}", i * 1000)
        if self.job.pending is not None and self.rng.random() < 0.7:
            self._consume(lines)
        for k in range(self.rng.randint(1, 4)):
            lines += self._collective(f"c{i}.{k}")
        if self.job.pending is None and self.rng.random() < 0.3:
            self._leave(lines)
        lines += [f"print('ok {i}', hvd.rank(), flush=True)", f"{i} * 100 + hvd.rank()"]
        cell.code = "\n".join([line] + lines)
        ranks = range(self.np) if shown_rank is None else [shown_rank]
        cell.shows += [f"[rank {r}] ok {i} {r}" for r in ranks]
        cell.shows.append(f"\n{i * 100 + (shown_rank or 0)}\n")
        if shown_rank is not None:
            cell.hides += [f"ok {i} {r}" for r in range(self.np) if r != shown_rank]
        if out_name:
            cell.then = (f"print('{out_name}', {out_name})", [f"{out_name} {[i * 100 + r for r in range(self.np)]}"])
        return cell

    def _collective(self, name: str) -> list:
        """One collective on every rank (or in a process set), checked against numpy on the rank."""
        rng = self.rng
        dtype = rng.choice(DTYPES)
        shape = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 3)))
        named = f", name={name!r}" if rng.random() < 0.5 else ""
        members = list(range(self.np))
        in_set = ""
        guard = ""
        if self.job.sets and rng.random() < 0.4:
            set_name = rng.choice(sorted(self.job.sets))
            members = self.job.sets[set_name]
            in_set = f", process_set=sets[{set_name!r}]"
            guard = f"if sets[{set_name!r}].included():\n    "
        kind = rng.choice(["allreduce", "allgather", "broadcast", "alltoall", "async"])
        x = f"(np.arange({math.prod(shape)}) % 7).astype({dtype!r}).reshape({shape})"
        total = sum(r + 1 for r in members)
        if kind == "allreduce":
            call = f"_r = N(hvd.allreduce(T({x} * (hvd.rank() + 1)), op=hvd.Sum{named}{in_set}))"
            want = f"{x} * {total}"
        elif kind == "async":
            call = (f"_h = {START[self.framework]}(T({x} * (hvd.rank() + 1)), op=hvd.Sum{named}{in_set})\n"
                    f"_r = N({WAIT[self.framework].format('_h')})")
            want = f"{x} * {total}"
        elif kind == "allgather":
            call = f"_r = N(hvd.allgather(T(np.full((hvd.rank() + 1, 2), hvd.rank(), {dtype!r})){named}{in_set}))"
            want = f"np.concatenate([np.full((r + 1, 2), r, {dtype!r}) for r in {members}])"
        elif kind == "broadcast":
            root = rng.choice(members)
            call = f"_r = N(hvd.broadcast(T({x} + hvd.rank()), root_rank={root}{named}{in_set}))"
            want = f"{x} + {root}"
        else:
            n = len(members)
            call = f"_r = N(hvd.alltoall(T(np.full({n}, hvd.rank(), {dtype!r})){named}{in_set}))"
            want = f"np.array({members}, {dtype!r})"
        check = f"assert np.array_equal(_r, {want}) and _r.dtype == {dtype!r}, ({name!r}, _r)"
        return [guard + line for line in (call + "\n" + check).split("\n")]

    def _background(self) -> Cell:
        i = self.index
        cell = Cell(i, "background", "", shows=["runs in the background"], background=True)
        self.background = Background(cell)
        lines = self._prologue()
        self._store_line(lines, f"b{i}", i * 1000)
        lines += self._collective(f"b{i}.0") + ["import time", "time.sleep(0.5)"]
        raiser = self.rng.randrange(self.np) if self.rng.random() < 0.35 else None
        if raiser is not None:
            lines += [f"if hvd.rank() == {raiser}:", f"    raise ValueError('storm {i}')"]
            self.background.failure = ["the end of %%hvd cell", f"rank {raiser} raised ValueError: storm {i}"]
            self._fails()
        lines += [f"print('ok {i}', hvd.rank(), flush=True)", f"{i} * 100 + hvd.rank()"]
        cell.later = [f"[rank {r}] ok {i} {r}" for r in range(self.np) if r != raiser]
        cell.code = "\n".join(["%%hvd --noblock"] + lines)
        return cell

    def _stopped_in_background(self) -> Cell:
        """A background cell that waits, stopped while no cell runs: by the stop button (the ranks and their
        variables stay) or by a rank's death (the job is lost)."""
        interrupt = self.rng.random() < 0.6
        cell = self._waiting("stopped", "%%hvd --noblock")
        cell.ok, cell.background, cell.shows = True, True, ["runs in the background"]
        waiting = f"waiting {cell.index}"
        cell.later = [f"[rank {r}] {waiting} {r}" for r in range(self.np)]
        if interrupt:
            cell.action = ("interrupt", waiting, self.np)
            cell.later.append("the kernel was interrupted while no cell ran")
            self.background = Background(cell, ["the kernel was interrupted while no cell ran", "KeyboardInterrupt"])
            self._fails()
        else:
            victim = self.rng.randrange(self.np)
            cell.action = ("kill", waiting, victim, self.np)
            self.background = Background(cell, [f"rank {victim} (pid "], ends_job=True)
        return cell

    def _wait(self) -> Cell:
        cell = Cell(self.index, "wait", "%hvd wait", shows=["the end of %%hvd cell"])
        bg = self.background
        if bg.failure:
            cell.ok, cell.shows = False, bg.failure
            if bg.ends_job:
                self.job = None
        else:
            cell.shows.append(f"\n{bg.cell.index * 100}\n")
        self.background = None
        return cell

    def _notebook(self) -> Cell:
        i = self.index
        return Cell(i, "notebook", f"note{i} = {i} * 3\nprint('note', note{i})", shows=[f"note {i * 3}"])

    def _raise(self) -> Cell:
        self._fails()
        i = self.index
        raisers = sorted(self.rng.sample(range(self.np), self.rng.randint(1, self.np)))
        lines = self._prologue()
        self._store_line(lines, f"r{i}", i * 1000)
        in_op = self.rng.random() < 0.5
        steps = self.rng.randint(0, 2)
        for k in range(steps):  # a few steps first, as a training cell fails in its loop
            lines += self._collective(f"r{i}.{k}")
        lines += [f"if hvd.rank() in {raisers}:", f"    raise ValueError('storm {i}')"]
        if in_op:  # the others wait in a collective that the raisers never join: aborted at once
            lines += ["N(hvd.allreduce(T(np.ones(2))))"]
        lines += [f"print('ok {i}', hvd.rank(), flush=True)"]
        hides = [f"ok {i} "] if in_op else [f"[rank {r}] ok {i} " for r in raisers]
        # The report leads with the failure that came first, then names the other ranks that raised. A raiser
        # still in one of the steps (in a set without the first) when that came was aborted there instead.
        shows = [f"raised ValueError: storm {i}"]
        aborted = (f"rank {{}} (EngineAbortedError)",) if steps else ()
        shows += [tuple(f.format(r) for f in ("rank {} raised ValueError", "rank {} (ValueError)") + aborted)
                  for r in raisers]
        return Cell(i, "raise", "\n".join(["%%hvd"] + lines), ok=False, shows=shows, hides=hides)

    def _bad(self) -> Cell:
        self._fails()
        i = self.index
        bad = self.rng.randrange(self.np)
        lines = self._prologue()
        if self.rng.random() < 0.5:
            lines += [f"x = T(np.ones(3 if hvd.rank() == {bad} else 2))", f"N(hvd.allreduce(x, name='bad{i}'))"]
            shows = ["TensorMismatchError"]
        else:
            lines += [f"x = None if hvd.rank() == {bad} else T(np.ones(2))", f"N(hvd.allreduce(x, name='bad{i}'))"]
            shows = [f"rank {bad} raised TypeError"]
        lines += [f"print('ok {i}', hvd.rank(), flush=True)"]
        return Cell(i, "bad", "\n".join(["%%hvd"] + lines), ok=False, shows=shows, hides=[f"ok {i} "])

    def _waiting(self, kind: str, line: str, tail: Optional[list] = None) -> Cell:
        """A cell whose ranks say they wait (with their pids), then wait: in a sleep, one rank in a collective
        the others never join, or all in a loop of collectives (a training loop), where the stop lands
        anywhere in an op."""
        i = self.index
        lines = self._prologue()
        self._store_line(lines, f"w{i}", i * 1000)
        lines += ["import os, time", f"print('waiting {i}', hvd.rank(), os.getpid(), flush=True)"]
        if tail is None:
            name = self.rng.choice(["", ", name='spin'"])
            tail = self.rng.choice([["time.sleep(60)"],
                                    ["N(hvd.allreduce(T(np.ones(2)))) if hvd.rank() == 0 else None", "time.sleep(60)"],
                                    ["for _ in range(10 ** 7):", f"    N(hvd.allreduce(T(np.ones(4)){name}))"]])
        return Cell(i, kind, "\n".join([line] + lines + tail), ok=False)

    def _interrupt(self) -> Cell:
        self._fails()
        cell = self._waiting("interrupt", "%%hvd")
        cell.shows = ["the kernel was interrupted"]
        cell.action = ("interrupt", f"waiting {cell.index}", self.np)
        return cell

    def _timeout(self) -> Cell:
        self._fails()
        cell = self._waiting("timeout", "%%hvd --timeout 2")
        cell.shows = ["TimeoutError: cell exceeded --timeout 2s"]
        return cell

    def _stall(self) -> Cell:
        self._fails()
        i = self.index
        lines = self._prologue() + [f"N(hvd.allreduce(T(np.ones(2)), name=f'only{i}.{{hvd.rank()}}'))",
                                    f"print('ok {i}', hvd.rank(), flush=True)"]
        return Cell(i, "stall", "\n".join(["%%hvd"] + lines), ok=False, shows=["stall shutdown"],
                    hides=[f"ok {i} "])

    def _kill(self) -> Cell:
        victim = self.rng.randrange(self.np)
        cell = self._waiting("kill", "%%hvd")
        cell.shows = [f"rank {victim} (pid "]
        cell.action = ("kill", f"waiting {cell.index}", victim, self.np)
        self.job = None
        return cell

    def _exit(self) -> Cell:
        i = self.index
        lines = self._prologue() + [f"print('bye {i}', flush=True)", "exit()"]
        self.job = None
        return Cell(i, "exit", "\n".join(["%%hvd"] + lines), ok=False,
                    shows=[f"[rank 0] bye {i}", "called exit() or quit()", "the job was stopped"])

    def _restart(self) -> Cell:
        self.job = Job()  # new ranks, holding nothing
        return Cell(self.index, "restart", "%hvd restart",
                    shows=["restarting the ranks", f"[hvd] started {self.np} ranks"])

    def _resize(self) -> Cell:
        self.np = self.rng.choice([n for n in SIZES if n != self.np])
        self.job = None
        cell = self._ops(start=True)
        cell.kind = "resize"
        cell.shows.insert(0, "restarting the ranks (changed -np)")
        return cell

    def _status(self) -> Cell:
        cell = Cell(self.index, "status", "%hvd status")
        if self.job is None:
            cell.shows = ["[hvd] no ranks running"]
        else:
            cell.shows = [f"[hvd] {self.np} ranks on"]
            # Each rank's line ends with its engine's state: "initialised", or "not initialised" once shut down.
            cell.counts = {" initialised\n": self.np, "not initialised": self.np if self.job.down else 0}
        return cell

    def _push(self) -> Cell:
        i = self.index
        value = {"cell": i, "items": [self.rng.randint(0, 99) for _ in range(self.rng.randint(0, 4))]}
        cell = Cell(i, "push", f"pushed = {value!r}\n%hvd push pushed",
                    shows=[f"[hvd] pushed pushed to {self.np} ranks"])
        if not self._surfacing(cell):
            self.job.pushed = value
        return cell

    def _pull(self) -> Cell:
        i = self.index
        rank = self.rng.randrange(self.np)
        code = f"%hvd pull store --rank {rank}\nprint('PULLED', sorted(store.items()))"
        cell = Cell(i, "pull", code)
        if self._surfacing(cell):
            return cell
        if self.job.store is None:
            cell.ok, cell.shows = False, [f"rank {rank}: NameError: name 'store' is not defined"]
        else:
            want = sorted((k, v + rank) for k, v in self.job.store.items())
            cell.shows = [f"[hvd] pulled store from rank {rank}", f"PULLED {want}"]
        return cell

    def _set(self) -> Cell:
        i = self.index
        lines = self._prologue()
        taken = sorted(tuple(r) for r in self.job.sets.values())
        if self.job.sets and self.rng.random() < 0.4:
            name = self.rng.choice(sorted(self.job.sets))
            lines += [f"hvd.remove_process_set(sets.pop({name!r}))"]
            del self.job.sets[name]
        else:
            choices = [c for c in _proper_subsets(self.np) if c not in taken]
            if not choices:
                return self._ops()
            ranks = list(self.rng.choice(choices))
            lines += [f"sets[{f's{i}'!r}] = hvd.add_process_set({ranks})"]
            self.job.sets[f"s{i}"] = ranks
        lines += [f"print('ok {i}', hvd.rank(), flush=True)"]
        return Cell(i, "set", "\n".join(["%%hvd"] + lines), shows=[f"[rank {r}] ok {i} {r}" for r in range(self.np)])

    def _shutdown(self) -> Cell:
        i = self.index
        lines = self._prologue()
        if self.job.pending is not None:
            self._consume(lines)
        lines += ["hvd.shutdown()", f"print('down {i}', hvd.is_initialized(), flush=True)"]
        self.job.down = True
        return Cell(i, "shutdown", "\n".join(["%%hvd"] + lines), shows=[f"down {i} False"])

    def _downop(self) -> Cell:
        i = self.index
        lines = self._imports() + ["N(hvd.allreduce(T(np.ones(2))))", f"print('ok {i}', 'ran', flush=True)"]
        return Cell(i, "downop", "\n".join(["%%hvd"] + lines), ok=False, hides=[f"ok {i} ran"],
                    shows=["ValueError: jupyter_hvd has not been initialized; use hvd.init()"])

    def _init(self) -> Cell:
        i = self.index
        self.job.down = False
        lines = ["hvd.init()"] + self._prologue() + [
            "for _n, _s in list(sets.items()):  # hvd.shutdown() forgot them, as Horovod's does",
            "    sets[_n] = hvd.add_process_set(_s.ranks)"]
        self._store_line(lines, f"i{i}", i * 1000)
        lines += self._collective(f"i{i}.0") + [f"print('ok {i}', hvd.rank(), flush=True)"]
        return Cell(i, "init", "\n".join(["%%hvd"] + lines), shows=[f"[rank {r}] ok {i} {r}" for r in range(self.np)])


def _proper_subsets(n: int) -> list:
    return [tuple(r for r in range(n) if mask >> r & 1) for mask in range(1, (1 << n) - 1)]

