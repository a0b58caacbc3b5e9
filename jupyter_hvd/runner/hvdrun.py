"""hvdrun: run a command on N data-parallel ranks under Open MPI's mpiexec."""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn

from jupyter_hvd.runner.launch import LaunchSpec, default_forward, mpiexec_command

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
KILL_AFTER_S = 10.0
POLL_S = 0.1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 127


class _Parser(argparse.ArgumentParser):
    """Argument parser that reports a usage error as one line on stderr and exits 2."""

    def error(self, message: str) -> NoReturn:
        """Print a one-line error instead of the full usage text."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _at_least(minimum: float, kind: Callable[[str], float]) -> Callable[[str], float]:
    """Return an argparse type converting with kind and rejecting values below minimum."""

    def convert(text: str) -> float:
        value = kind(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum:g}, got {text}")
        return value

    convert.__name__ = kind.__name__
    return convert


def _number(value: float) -> str:
    """Format a float without a trailing '.0' so C parsers of ints and floats both accept it."""
    return str(int(value)) if value.is_integer() else str(value)


FLAG_ENV: dict[str, tuple[str, Callable[..., str]]] = {
    "fusion_threshold_mb": ("HOROVOD_FUSION_THRESHOLD", lambda mb: str(int(mb * 1024 * 1024))),
    "cycle_time_ms": ("HOROVOD_CYCLE_TIME", _number),
    "timeline_filename": ("HOROVOD_TIMELINE", os.path.abspath),
    "stall_check_seconds": ("HOROVOD_STALL_CHECK_TIME_SECONDS", str),
}


def build_parser() -> argparse.ArgumentParser:
    """Describe the hvdrun command line (Horovod's horovodrun option names)."""
    parser = _Parser(
        prog="hvdrun",
        description="Run COMMAND on NP ranks under mpiexec, Horovod style.",
        allow_abbrev=False,
    )
    parser.add_argument("-np", "--num-proc", dest="np", type=_at_least(1, int), required=True,
                        help="number of ranks to start")
    placement = parser.add_mutually_exclusive_group()
    placement.add_argument("-H", "--hosts", help="hosts and slots, e.g. host1:4,host2:4")
    placement.add_argument("--hostfile", help="Open MPI hostfile listing hosts and slots")
    parser.add_argument("--fusion-threshold-mb", type=_at_least(0, float), metavar="MB",
                        help="tensor fusion buffer size (HOROVOD_FUSION_THRESHOLD)")
    parser.add_argument("--cycle-time-ms", type=_at_least(0, float), metavar="MS",
                        help="background cycle time (HOROVOD_CYCLE_TIME)")
    parser.add_argument("--timeline-filename", metavar="PATH",
                        help="write a timeline to PATH (HOROVOD_TIMELINE)")
    parser.add_argument("--stall-check-seconds", type=_at_least(0, int), metavar="S",
                        help="warn about stalled ranks after S seconds "
                             "(HOROVOD_STALL_CHECK_TIME_SECONDS)")
    parser.add_argument("-x", dest="export", action="append", default=[], metavar="VAR[=VALUE]",
                        help="pass VAR to the ranks, optionally setting it; repeatable")
    parser.add_argument("--verbose", action="store_true", help="print the mpiexec command line")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="program and arguments each rank runs ('--' may precede it)")
    return parser


def launch_spec(args: argparse.Namespace, environ: Mapping[str, str], session_dir: str | None = None) -> LaunchSpec:
    """Turn parsed options into a LaunchSpec: flag settings, -x exports and inherited variables."""
    env = {"PYTHONUNBUFFERED": environ.get("PYTHONUNBUFFERED", "1")}
    for flag, (name, render) in FLAG_ENV.items():
        value = getattr(args, flag)
        if value is not None:
            env[name] = render(value)
    forward = default_forward(environ)
    for item in args.export:
        name, assigned, value = item.partition("=")
        if not name:
            raise ValueError(f"-x needs a variable name, got {item!r}")
        if assigned:
            env[name] = value
        else:
            forward.append(name)
    return LaunchSpec(
        np=args.np, hosts=args.hosts, hostfile=args.hostfile, env=env, forward=forward, session_dir=session_dir
    )


class SignalForwarder:
    """Pass SIGINT, SIGTERM and SIGHUP on to a child; kill it if it lingers after one."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.deadline: float | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> SignalForwarder:
        for signum in FORWARDED_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._forward)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _forward(self, signum: int, _frame: object) -> None:
        """Relay signum to the child and start the grace period before a hard kill."""
        self.proc.send_signal(signum)
        if self.deadline is None:
            self.deadline = time.monotonic() + KILL_AFTER_S

    def wait(self) -> int:
        """Wait for the child, killing it once the grace period after a forwarded signal ends."""
        while True:
            try:
                return self.proc.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    self.proc.kill()


def run(cmd: list[str], env: dict[str, str]) -> int:
    """Run mpiexec, relaying signals; return its exit code, or 128+signum if a signal killed it."""
    proc = subprocess.Popen(cmd, env=env)
    with SignalForwarder(proc) as forwarder:
        code = forwarder.wait()
    return code if code >= 0 else 128 - code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the hvdrun command; returns the exit status of the job."""
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    with tempfile.TemporaryDirectory(prefix="jhvd.") as session_dir:
        try:
            cmd, env = mpiexec_command(launch_spec(args, os.environ, session_dir), command)
        except ValueError as exc:
            parser.error(str(exc))
        except RuntimeError as exc:
            print(f"{parser.prog}: error: {exc}", file=sys.stderr)
            return EXIT_NOT_FOUND
        if args.verbose:
            print(shlex.join(cmd), file=sys.stderr)
        return run(cmd, env)


if __name__ == "__main__":
    sys.exit(main())
