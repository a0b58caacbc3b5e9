"""``jupyter_hvd.run``: Horovod's programmatic launcher (``horovod.run``). It calls a Python function on N ranks
that mpiexec starts as hvdrun starts a script, and returns what each rank's call returned, in rank order.

The function and its arguments go to the ranks pickled by cloudpickle (what a notebook or the calling script
defined goes by value, the rest by the name of its module, which the ranks import: they search the caller's
``sys.path`` too, after their own, so that a module beside the script or one that a notebook put on its path is
found). A server in this process (multiprocessing.connection, with a key made for the call)
hands them to each rank (function_task.py) and takes back what the call returned or raised; it listens on
loopback for a job on this host, else on the address of this host that reaches the others, as the %%hvd
controller does. The ranks' output comes to this process's ``sys.stdout`` and ``sys.stderr`` as it is written
(in a notebook: under the cell). A rank that raises fails the call with ``RunError``, a ``RuntimeError``,
reported as a failed ``%%hvd`` cell is: the first cause with its traceback, then what became of the others.
"""
from __future__ import annotations

import argparse
import linecache
import re
import codecs
import collections
import contextlib
import io
import os
import secrets
import shlex
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import types
import warnings
from collections.abc import Callable, Mapping
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
from typing import Any, TextIO

from ..rank_failures import RankError, describe_failure
from .child import KILL_AFTER_S, SignalForwarder, die_with_parent
from .function_task import ADDRESS_VAR, KEY_VAR
from .host_loss import job_failure, ranks_by_host
from .hvdrun import UNSUPPORTED, build_parser, launch_spec, rank_command
from .launch import LISTEN_VAR, START_TIMEOUT_VAR, job_hosts, mpiexec_command, placement
from .launch import start_timeout as default_start_timeout
from .networks import listen_address
from .session_folder import session_folder

TASK = "jupyter_hvd.runner.function_task"
ELASTIC = ("min_num_proc", "max_num_proc", "slots", "reset_limit", "cooldown_range")
TAIL_BYTES = 65536  # of mpiexec's output, read for lost hosts (host_loss)
JOIN_S = 2.0  # for the output after mpiexec ends (ssh to a lost host may hold it open)
POLL_S = 0.05
EXIT_GRACE_S = 15.0  # for the ranks' processes to end once every rank has returned
# More time for ranks on other hosts to fetch the function: ssh tries to reach a host for start_timeout, so that
# one it could not reach is reported in ssh's words, not as ranks that never started.
SSH_REPORT_S = 10.0
IDLE_S = 60  # a connection to the server that sends nothing for this long is dropped
LATE, RAISED, LINGERED = "late", "raised", "lingered"  # why run() stopped the job


class RunError(RankError, RuntimeError):
    """A ``jupyter_hvd.run`` call whose ranks did not all return. ``errors`` holds what each rank that raised
    raised (a RemoteException; its ``exception`` is the exception itself where it could be sent back)."""

    def __init__(self, message: str, ranks: tuple[int, ...] = (), errors: Mapping[int, RemoteException] = {}):
        super().__init__(message, ranks)
        self.errors = dict(errors)


class RemoteException(Exception):
    """What a rank raised: its class name (``ename``), message (``evalue``), traceback as the rank formatted it,
    and the exception itself (None where it would not pickle or unpickle here)."""

    def __init__(self, ename: str, evalue: str, traceback: str, exception: BaseException | None):
        super().__init__(f"{ename}: {evalue}")
        self.ename, self.evalue, self.traceback, self.exception = ename, evalue, traceback, exception


def run(func: Callable[..., Any], args: tuple = (), kwargs: Mapping[str, Any] | None = None, num_proc: int = 1,
        min_num_proc: int | None = None, max_num_proc: int | None = None, slots: int | None = None,
        reset_limit: int | None = None, cooldown_range: tuple[int, int] | None = None, hosts: str | None = None,
        hostfile: str | None = None, start_timeout: float | None = None, ssh_port: int | None = None,
        ssh_identity_file: str | None = None, disable_cache: bool | None = None, output_filename: str | None = None,
        verbose: int | bool | None = None, use_gloo: bool | None = None, use_mpi: bool | None = None,
        mpi_args: str | None = None, network_interface: str | None = None, executable: str | None = None,
        np: int | None = None, min_np: int | None = None, max_np: int | None = None) -> list[Any]:
    """Call ``func(*args, **kwargs)`` on ``num_proc`` ranks and return the list of what each returned, by rank.

    Horovod's ``horovod.run``: the same arguments (``np`` for ``num_proc`` is deprecated, as there). ``hosts``
    (``"h1:2,h2:2"``) or ``hostfile`` place the ranks as hvdrun's flags do, over ssh (``ssh_port``,
    ``ssh_identity_file``); ``mpi_args`` adds mpiexec options, ``network_interface`` chooses the interfaces,
    ``output_filename`` also writes each rank's output to a folder, ``verbose`` prints the mpiexec command,
    ``executable`` is the ranks' Python (default: this one). Every rank must have fetched the function within
    ``start_timeout`` seconds (default: $HOROVOD_START_TIMEOUT, else 30). The elastic arguments and
    ``use_gloo`` raise ValueError: the job always runs on Open MPI with a fixed number of ranks.
    """
    num_proc = _deprecated("np", np, "num_proc", num_proc, num_proc == 1)
    min_num_proc = _deprecated("min_np", min_np, "min_num_proc", min_num_proc, min_num_proc is None)
    max_num_proc = _deprecated("max_np", max_np, "max_num_proc", max_num_proc, max_num_proc is None)
    if not callable(func):
        raise TypeError(f"run: func must be callable, got {type(func).__name__}")
    given = {name: value for name, value in zip(ELASTIC, (min_num_proc, max_num_proc, slots, reset_limit,
                                                           cooldown_range)) if value is not None}
    if given:
        raise ValueError(f"run: {', '.join(given)}: elastic training is not supported (the job has num_proc ranks "
                         "from start to end)")
    if hosts is not None and hostfile is not None:
        raise ValueError("run: give hosts or hostfile, not both")
    if use_gloo:
        raise ValueError(f"run: use_gloo: {UNSUPPORTED['--gloo']}")
    if isinstance(num_proc, bool) or not isinstance(num_proc, int) or num_proc < 1:
        raise ValueError(f"run: num_proc must be an int >= 1, got {num_proc!r}")
    try:
        timeout = default_start_timeout() if start_timeout is None else float(start_timeout)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"run: start_timeout: {exc}") from None
    options = _hvdrun_options(num_proc, hosts, hostfile, ssh_port, ssh_identity_file, timeout, disable_cache,
                              output_filename, verbose, mpi_args, network_interface)
    payload = _pickled(func, args, kwargs or {})
    with session_folder() as session_dir:
        try:
            spec = launch_spec(options, os.environ, session_dir)
            where = listen_address(job_hosts(spec), spec.listen or os.environ.get(LISTEN_VAR))
        except ValueError as exc:
            raise ValueError(f"run: {exc}") from None
        with _FunctionServer(where, payload, num_proc) as server:
            spec.env.update({ADDRESS_VAR: server.address, KEY_VAR: server.key.hex()})
            command = rank_command(options, [executable or sys.executable, "-m", TASK])
            cmd, env = mpiexec_command(spec, command)
            if verbose:
                print(shlex.join(cmd), file=sys.stderr, flush=True)
            code, output, stopped = _run_job(cmd, env, server, num_proc,
                                             timeout + SSH_REPORT_S * spec.several_hosts)
        failure = job_failure(output, ranks_by_host(placement(spec), spec.np))
    return _outcome(server, num_proc, code, failure, stopped, timeout)


def _deprecated(old: str, value: Any, new: str, current: Any, current_is_default: bool) -> Any:
    """Horovod's handling of its deprecated names: the old one's value when the new one has its default."""
    if value is None:
        return current
    warnings.warn(f"{old} is deprecated, use {new} instead", DeprecationWarning, stacklevel=3)
    return value if current_is_default else current


def _hvdrun_options(num_proc: int, hosts: str | None, hostfile: str | None, ssh_port: int | None,
                    ssh_identity_file: str | None, start_timeout: float, disable_cache: bool | None,
                    output_filename: str | None, verbose: Any, mpi_args: str | None,
                    network_interface: str | None) -> argparse.Namespace:
    """The arguments as hvdrun's parsed flags, so that the job is launched as hvdrun launches one; a flag that
    hvdrun refuses is a ValueError with its reason."""
    argv = ["-np", str(num_proc), f"--start-timeout={max(1.0, start_timeout)}"]  # ssh's timeout: whole seconds
    for flag, value in (("--hosts", hosts), ("--hostfile", hostfile), ("--ssh-port", ssh_port),
                        ("--ssh-identity-file", ssh_identity_file), ("--output-filename", output_filename),
                        ("--mpi-args", mpi_args), ("--network-interface", network_interface)):
        if value is not None:
            argv.append(f"{flag}={value}")
    argv += ["--disable-cache"] * bool(disable_cache) + ["--verbose"] * bool(verbose)
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            return build_parser().parse_args(argv)
    except SystemExit:
        message = said.getvalue().strip().removeprefix("hvdrun: error: ").split(" (see hvdrun --help)")[0]
        raise ValueError(f"run: {message}") from None


def _pickled(func: Callable[..., Any], args: tuple, kwargs: Mapping[str, Any]) -> bytes:
    """The call, pickled by cloudpickle, whose code keeps the file it came from (cloudpickle names it
    <dynamic-code>), so that a rank's traceback says where it failed."""
    import cloudpickle

    code_reduce = cloudpickle.Pickler.dispatch_table[types.CodeType]

    def keep_file(code: types.CodeType) -> tuple:
        rebuild, parts = code_reduce(code)
        return rebuild, tuple(code.co_filename if part == "<dynamic-code>" else part for part in parts)

    class Pickler(cloudpickle.Pickler):
        dispatch_table = collections.ChainMap({types.CodeType: keep_file}, cloudpickle.Pickler.dispatch_table)

    out = io.BytesIO()
    try:
        Pickler(out).dump((func, tuple(args), dict(kwargs)))
    except Exception as exc:
        raise TypeError(f"run: cannot send {getattr(func, '__name__', 'the function')} and its arguments to the "
                        f"ranks (they must pickle): {exc}") from exc
    return out.getvalue()


class _FunctionServer:
    """Hands the pickled call to each rank that asks (``fetched``), and keeps what each sent back
    (``outcomes``, in the order they came: ``order``), until closed. Each connection is answered on a thread of
    its own, so that one that is slow or stalls (a rank sending a large value, a port scanner that never
    authenticates) delays no other; one that sends nothing for IDLE_S is dropped."""

    def __init__(self, where: str, payload: bytes, num_proc: int):
        self.key = secrets.token_bytes(32)
        self._socket = socket.create_server(("" if where == "*" else where, 0), backlog=max(16, 2 * num_proc))
        host, port = self._socket.getsockname()[:2]
        self.address = f"{socket.gethostname() if where == '*' else host}:{port}"
        self._payload, self._num_proc = payload, num_proc
        self._paths = [os.path.abspath(path) for path in sys.path]  # "" is the working folder
        self._lock = threading.Lock()  # over what follows, which no connection changes once closing is set
        self._closing = False
        self.fetched: set[int] = set()
        self.outcomes: dict[int, tuple[str, Any]] = {}
        self.order: list[int] = []
        self.raised = False  # a rank's call raised
        self.returned_at: float | None = None  # when the last of num_proc ranks returned
        self._thread = threading.Thread(target=self._serve, name="jupyter_hvd.run server", daemon=True)

    def __enter__(self) -> _FunctionServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._closing = True
        with contextlib.suppress(OSError):  # wake accept()
            socket.create_connection(self._socket.getsockname()[:2], timeout=1).close()
        self._thread.join(5)
        self._socket.close()

    def _serve(self) -> None:
        while not self._closing:
            try:
                sock, _ = self._socket.accept()
            except OSError:  # the socket closed
                return
            if self._closing:
                sock.close()
                return
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", int(IDLE_S), 0))
            threading.Thread(target=self._answer, args=(Connection(sock.detach()),),
                             name="jupyter_hvd.run connection", daemon=True).start()

    def _answer(self, conn: Connection) -> None:
        with conn, contextlib.suppress(EOFError, OSError, AuthenticationError):
            deliver_challenge(conn, self.key)  # as Listener.accept does, but off the accepting thread
            answer_challenge(conn, self.key)
            request = conn.recv()
            if request[0] == "fetch":
                conn.send((self._paths, self._payload))
            with self._lock:
                if not self._closing:
                    self._record(request)

    def _record(self, request: tuple) -> None:
        if request[0] == "fetch":
            self.fetched.add(request[1])
        elif request[0] == "result":
            self.outcomes[request[1]] = request[2]
            self.order.append(request[1])
            self.raised = self.raised or request[2][0] == "raised"
            if len(self.outcomes) == self._num_proc and not self.raised:
                self.returned_at = time.monotonic()


def _run_job(cmd: list[str], env: dict[str, str], server: _FunctionServer, num_proc: int,
             timeout: float) -> tuple[int, str, str]:
    """Run mpiexec, its output copied to sys.stdout and sys.stderr, and stop it when it must be
    (``_reason_to_stop``; ranks not started within ``timeout`` seconds). Its exit code, the end of its output,
    and why it was stopped ('' if it ended)."""
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=die_with_parent(signal.SIGTERM))
    tail = bytearray()
    copies = [threading.Thread(target=_copy, args=(pipe, stream, tail), daemon=True)
              for pipe, stream in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr))]
    for thread in copies:
        thread.start()
    forwarder = SignalForwarder(proc) if threading.current_thread() is threading.main_thread() else None
    start_deadline, stopped = time.monotonic() + timeout, ""
    with forwarder or contextlib.nullcontext():
        try:
            while proc.poll() is None:
                if not stopped and (stopped := _reason_to_stop(server, num_proc, start_deadline)):
                    _stop(proc)
                elif forwarder and forwarder.deadline is not None and time.monotonic() > forwarder.deadline:
                    proc.kill()
                time.sleep(POLL_S)
        except BaseException:  # an exception of this thread's own: the job does not outlive the call
            _stop(proc)
            raise
    for thread in copies:
        thread.join(JOIN_S)
    if forwarder is not None and forwarder.received is not None:  # the caller's own handler acts on it now
        signal.raise_signal(forwarder.received)
    return proc.returncode, bytes(tail).decode(errors="replace"), stopped


def _reason_to_stop(server: _FunctionServer, num_proc: int, start_deadline: float) -> str:
    """Why the job must be stopped now, if it must: LATE, RAISED or LINGERED; '' otherwise."""
    now = time.monotonic()
    if len(server.fetched) < num_proc and now > start_deadline:
        return LATE
    if server.raised:  # the others may wait for it in a collective
        return RAISED
    returned = server.returned_at
    if returned is not None and now > returned + EXIT_GRACE_S:  # a thread that is not a daemon, say
        return LINGERED
    return ""


def _stop(proc: subprocess.Popen) -> None:
    """Stop mpiexec and the ranks (SIGTERM, then SIGKILL after KILL_AFTER_S)."""
    proc.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(KILL_AFTER_S)
    proc.kill()


def _copy(pipe: Any, stream: TextIO, tail: bytearray) -> None:
    """Copy a pipe of mpiexec's to a text stream as it comes, keeping the last TAIL_BYTES in tail."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while chunk := os.read(pipe.fileno(), 65536):
        tail += chunk
        del tail[:-TAIL_BYTES]
        with contextlib.suppress(Exception):  # a closed stream: keep draining
            stream.write(decoder.decode(chunk))
            stream.flush()
    pipe.close()


def _outcome(server: _FunctionServer, num_proc: int, code: int, failure: str, stopped: str,
             timeout: float) -> list[Any]:
    """What each rank returned, in rank order; RunError when a rank raised or ended without returning."""
    import cloudpickle

    returned = {r: value for r, (how, value) in server.outcomes.items() if how == "returned"}
    if len(returned) == num_proc and ((code == 0 and not failure) or stopped == LINGERED):
        if stopped == LINGERED:
            warnings.warn(f"run: every rank returned, but their processes had not all ended {EXIT_GRACE_S:g} s "
                          "later (a thread that is not a daemon, say): the job was stopped", RuntimeWarning,
                          stacklevel=3)
        return [cloudpickle.loads(returned[rank]) for rank in range(num_proc)]
    errors = {r: _remote(*report) for r, (how, report) in server.outcomes.items() if how == "raised"}
    silent = [r for r in range(num_proc) if r not in server.outcomes]
    lines = str(describe_failure(errors, [r for r in server.order if r in errors])).splitlines() if errors else []
    late = stopped == LATE
    if failure:  # a host lost or not reached: why the ranks there never started, or stopped
        lines.append(failure)
    if late:
        started = sorted(server.fetched)
        lines.append(f"only {len(started)} of {num_proc} ranks started within {timeout:g} s (start_timeout, or "
                     f"${START_TIMEOUT_VAR}); the job was stopped")
    if silent and not late:
        who = f"rank{'s' if len(silent) > 1 else ''} {', '.join(map(str, silent))}"
        lines.append(f"{who} stopped with the job" if errors or failure else
                     f"{who} ended without returning (mpiexec exited with code {code}; see the output above)")
    if not lines:  # every rank returned, yet mpiexec failed
        lines.append(f"every rank returned, but mpiexec exited with code {code} (see the output above)")
    raise RunError("\n".join(lines), tuple(errors) + tuple(silent), errors)


def _remote(ename: str, evalue: str, traceback: str, pickled: bytes | None) -> RemoteException:
    import cloudpickle

    exception = None
    if pickled is not None:
        with contextlib.suppress(Exception):  # a class this process cannot import
            exception = cloudpickle.loads(pickled)
    return RemoteException(ename, evalue, _with_source(traceback), exception)


_FRAME = re.compile(r'  File "(.+)", line (\d+), in ')


def _with_source(traceback: str) -> str:
    """A rank's traceback with the source line of each frame whose file the rank could not read and this
    process can (the cells of a notebook, which exist in its kernel alone)."""
    lines = traceback.splitlines()
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        frame = _FRAME.match(line)
        if frame and not (i + 1 < len(lines) and lines[i + 1].startswith("    ")):
            if source := linecache.getline(frame.group(1), int(frame.group(2))).strip():
                out.append(f"    {source}")
    return "\n".join(out)
