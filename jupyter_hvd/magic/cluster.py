"""N MPI ranks as ipyparallel engines under mpiexec, started from the kernel and ordered by MPI rank."""
from __future__ import annotations

import asyncio
import atexit
import logging
import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Coroutine
from dataclasses import dataclass, field
from typing import Any

import ipyparallel
import psutil

from ..runner.launch import LISTEN_VAR, LaunchSpec, default_forward, job_hosts
from ..runner.host_loss import start_failure
from ..runner.networks import check_listen, listen_address
from .failures import RankError, without_runner_frames
from .frameworks import api_module
from .by_value import TransferError, load, pack, pack_names, unpack
from .host_report import last_words, lost_cause, lost_from
from .launchers import ControllerLauncher, RankLauncher
from .rank_messages import OUTPUT_WAIT_S, BetweenCells
from .rank_main import whole_json
from .rank_setup import setup_rank
from .reaper import TAG, alive, descendants, tagged
from .sweeper import new_job_folder, sweep

POLL_S = 0.05
FILE_POLL_S = 0.01  # the controller's connection files come a second or so into a start: look often
STOP_TIMEOUT_S = 15.0
CANCEL_GRACE_S = 30.0  # for a step of the start cancelled at its timeout to stop (at its next await)
START_TIMEOUT_S = 120.0  # %%hvd --start-timeout's default
# The hub pings engines every HEARTBEAT_MS and registers a new engine at its first reply, so a short period
# makes registration fast; an engine unheard for SILENCE_S is dropped, however many beats that is.
HEARTBEAT_MS = 100
SILENCE_S = 10.0
HEARTBEAT_MISSES = round(SILENCE_S * 1000 / HEARTBEAT_MS)
# A silent host's ranks stop answering at the same moment, but the controller may drop their engines heartbeats
# apart (seconds apart on a busy machine): how long to wait for the rest of a host whose first rank was dropped.
HOST_SETTLE_S = SILENCE_S / 2
CONTROLLER_ARGS = [
    "--usethreads",
    f"--HeartMonitor.period={HEARTBEAT_MS}",
    f"--HeartMonitor.max_heartmonitor_misses={HEARTBEAT_MISSES}",
    "--log-level=WARN",
]
ENGINE_ARGS = ["--IPEngine.enable_nanny=False", "--log-level=WARN"]
SPIN_ENV = "JUPYTER_HVD_SPIN_US"
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(frozen=True)
class LaunchConfig:
    """Everything that defines a rank job; a different config means a new job."""

    np: int
    hosts: str | None = None
    hostfile: str | None = None
    cpu: bool = False
    framework: str = "none"
    env: tuple[tuple[str, str], ...] = ()  # variables set on the ranks (%%hvd -x), sorted by name
    allocation: str = ""  # the Slurm job whose hosts these are, when the cell gave none

    def where(self) -> str:
        """Where the ranks run, as %%hvd reports it."""
        if self.allocation:
            return f"Slurm allocation {self.allocation} ({self.hosts})"
        return self.hosts or self.hostfile or "this host"

    def changes_from(self, running: LaunchConfig) -> str:
        """Why ranks started for ``running`` cannot serve this config, by the flags that differ; '' when none do."""
        flags = {"np": "-np", "env": "-x", "allocation": "the Slurm allocation"}
        changed = [flags.get(k, f"--{k}") for k in vars(self) if getattr(self, k) != getattr(running, k)]
        return "changed " + ", ".join(changed) if changed else ""


@dataclass
class RankInfo:
    """One rank: its ipyparallel engine, process and device."""

    rank: int
    engine_id: int
    pid: int
    host: str
    local_rank: int
    device: str
    api: str
    process: psutil.Process | None = field(default=None, repr=False)  # None when on another host

    def alive(self) -> bool:
        """Whether the rank's process still runs (ranks on other hosts are presumed alive)."""
        return self.process is None or alive(self.process)


class _BackgroundLoop:
    """A long-lived event loop thread for ipyparallel's async cluster calls and launcher callbacks."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="jupyter-hvd-cluster", daemon=True).start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
        """coro's result; TimeoutError after ``timeout`` seconds, once coro has been cancelled and has stopped
        (left to run on, a step of a start that ran out of time started its process after the job was stopped)."""
        bounded = asyncio.wait_for(coro, timeout)  # waits for coro to end its cancellation
        return asyncio.run_coroutine_threadsafe(bounded, self.loop).result(timeout + CANCEL_GRACE_S)


_loop: _BackgroundLoop | None = None


def _background_loop() -> _BackgroundLoop:
    global _loop
    if _loop is None:
        _loop = _BackgroundLoop()
    return _loop


@dataclass(frozen=True)
class JobLoss:
    """What of a job died: the notebook's words for it, the hosts lost (none where only ranks died), the ranks."""

    cause: str
    hosts: list[str]
    ranks: tuple[int, ...]
    said: str = ""  # mpiexec's last lines, where it ended the job and no host is named


class RankCluster:
    """An ipyparallel controller plus N engines started by one mpiexec, addressed by MPI rank."""

    def __init__(self, config: LaunchConfig, start_timeout: float = START_TIMEOUT_S):
        self.config = config
        self.start_timeout = start_timeout
        self.ranks: list[RankInfo] = []
        self.cold_start_s: float | None = None
        self.stopped = False
        self.lost_hosts: list[str] = []  # other hosts lost with the job, once it died of it
        self._client: ipyparallel.Client | None = None
        self.between_cells = BetweenCells(config.np)  # what the ranks print between cells, for the next one
        self._reaper: subprocess.Popen | None = None
        self._heart: list[psutil.Process] = []  # the controller's heart monitor, a process of its own
        sweep()  # what jobs of kernels that are gone left behind
        self._profile_dir = new_job_folder()
        listen_args, self._controller_env = _controller_listening(config)
        self._cluster = ipyparallel.Cluster(
            controller_launcher_class=ControllerLauncher,
            engine_launcher_class=RankLauncher,
            n=config.np,
            delay=0,
            load_profile=False,
            shutdown_atexit=False,
            profile_dir=self._profile_dir,
            controller_args=CONTROLLER_ARGS + listen_args,
            log=_quiet_log(),
            parent=None,
            # On this host the ranks start with the controller and read its connection file; ranks on other
            # hosts cannot, so they start once it is up and get the connection in their environment.
            send_engines_connection_env=bool(config.hosts or config.hostfile),
        )

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start controller and ranks, wait until all N engines registered and initialised the engine API."""
        began = time.monotonic()
        deadline = began + self.start_timeout
        atexit.register(self.stop)
        self._start_reaper()  # first: a kernel killed during start-up leaves nothing behind either
        tag = {TAG: self._profile_dir}  # inherited by every process of the job, orphans included
        try:
            self._run_until(self._cluster.start_controller(environment={**self._controller_env, **tag}), deadline,
                            "the controller")
            # Ranks on other hosts get the controller's connection when they start; on this host they read it
            # themselves, so they start (and import their framework) while the controller does.
            remote = self._cluster.send_engines_connection_env
            if remote:
                self._wait_connection_files(deadline)
            spec = LaunchSpec(
                np=self.config.np,
                hosts=self.config.hosts,
                hostfile=self.config.hostfile,
                env={"PYTHONPATH": _pythonpath(), **engine_spin(self.config), **dict(self.config.env), **tag},
                forward=default_forward(os.environ),
                session_dir=self._profile_dir,  # removed by stop(), like the rest of the folder
                # mpiexec hands its stdin to rank 0: the kernel's is a pipe that the server holds open, and
                # nobody types into, so input() on rank 0 waited forever (rank_stdin says why it cannot read)
                mpi_args=["--stdin", "none"],
            )
            engine_file = self._cluster.controller.connection_files["engine"]
            engines = self._cluster.start_engines(
                self.config.np, launch_spec=spec,
                engine_args=[*ENGINE_ARGS, f"--IPEngine.timeout={self.start_timeout:g}"],
                engine_cmd=_rank_cmd(self.config.framework, engine_file, self.start_timeout))
            self._run_until(engines, deadline, "the engine launch")
            if not remote:
                self._wait_connection_files(deadline)
            # ipyparallel's own waits for the controller (an engine's registration 5 s, the client's first
            # request 10 s) are shorter than a busy machine may need: each gets the start timeout
            self._client = self._run_until(self._cluster.connect_client(timeout=self.start_timeout), deadline,
                                           "the connection to the controller")
            self._heart = descendants(self._cluster.controller.process)
            self._wait_registered(deadline)
            self._setup_ranks(deadline)
        except BaseException as exc:
            output = self._output()  # read before stop() removes the log files
            self.stop()
            if isinstance(exc, RankError):
                raise
            if isinstance(exc, KeyboardInterrupt):
                raise RankError("interrupted while starting the ranks; stopped what had started") from None
            raise self._start_error(f"{type(exc).__name__}: {exc}", output) from None
        self.cold_start_s = time.monotonic() - began

    def stop(self) -> list[psutil.Process]:
        """Stop ranks, mpiexec and controller, kill any straggler, and return processes that survived."""
        if self.stopped:
            return []
        self.stopped = True
        atexit.unregister(self.stop)
        processes = self._processes()
        if self._client is not None:
            self._client.close(linger=0)
        try:
            _background_loop().run(self._cluster.stop_cluster(), STOP_TIMEOUT_S)
        except Exception:  # whatever ipyparallel could not stop is killed below
            pass
        processes += [child for p in processes if alive(p) for child in descendants(p)]
        processes += tagged(self._profile_dir)  # orphans: a dead controller's heart monitor, say
        leftovers = [p for p in dict.fromkeys(processes) if alive(p)]
        for process in leftovers:
            _kill(process)
        _, survivors = psutil.wait_procs(leftovers, timeout=5)
        shutil.rmtree(self._profile_dir, ignore_errors=True)
        if self._reaper is not None:  # last: should the kernel be killed while stopping, it finishes the job
            self._reaper.kill()
            self._reaper.wait()
        return [p for p in survivors if alive(p)]

    # -- work on ranks ---------------------------------------------------------------------------

    @property
    def io_loop(self) -> Any:
        """The client's I/O loop: it sends the requests and dispatches their replies and output."""
        return self._client._io_loop

    def submit(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """Call fn(*args) on every rank without waiting; return the AsyncResults in rank order."""
        return [self._client[r.engine_id].apply_async(fn, *args) for r in self.ranks]

    def gather(self, results: list[Any], timeout: float, ranks: list[int] | None = None,
               patient: bool = False) -> list[Any]:
        """Wait for AsyncResults of requests between cells to the given ranks (default: all, in order) and return
        their values; what the ranks print while they run, and after, goes to the next cell.

        Raises RankError when a rank dies or raises, and when it does not answer within timeout seconds, unless
        ``patient`` (a transfer whose time depends on its size and the network): then a note says what it waits
        for, and it waits on (the kernel's interrupt stops it).
        """
        ranks = list(range(len(results))) if ranks is None else ranks
        deadline: float | None = time.monotonic() + timeout
        while not all(r.ready() for r in results):
            self.raise_if_dead()
            if deadline is not None and time.monotonic() > deadline:
                late = [str(rank) for rank, r in zip(ranks, results) if not r.ready()]
                if not patient:
                    raise RankError(f"ranks did not answer within {timeout:g}s")
                print(f"[hvd] rank{'s' if len(late) > 1 else ''} {', '.join(late)} still busy with the transfer after "
                      f"{timeout:g}s (a large value takes time over a network); waiting on: interrupt the kernel to "
                      "stop waiting", file=sys.stderr)
                deadline = None
            wait_a_little(results)
        for rank, result in zip(ranks, results):  # a request between cells: the next cell shows what it printed
            result.wait_for_output(OUTPUT_WAIT_S)
            self.io_loop.add_callback(self.between_cells.keep_from, rank, self._client, result)
        failed = [(rank, result.exception()) for rank, result in zip(ranks, results) if result.exception()]
        if failed:  # every rank's error, not only the first
            raise RankError("\n".join(f"rank {rank}: {getattr(e, 'ename', type(e).__name__)}: "
                                      f"{getattr(e, 'evalue', e)}" for rank, e in failed),
                            tuple(rank for rank, _ in failed))
        return [r.get() for r in results]

    def push(self, values: dict[str, Any], timeout: float = 60.0) -> None:
        """Set these variables in every rank's namespace, by value (see by_value.py): TransferError before anything
        is sent when one cannot be serialised, RankError with every rank's reason when a rank cannot load one."""
        layout, blobs = pack(values)
        self.gather(self.submit(load, layout, *blobs), timeout, patient=True)

    def pull(self, names: list[str], rank: int, timeout: float = 60.0) -> list[Any]:
        """The values of these variables in one rank's namespace, by value, in one round trip."""
        result = self._client[self.ranks[rank].engine_id].apply_async(pack_names, list(names))
        layout, *blobs = self.gather([result], timeout, ranks=[rank], patient=True)[0]
        try:
            values = unpack(layout, blobs)
        except TransferError as exc:
            raise TransferError(f"rank {rank}: {exc}") from None
        return [values[n] for n in names]

    # -- health and signals ----------------------------------------------------------------------

    def dead_ranks(self) -> list[RankInfo]:
        """Ranks whose process is gone, or, on other hosts, whose engine the controller dropped for want of
        heartbeats."""
        registered = set(self._client.ids) if self._client is not None else set()
        return [r for r in self.ranks if not r.alive() or (r.process is None and r.engine_id not in registered)]

    def what_died(self) -> str:
        """What of the job has died (ranks, mpiexec, the controller or its heart monitor), or '' if nothing."""
        dead = self.dead_ranks()
        if dead:
            return "; ".join(f"rank {r.rank} (pid {r.pid} on {r.host}) died" for r in dead)
        if self.ranks and not self._mpiexec_alive():
            return f"mpiexec (pid {_pid(self._mpiexec())}) died"
        if self.ranks and not self._controller_alive():
            return f"the ipyparallel controller (pid {_pid(self._cluster.controller)}) died"
        return next((f"the ipyparallel controller's heart monitor (pid {p.pid}) died"
                     for p in self._heart if not alive(p)), "")

    def loss(self) -> JobLoss | None:
        """What of the job has died, as the notebook says it (naming the hosts lost with their ranks), or None if
        nothing has. Leaves the job as it is (``raise_if_dead`` stops it)."""
        died = self.what_died()
        if not died:
            return None
        mpiexec_alive = self._mpiexec_alive()
        dead = self._settled(self.dead_ranks()) if mpiexec_alive else (self.dead_ranks() or list(self.ranks))
        output = None if mpiexec_alive else self._output()  # read before stop() removes the logs
        lost, how = lost_from(self.ranks, dead, output, socket.gethostname(), SILENCE_S)
        ranks = tuple(r.rank for r in dead)
        if lost:
            return JobLoss(lost_cause(self.ranks, lost, how), lost, ranks)
        return JobLoss(died, lost, ranks, last_words(output) if output is not None else "")

    def raise_if_dead(self) -> None:
        """If any part of the job died, stop the whole job and raise a RankError saying what died, or which
        hosts were lost with their ranks."""
        if (loss := self.loss()) is None:
            return
        self.stop()
        self.lost_hosts = loss.hosts
        then = ("the next %%hvd cell starts ranks on the hosts left, or says why it cannot" if loss.hosts else
                "the next %%hvd cell starts new ranks")
        said = f"\nmpiexec's output (last lines):\n{loss.said}" if loss.said else ""
        raise RankError(f"{loss.cause}. The job was stopped; {then}.{said}", loss.ranks)

    def _settled(self, dead: list[Any]) -> list[Any]:
        """The dead ranks once every other rank on the hosts of dropped remote ones has been dropped too, or
        HOST_SETTLE_S has passed: a silent host is then reported as lost, not as one rank that died."""
        deadline = time.monotonic() + HOST_SETTLE_S
        while time.monotonic() < deadline:
            hosts = {r.host for r in dead if r.process is None}
            if all(r in dead for r in self.ranks if r.host in hosts):
                break
            time.sleep(HEARTBEAT_MS / 1000)
            dead = self.dead_ranks()
        return dead

    def signal_ranks(self, signum: int, ranks: Collection[int]) -> list[int]:
        """Send a signal to the processes of ``ranks`` that run on this host; return the ranks signalled."""
        sent = []
        for r in self.ranks:
            if r.process is not None and r.rank in ranks and alive(r.process):
                try:
                    r.process.send_signal(signum)
                except psutil.Error:  # it exited meanwhile; dead_ranks() will report it
                    continue
                sent.append(r.rank)
        return sent

    def _output(self) -> str:
        """What the controller, mpiexec and the ranks wrote outside ipyparallel's channels (errors, MPI messages)."""
        launchers = [self._cluster.controller, *self._cluster.engines.values()]
        return "\n".join(launcher.get_output() for launcher in launchers if launcher is not None)

    # -- internals -------------------------------------------------------------------------------

    def _run_until(self, step: Coroutine[Any, Any, Any], deadline: float, what: str) -> Any:
        """Run one async start step on the background loop, failing with a clear error at the deadline (or when
        a wait of ipyparallel's own runs out: its message says which)."""
        try:
            return _background_loop().run(step, max(0.0, deadline - time.monotonic()))
        except TimeoutError as exc:
            why = f": {exc}" if str(exc) else f" {self._within()}"
            raise self._start_error(f"{what} did not start{why}", self._output()) from None

    def _wait_connection_files(self, deadline: float) -> None:
        """Wait until the controller's connection files read as whole JSON. It writes them in place, and
        ipyparallel gives a file it reads half-written half a second more: a controller descheduled mid-write
        on a busy machine failed the start with a JSONDecodeError."""
        paths = list(self._cluster.controller.connection_files.values())
        while not all(whole_json(p) for p in paths):
            if not self._controller_alive():
                raise self._start_error("the ipyparallel controller exited before writing its connection files",
                                        self._output())
            if time.monotonic() > deadline:
                raise self._start_error(f"the controller did not write its connection files {self._within()}",
                                        self._output())
            time.sleep(FILE_POLL_S)

    def _wait_registered(self, deadline: float) -> None:
        while len(self._client.ids) < self.config.np:
            if not self._mpiexec_alive():
                raise self._start_error("mpiexec exited before all engines registered", self._output())
            if not self._controller_alive():
                raise self._start_error("the ipyparallel controller exited while the ranks started", self._output())
            if time.monotonic() > deadline:
                raise self._start_error(
                    f"only {len(self._client.ids)} of {self.config.np} engines registered {self._within()}",
                    self._output(),
                )
            time.sleep(POLL_S)

    def _setup_ranks(self, deadline: float) -> None:
        ids = list(self._client.ids)
        results = [self._client[i].apply_async(setup_rank, self.config.framework, self.config.cpu) for i in ids]
        while not all(r.ready() for r in results):
            if not self._mpiexec_alive():
                raise self._start_error("mpiexec exited while the ranks were initialising", self._output())
            if not self._controller_alive():
                raise self._start_error("the ipyparallel controller exited while the ranks were initialising",
                                        self._output())
            if time.monotonic() > deadline:
                raise self._start_error(f"ranks did not initialise {self._within()}", self._output())
            time.sleep(POLL_S)
        for engine_id, result in zip(ids, results):
            error = result.exception()
            if error is not None:
                reason = f"engine {engine_id} failed to initialise: {error.ename}: {error.evalue}"
                raise self._start_error(f"{reason}\n{without_runner_frames(error.traceback or '')}", "")
        here = socket.gethostname()
        infos = sorted((r.get() | {"engine_id": i} for i, r in zip(ids, results)), key=lambda info: info["rank"])
        self.ranks = [
            RankInfo(
                rank=info["rank"],
                engine_id=info["engine_id"],
                pid=info["pid"],
                host=info["host"],
                local_rank=info["local_rank"],
                device=info["device"],
                api=info["api"],
                process=psutil.Process(info["pid"]) if info["host"] == here else None,
            )
            for info in infos
        ]

    def _start_reaper(self) -> None:
        """Watch this kernel from a separate session: if it is killed, the job's processes and folder go with it."""
        script = os.path.join(os.path.dirname(__file__), "reaper.py")
        self._reaper = subprocess.Popen(
            [sys.executable, script, str(os.getpid()), self._profile_dir],
            start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )

    def _controller_alive(self) -> bool:
        process = getattr(self._cluster.controller, "process", None)
        return process is not None and alive(process)

    def _mpiexec(self) -> RankLauncher | None:
        """The launcher of the ranks' mpiexec, once started."""
        return next(iter(self._cluster.engines.values()), None)

    def _mpiexec_alive(self) -> bool:
        launcher = self._mpiexec()
        return launcher is not None and launcher.state == "running" and alive(launcher.process)

    def _roots(self) -> list[psutil.Process]:
        """The controller and mpiexec processes that are still running."""
        roots = [getattr(self._cluster.controller, "process", None)]
        roots += [getattr(launcher, "process", None) for launcher in self._cluster.engines.values()]
        return [p for p in roots if p is not None and alive(p)]

    def _processes(self) -> list[psutil.Process]:
        """The controller and mpiexec with all their descendants, plus the local rank processes."""
        roots = self._roots()
        return roots + [c for p in roots for c in descendants(p)] + [r.process for r in self.ranks if r.process]

    def _within(self) -> str:
        return f"within {self.start_timeout:g}s (%%hvd --start-timeout S gives the start longer)"

    def _start_error(self, reason: str, output: str) -> RankError:
        message = f"could not start {self.config.np} ranks: {start_failure(output) or reason}"
        tail = output.strip().splitlines()[-20:]
        if tail:
            message += "\nprocess output (last lines):\n" + "\n".join(tail)
        return RankError(message)


def _pid(launcher: Any) -> str:
    process = getattr(launcher, "process", None)
    return str(process.pid) if process is not None else "?"


def _controller_listening(config: LaunchConfig) -> tuple[list[str], dict[str, str]]:
    """The controller's options and environment for where it listens: on loopback alone (its default) for ranks
    on this host; for ranks on other hosts, the engines' ports on the address that reaches them (or that
    JUPYTER_HVD_LISTEN names), the kernel's on loopback, and every message encrypted with CurveZMQ and still
    signed (ipyparallel turns signing off with CurveZMQ unless the controller is given a key: in its
    environment, not on its command line)."""
    hosts = job_hosts(LaunchSpec(np=config.np, hosts=config.hosts, hostfile=config.hostfile))
    listen = dict(config.env).get(LISTEN_VAR, os.environ.get(LISTEN_VAR))
    try:
        check_listen(listen, LISTEN_VAR)
        if not hosts:
            return [], {}
        address = listen_address(hosts, listen)
    except ValueError as exc:
        raise RankError(f"could not start {config.np} ranks: {exc}") from None
    return ([f"--IPController.engine_ip={address}", "--IPController.client_ip=127.0.0.1",
             "--IPController.monitor_ip=127.0.0.1", "--IPController.enable_curve=True"],
            {"IPP_SESSION_KEY": secrets.token_hex(32)})


def _rank_cmd(framework: str, engine_file: str, timeout_s: float) -> list[str]:
    """The ranks' program: it imports the cells' API module while the controller starts, then runs the engine."""
    return [sys.executable, "-m", "jupyter_hvd.magic.rank_main", api_module(framework), engine_file, str(timeout_s)]


def engine_spin(config: LaunchConfig) -> dict[str, str]:
    """Engine threads that do not spin after work, and waiters that do not run the engine's steps, when the
    ranks outnumber this host's cores (a value the user set is kept): a spinning thread then takes the core
    another rank computes on. Where the ranks fill the cores and the kernel and controller come on top, the
    engine's own rules for a contended core keep the monitor's batches on time, and spinning waiters keep a
    blocking small op at a few microseconds (2 ranks on 2 cores: numpy 4-byte allreduce 6 us, not 100)."""
    if SPIN_ENV in os.environ or config.hosts or config.hostfile:
        return {}
    return {SPIN_ENV: "0"} if config.np > len(os.sched_getaffinity(0)) else {}


def _pythonpath() -> str:
    """PYTHONPATH for processes we start: this package first, so ranks import the same jupyter_hvd."""
    return os.pathsep.join(filter(None, [PACKAGE_PARENT, os.environ.get("PYTHONPATH")]))


def wait_a_little(results: list[Any]) -> None:
    """Block up to POLL_S, returning early when the first unfinished AsyncResult completes."""
    pending = [r for r in results if not r.ready()]
    if pending:
        pending[0].wait(POLL_S)


def _kill(process: psutil.Process) -> None:
    try:
        process.kill()
    except psutil.Error:
        pass


def _quiet_log() -> logging.Logger:
    """ipyparallel's cluster log, limited to errors: expected exit codes of stopped ranks are not news."""
    log = logging.getLogger("jupyter_hvd.magic.ipyparallel")
    log.setLevel(logging.ERROR)
    if not log.handlers:
        log.addHandler(logging.StreamHandler(sys.stderr))
        log.propagate = False
    return log
