"""hvdrun: run a command on N data-parallel ranks under Open MPI's mpiexec."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn

from jupyter_hvd import __version__
from jupyter_hvd._C import check_setting, settings
from jupyter_hvd.runner.child import die_with_parent, wait_relaying
from jupyter_hvd.runner.first_failure import misnamed_failure
from jupyter_hvd.runner.host_loss import job_failure, ranks_by_host
from jupyter_hvd.runner.launch import (LISTEN_VAR, START_TIMEOUT_S, START_TIMEOUT_VAR, LaunchSpec, default_forward,
                                      mpiexec_command, parse_export, placement)
from jupyter_hvd.runner.networks import check_listen
from jupyter_hvd.runner.slurm import allocation
from jupyter_hvd.runner.stdin_program import from_stdin
from jupyter_hvd.runner.session_folder import session_folder

EXIT_USAGE = 2
RELAY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "output_relay.py")
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
    "cache_capacity": ("HOROVOD_CACHE_CAPACITY", str),
    "disable_cache": ("HOROVOD_CACHE_CAPACITY", lambda _: "0"),
    "hierarchical_allreduce": ("HOROVOD_HIERARCHICAL_ALLREDUCE", lambda on: "1" if on else "0"),
    "timeline_filename": ("HOROVOD_TIMELINE", os.path.abspath),
    "timeline_mark_cycles": ("HOROVOD_TIMELINE_MARK_CYCLES", lambda _: "1"),
    "no_stall_check": ("HOROVOD_STALL_CHECK_DISABLE", lambda _: "1"),
    "stall_check_seconds": ("HOROVOD_STALL_CHECK_TIME_SECONDS", str),
    "stall_check_shutdown_seconds": ("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", str),
    "autotune": ("HOROVOD_AUTOTUNE", lambda _: "1"),
    "autotune_log_file": ("HOROVOD_AUTOTUNE_LOG", os.path.abspath),
    "autotune_warmup_samples": ("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", str),
    "autotune_steps_per_sample": ("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", str),
    "autotune_bayes_opt_max_samples": ("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", str),
    "autotune_gaussian_process_noise": ("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", _number),
    "thread_affinity": ("HOROVOD_THREAD_AFFINITY", str),
    "log_level": ("HOROVOD_LOG_LEVEL", str.lower),
    "log_with_timestamp": ("HOROVOD_LOG_HIDE_TIME", lambda shown: "0" if shown else "1"),
}

# The engine's settings table (name, default, accepted values, help): the flags of FLAG_ENV take their help
# from it, and their values are checked by the engine's own reading of each variable before any rank starts.
SETTINGS = {s["name"]: s for s in settings()}
LOG_LEVELS = tuple(level.upper() for level in SETTINGS["HOROVOD_LOG_LEVEL"]["choices"])


def _about(name: str, what: str | None = None) -> str:
    """A flag's help: ``what`` (default: the setting's own help), its variable and its default."""
    default = SETTINGS[name]["default"]
    return f"{what or SETTINGS[name]['help']} ({name}{f'; default {default}' if default else ''})"

# horovodrun options with no counterpart here, and what to do instead.
UNSUPPORTED: dict[str, str] = {
    "--gloo": "hvdrun always runs the job on Open MPI",
    "--jsrun": "hvdrun always runs the job on Open MPI's mpiexec",
    "--hierarchical-allgather": "allgather is not hierarchical here; --hierarchical-allreduce is",
    "--num-nccl-streams": "the engine uses one NCCL stream per process set",
    "--mpi-threads-disable": "the engine needs MPI_THREAD_MULTIPLE",
    "--config-file": "give the options on the command line",
    "--gloo-timeout-seconds": "hvdrun always runs the job on Open MPI, which has no Gloo timeout",
    **{flag: "elastic training is not supported" for flag in (
        "--min-np", "--min-num-proc", "--max-np", "--max-num-proc", "--slots-per-host", "--elastic-timeout",
        "--reset-limit", "--blacklist-cooldown-range", "--host-discovery-script")},
}
# horovodrun's flags that ask for what hvdrun does anyway.
DEFAULTS = {
    "--no-hierarchical-allgather": "allgather is never hierarchical",
    "--no-mpi-threads-disable": "the engine always uses MPI_THREAD_MULTIPLE",
}


class _Interfaces(argparse.Action):
    """--network-interface(s): each use adds its comma-separated interfaces, as horovodrun's do."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        given = (getattr(namespace, self.dest) or "").split(",") + str(values).split(",")
        setattr(namespace, self.dest, ",".join(dict.fromkeys(name for name in given if name)))


class _Default(argparse.Action):
    """A horovodrun flag that asks for what hvdrun does anyway: accepted, and nothing changes."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, argparse.SUPPRESS, nargs=0, help=argparse.SUPPRESS)

    def __call__(self, *args: object, **kwargs: object) -> None:
        pass


class _Unsupported(argparse.Action):
    """A horovodrun option hvdrun refuses with the reason (its const) rather than 'unrecognized'."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        parser.error(f"{option_string} is a horovodrun option that hvdrun does not support: {self.const}")


def build_parser() -> argparse.ArgumentParser:
    """Describe the hvdrun command line (Horovod's horovodrun option names)."""
    parser = _Parser(
        prog="hvdrun",
        description="Run COMMAND on NP ranks under mpiexec, Horovod style.",
        allow_abbrev=False,
    )
    parser.add_argument("-np", "--num-proc", dest="np", type=_at_least(1, int),
                        help="number of ranks to start (required unless --check-build)")
    parser.add_argument("-v", "--version", action="version", version=f"hvdrun (jupyter_hvd) {__version__}")
    parser.add_argument("-cb", "--check-build", action="store_true",
                        help="show which frameworks, controllers and tensor operations are available, then exit")
    parser.add_argument("-H", "--hosts", help="hosts and slots, e.g. host1:4,host2:4")
    parser.add_argument("-hostfile", "--hostfile", help="Open MPI hostfile listing hosts and slots")
    parser.add_argument("-p", "--ssh-port", type=_at_least(1, int), metavar="PORT",
                        help="SSH port of the other hosts")
    parser.add_argument("-i", "--ssh-identity-file", metavar="FILE", help="SSH key for the other hosts")
    parser.add_argument("--start-timeout", type=_at_least(1, float), metavar="SECONDS",
                        help=f"how long ssh tries to reach each other host before the job fails (default: "
                             f"${START_TIMEOUT_VAR}, else {START_TIMEOUT_S:g})")
    parser.add_argument("--network-interface", "--network-interfaces", metavar="IFACES", action=_Interfaces,
                        help="comma-separated network interfaces for MPI, Open MPI's launch and NCCL; repeatable")
    parser.add_argument("--output-filename", metavar="DIR",
                        help="also write each rank's output to DIR/rank.N/stdout and DIR/rank.N/stderr")
    parser.add_argument("--mpi-args", metavar="ARGS", help='extra mpiexec options, e.g. --mpi-args="--map-by core"')
    parser.add_argument("--binding-args", metavar="ARGS",
                        help='mpiexec options that place the ranks, e.g. --binding-args="--bind-to none"; a --bind-to '
                             'here or in --mpi-args replaces the default placement (each rank bound to its share of '
                             "one host's cores)")
    parser.add_argument("--mpi", action="store_true", help="accepted for horovodrun scripts; the job always uses MPI")
    parser.add_argument("--tcp", action="store_true",
                        help="MPI over TCP alone (no shared memory or other transports: --mca pml ob1 --mca btl "
                             "tcp,self), and NCCL without InfiniBand (NCCL_IB_DISABLE=1)")
    parser.add_argument("-prefix-timestamp", "--prefix-output-with-timestamp", dest="prefix_timestamp",
                        action="store_true", help="start each line the ranks print with the time (mpiexec's "
                                                  "--output timestamp)")
    parser.add_argument("--tag-output", action="store_true",
                        help="start each line the ranks print with its rank and stream, [1,RANK]<stdout>: (mpiexec's "
                             "--output tag; horovodrun always does)")
    parser.add_argument("--fusion-threshold-mb", type=float, metavar="MB",
                        help=_about("HOROVOD_FUSION_THRESHOLD", "tensor fusion buffer size in MiB"))
    parser.add_argument("--cycle-time-ms", type=float, metavar="MS", help=_about("HOROVOD_CYCLE_TIME"))
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument("--cache-capacity", type=int, metavar="N", help=_about("HOROVOD_CACHE_CAPACITY"))
    cache.add_argument("--disable-cache", action="store_const", const=True,
                       help="no response cache (HOROVOD_CACHE_CAPACITY=0)")
    parser.add_argument("--hierarchical-allreduce", action=argparse.BooleanOptionalAction,
                        help=_about("HOROVOD_HIERARCHICAL_ALLREDUCE"))
    tune = parser.add_argument_group("autotuning (rank 0 tries fusion thresholds and cycle times while training runs)")
    tune.add_argument("--autotune", action="store_const", const=True,
                      help=_about("HOROVOD_AUTOTUNE", "tune the fusion threshold and cycle time not set by flags"))
    tune.add_argument("--no-autotune", dest="autotune", action="store_const", const=None, help=argparse.SUPPRESS)
    tune.add_argument("--autotune-log-file", metavar="PATH", help=_about("HOROVOD_AUTOTUNE_LOG"))
    tune.add_argument("--autotune-warmup-samples", type=int, metavar="N",
                      help=_about("HOROVOD_AUTOTUNE_WARMUP_SAMPLES"))
    tune.add_argument("--autotune-steps-per-sample", type=int, metavar="N",
                      help=_about("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE"))
    tune.add_argument("--autotune-bayes-opt-max-samples", type=int, metavar="N",
                      help=_about("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"))
    tune.add_argument("--autotune-gaussian-process-noise", type=float, metavar="X",
                      help=_about("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"))
    parser.add_argument("--timeline-filename", metavar="PATH", help=_about("HOROVOD_TIMELINE"))
    parser.add_argument("--timeline-mark-cycles", action="store_const", const=True,
                        help=_about("HOROVOD_TIMELINE_MARK_CYCLES", "mark each engine cycle that ran collectives"))
    parser.add_argument("--no-timeline-mark-cycles", dest="timeline_mark_cycles", action="store_const", const=None,
                        help=argparse.SUPPRESS)
    stall = parser.add_mutually_exclusive_group()
    stall.add_argument("--no-stall-check", action="store_const", const=True,
                       help=_about("HOROVOD_STALL_CHECK_DISABLE", "no warnings about stalled ranks"))
    stall.add_argument("--stall-check-warning-time-seconds", "--stall-check-seconds", dest="stall_check_seconds",
                       type=int, metavar="S", help=_about("HOROVOD_STALL_CHECK_TIME_SECONDS"))
    parser.add_argument("--stall-check", dest="no_stall_check", action="store_const", const=None,
                        help=argparse.SUPPRESS)
    parser.add_argument("--stall-check-shutdown-time-seconds", dest="stall_check_shutdown_seconds", type=int,
                        metavar="S", help=_about("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"))
    parser.add_argument("--thread-affinity", metavar="CORES", help=_about("HOROVOD_THREAD_AFFINITY"))
    logs = parser.add_argument_group("engine log on stderr")
    logs.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, help=_about("HOROVOD_LOG_LEVEL"))
    stamp = logs.add_mutually_exclusive_group()
    stamp.add_argument("--log-with-timestamp", dest="log_with_timestamp", action="store_const", const=True,
                       help="start each engine message with the time (the default)")
    stamp.add_argument("--log-without-timestamp", dest="log_with_timestamp", action="store_const", const=False,
                       help="leave the time out of engine messages (HOROVOD_LOG_HIDE_TIME=1)")
    stamp.add_argument("--log-hide-timestamp", dest="log_with_timestamp", action="store_const", const=False,
                       help=argparse.SUPPRESS)  # horovodrun's older names of the two
    stamp.add_argument("--no-log-hide-timestamp", dest="log_with_timestamp", action="store_const", const=True,
                       help=argparse.SUPPRESS)
    parser.add_argument("-x", dest="export", action="append", default=[], metavar="VAR[=VALUE]",
                        help="pass VAR to the ranks, optionally setting it; repeatable")
    parser.add_argument("--verbose", action="store_true", help="print the mpiexec command line")
    for flag in DEFAULTS:
        parser.add_argument(flag, action=_Default)
    for flag, reason in UNSUPPORTED.items():
        parser.add_argument(flag, nargs="?", const=reason, action=_Unsupported, help=argparse.SUPPRESS)
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="program and arguments each rank runs ('--' may precede it)")
    return parser


def ssh_options(args: argparse.Namespace) -> list[str]:
    """ssh options from hvdrun's -p and -i."""
    return [*(["-p", str(args.ssh_port)] if args.ssh_port else []),
            *(["-i", args.ssh_identity_file] if args.ssh_identity_file else [])]


def mpiexec_options(args: argparse.Namespace) -> list[str]:
    """mpiexec options from hvdrun's --tcp, --tag-output, --prefix-output-with-timestamp, --binding-args and
    --mpi-args flags."""
    opts = []
    if args.tcp:
        opts += ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self"]
    if labels := [label for label, given in (("tag", args.tag_output), ("timestamp", args.prefix_timestamp)) if given]:
        opts += ["--output", ",".join(labels)]
    for extra in (args.binding_args, args.mpi_args):
        if extra:
            opts += shlex.split(extra)
    return opts


def launch_spec(args: argparse.Namespace, environ: Mapping[str, str], session_dir: str | None = None) -> LaunchSpec:
    """Turn parsed options into a LaunchSpec: flag settings, -x exports and inherited variables."""
    env = {"PYTHONUNBUFFERED": environ.get("PYTHONUNBUFFERED", "1")}
    for flag, (name, render) in FLAG_ENV.items():
        value = getattr(args, flag)
        if value is not None:
            env[name] = render(value)
            check_setting(name, env[name])  # ValueError naming the variable, as hvd.init() would raise
    if args.network_interface:
        env["NCCL_SOCKET_IFNAME"] = args.network_interface
    if args.tcp:
        env["NCCL_IB_DISABLE"] = "1"
    forward = default_forward(environ)
    for item in args.export:
        name, value = parse_export(item)
        if value is not None:
            env[name] = value
        else:
            forward.append(name)
    in_slurm = None if args.hosts or args.hostfile else allocation(environ)
    return LaunchSpec(
        np=args.np, hosts=args.hosts, hostfile=args.hostfile, env=env, forward=forward, session_dir=session_dir,
        mpi_args=mpiexec_options(args), listen=args.network_interface, allocation=in_slurm,
        ssh_args=ssh_options(args), start_timeout=args.start_timeout,
    )


def rank_command(args: argparse.Namespace, command: list[str]) -> list[str]:
    """What mpiexec starts on each rank to run ``command``: itself, or through rank_output, which also writes
    the rank's output to the --output-filename folder."""
    if not args.output_filename:
        return command
    return [sys.executable, "-m", "jupyter_hvd.runner.rank_output", os.path.abspath(args.output_filename), *command]


def check_program(program: str, path: str | None) -> None:
    """A ValueError, before anything starts, for a program that cannot run on this host: one not found (on
    ``path``, mpiexec's PATH, for a bare name), or a file without execute permission, such as a script given
    without its interpreter. Open MPI says only that it 'could not access an executable'. As mpiexec does, a
    bare name is also looked for in the working folder."""
    if shutil.which(program, path=path) is not None:
        return
    if not os.path.isfile(program):
        where = "no such file" if os.sep in program else "not found on PATH"
        raise ValueError(f"cannot run {program!r}: {where}")
    if os.access(program, os.X_OK):  # a bare name in the working folder
        return
    advice = f"run it with its interpreter (hvdrun -np N python {program})" if program.endswith(".py") else \
        f"chmod +x {program}, or run it with its interpreter"
    raise ValueError(f"cannot run {program!r}: it is not executable; {advice}")


def check_output_folder(folder: str | None) -> None:
    """Make the --output-filename folder, or a ValueError saying why it cannot be (each rank would fail alike)."""
    if folder:
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"--output-filename {folder}: cannot make it: {exc.strerror}") from None


def run(cmd: list[str], env: dict[str, str], ranks: dict[str, list[int]] | None = None) -> int:
    """Run mpiexec, relaying signals; return its exit code, or 128+signum if a signal killed it.

    mpiexec gets SIGTERM if hvdrun dies, even by SIGKILL, so no job outlives its launcher. Its output goes
    through output_relay.py, so that a host lost in the middle of the job can be named with its ranks
    (``ranks``: each host's), and fail the job even where mpiexec exits 0 after one."""
    die = die_with_parent(signal.SIGTERM) if sys.platform == "linux" else None
    (out_r, out_w), (err_r, err_w), (tail_r, tail_w) = os.pipe(), os.pipe(), os.pipe()
    try:
        proc = subprocess.Popen(cmd, env=env, preexec_fn=die, stdout=out_w, stderr=err_w)
        relay = subprocess.Popen([sys.executable, RELAY, str(out_r), str(err_r), str(tail_w), str(proc.pid)],
                                 pass_fds=(out_r, err_r, tail_w), stdin=subprocess.DEVNULL)
    finally:
        for fd in (out_r, out_w, err_r, err_w, tail_w):
            os.close(fd)
    code = wait_relaying(proc)
    with os.fdopen(tail_r, "rb") as tail:
        output = tail.read().decode(errors="replace")
    relay.wait()
    if failure := job_failure(output, ranks or {}):
        print(f"hvdrun: {failure}", file=sys.stderr, flush=True)
        return code or 1
    if code and (origin := misnamed_failure(output)):
        print(f"hvdrun: {origin}", file=sys.stderr, flush=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the hvdrun command; returns the exit status of the job."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.check_build:
        from jupyter_hvd.runner.check_build import report

        print(report())
        return 0
    if args.np is None:
        parser.error("the following arguments are required: -np/--num-proc")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    if sys.stdin is None:  # started with standard input closed: the job's pipes would take fd 0, losing output
        os.open(os.devnull, os.O_RDONLY)  # the lowest free descriptor: 0
    else:
        try:
            command = from_stdin(command, sys.stdin.buffer, sys.stdin.isatty())
        except ValueError as exc:
            parser.error(str(exc))
    program = command[0]
    command = rank_command(args, command)
    with session_folder() as session_dir:
        try:
            spec = launch_spec(args, os.environ, session_dir)
            check_listen(spec.listen or os.environ.get(LISTEN_VAR),
                         "--network-interface" if spec.listen else LISTEN_VAR)
            cmd, env = mpiexec_command(spec, command)
            ranks = ranks_by_host(placement(spec), spec.np)
            if not ranks:  # this host alone: its PATH and files are the ranks'
                check_program(program, env.get("PATH"))
                check_output_folder(args.output_filename)
        except ValueError as exc:
            parser.error(str(exc))
        except RuntimeError as exc:
            print(f"{parser.prog}: error: {exc}", file=sys.stderr)
            return EXIT_NOT_FOUND
        if args.verbose:
            print(shlex.join(cmd), file=sys.stderr)
        return run(cmd, env, ranks)


if __name__ == "__main__":
    sys.exit(main())
