"""The IPython magics: %%hvd runs a cell on N MPI ranks, %hvd manages those ranks."""
from __future__ import annotations

import os
import socket
import sys
from dataclasses import replace
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display
from IPython.utils._process_common import arg_split

from ..monitor import Monitor, cell_key
from ..runner.host_loss import hosts_left
from ..runner.launch import LaunchSpec, check_placement, check_slots, parse_export, placement
from ..runner.slurm import allocation, hosts_listing
from .cluster import START_TIMEOUT_S, LaunchConfig, RankCluster
from .background import Feeder, IdleInterrupt, Submitted, cell_outputs
from .execution import CellRun
from .failures import RankError
from .frameworks import FRAMEWORKS, default_framework, other_framework_note, unavailable_reason
from .job_channel import JobChannel
from .monitor_display import MonitorDisplay, show_monitor
from .rank_setup import rank_status

@magics_class
class HvdMagics(Magics):
    """%%hvd runs a cell on every MPI rank; %hvd shows, stops, restarts and exchanges data with the ranks."""

    def __init__(self, shell: Any):
        super().__init__(shell)
        self._cluster: RankCluster | None = None
        self.launch: LaunchConfig | None = None  # kept after a crash so the next cell restarts the same job
        self.start_timeout = START_TIMEOUT_S  # --start-timeout, kept for every later start
        self.monitor = True
        self.last_monitor: Monitor | None = None  # the last monitored cell, for %hvd monitor
        self._baselines: dict[str, float] = {}  # cell key -> samples/s of its last 1-rank run
        self._reinit = False  # an earlier cell failed: ranks re-initialise the engine before the next one
        self._cells = 0
        self._noted_for: RankCluster | None = None  # the job told that a cell imports the other framework
        self._lost_hosts: set[str] = set()  # hosts lost with an earlier job, left out of the next one
        self.background: Submitted | None = None  # a --noblock cell whose end is not shown yet
        self._idle_interrupt = IdleInterrupt(shell, self._interrupt_background)
        self.job = JobChannel(self)  # the JupyterLab job panel's comm target, when in a kernel
        self.job.register(shell)

    @property
    def cluster(self) -> RankCluster | None:
        """The running ranks, or None (a job stopped after a crash counts as not running)."""
        if self._cluster is not None and self._cluster.stopped:
            self._lost_hosts.update(self._cluster.lost_hosts)
            self._cluster = None
        return self._cluster

    @magic_arguments()
    @argument("-np", type=int, help="number of ranks; required the first time, a different value restarts")
    @argument("--restart", action="store_true", help="start new ranks before running the cell")
    @argument("--hosts", help="hosts and slots, e.g. h1:4,h2:4")
    @argument("--hostfile", help="an Open MPI hostfile")
    @argument("--cpu", action="store_true", help="use the CPU even when GPUs are present")
    @argument("-x", dest="env", action="append", metavar="VAR=VALUE",
              help="set VAR on the ranks (repeatable), e.g. -x HOROVOD_LOG_LEVEL=debug; a different set restarts")
    @argument("--rank", type=int, help="show only this rank's output (and return its value)")
    @argument("--all-displays", action="store_true",
              help="show every rank's rich outputs (figures, HTML, widgets), not only rank 0's")
    @argument("-o", dest="output", metavar="NAME", help="store the list of per-rank values in NAME")
    @argument("--timeout", type=float, metavar="S", help="stop the cell on every rank after S seconds")
    @argument("--start-timeout", type=float, metavar="S",
              help=f"how long starting the ranks may take (default {START_TIMEOUT_S:g}); kept for later starts")
    @argument("--framework", choices=FRAMEWORKS, help="API bound to hvd on the ranks (default: see README)")
    @argument("--no-monitor", action="store_true", help="do not show the training monitor")
    @argument("--noblock", action="store_true",
              help="run the cell in the background: the notebook is free at once; %%hvd wait shows its end")
    @argument("--baseline", type=float, metavar="SAMPLES_PER_S",
              help="one rank's samples/s, the reference for scaling efficiency")
    @cell_magic("hvd")
    def hvd_cell(self, line: str, cell: str) -> Any:
        """Run the cell on every MPI rank; print each rank's output as [rank k] lines; return rank 0's value.

        Without -np the running ranks are reused (or, after a crash, the last job is restarted);
        --hosts, --hostfile, --cpu, --framework and -x given without -np adjust the running job.
        """
        args = parse_line(self.hvd_cell, line)
        config = self._launch_config(args, cell)
        if args.rank is not None and not 0 <= args.rank < config.np:
            raise UsageError(f"--rank must be between 0 and {config.np - 1}, got {args.rank}")
        for flag, value in (("--timeout", args.timeout), ("--start-timeout", args.start_timeout)):
            if value is not None and value <= 0:
                raise UsageError(f"{flag} must be positive, got {value:g}")
        if args.output is not None and not args.output.isidentifier():
            raise UsageError(f"-o needs a variable name, got {args.output!r}")
        if args.baseline is not None and args.baseline <= 0:
            raise UsageError(f"--baseline must be positive, got {args.baseline:g}")
        self.monitor = not args.no_monitor
        if args.start_timeout is not None:
            self.start_timeout = args.start_timeout
        self._end_background()  # shows its end here first (and raises its failure: this cell does not run)
        cluster = self._ensure_ranks(config, restart=args.restart)
        if self._noted_for is not cluster and (note := other_framework_note(config.framework, cell)):
            print(note, file=sys.stderr)
            self._noted_for = cluster  # once per job
        self._cells += 1
        shown = args.rank or 0
        value_ranks = None if args.output else [shown]  # only -o needs every rank's value
        view = MonitorDisplay(self._new_monitor(cell, config.np, args.baseline), self.shell) if self.monitor else None
        self.job.publish("running")  # a failure is reported when the cell ends (JobChannel.ended)
        try:
            run = CellRun(cluster, cell, self._cells, self._reinit, args.timeout, args.rank, value_ranks, view,
                          args.all_displays)
        except BaseException:
            self._ended(view, RankError("the cell did not start"))
            raise
        submitted = Submitted(run, self._cells, args.output, shown, cell.rstrip().endswith(";"))
        if not args.noblock:
            return self._finish(submitted)
        outputs = cell_outputs(self.shell)
        print(f"[hvd] cell {self._cells} runs in the background on {config.np} ranks: "
              + ("its output shows here as it comes, " if outputs else "") + "%hvd wait shows the rest and its value "
              "(the next %%hvd cell, push or pull waits for it first)")
        if view is not None:
            view.show_now()
        if outputs or view is not None:
            submitted.feeder = Feeder(submitted, outputs, self.shell.kernel.get_parent() if outputs else None)
        self.background = submitted
        self._idle_interrupt.hold()
        return None

    def _interrupt_background(self) -> None:
        """The kernel was interrupted while no cell ran: interrupt the background cell's ranks."""
        submitted = self.background
        if submitted is not None and submitted.running() and not submitted.died:
            submitted.run.interrupt("the kernel was interrupted while no cell ran")

    def wait_background(self) -> Any:
        """Show the end of the cell running in the background, if any, here: its output, its failure (raised),
        its value (returned)."""
        submitted, self.background = self.background, None
        if submitted is None:
            return None
        self._idle_interrupt.release()
        submitted.stop_feeding()
        if submitted.run.cluster is not self.cluster:  # stopped with its ranks (a crash, %hvd stop)
            print(f"[hvd] {submitted.describe()} was stopped with the ranks")
            return None
        print(f"[hvd] the end of %%hvd cell {submitted.number}, run in the background:")
        return self._finish(submitted)

    def _end_background(self) -> None:
        """Before a cell, push or pull: the end of the cell running in the background, if any, here, its value
        displayed as %hvd wait would give it (and its failure raised)."""
        value = self.wait_background()
        if value is not None:
            display(value)

    def _finish(self, submitted: Submitted) -> Any:
        """Wait for a submitted cell: its output, then its value (or its failure, raised)."""
        view = submitted.view
        error = RankError("the cell did not finish")  # stays when the wait ends by another exception
        try:
            values = submitted.run.wait()
            error = None
        except RankError as e:
            error = e
            raise
        finally:
            self._ended(view, error)
        self.job.publish("idle")
        if submitted.output_name:
            self.shell.user_ns[submitted.output_name] = values
        return None if submitted.quiet else values[submitted.shown]

    @magic_arguments()
    @argument("command", choices=("status", "stop", "restart", "push", "pull", "monitor", "wait"))
    @argument("names", nargs="*", help="variables to push or to pull")
    @argument("--rank", type=int, default=None, help="rank to pull from (default 0)")
    @line_magic("hvd")
    def hvd_line(self, line: str) -> Any:
        """Manage the ranks: status, stop, restart, push NAME [NAME...], pull NAME [NAME...] [--rank R],
        monitor, wait (for a --noblock cell); or start them (or change the job) with %%hvd's flags and no code:
        %hvd -np 2."""
        if line.split() in (["-h"], ["--help"]):  # IPython's magics take no -h: their help is %hvd?
            both = self.hvd_line.parser.format_help() + "\n" + self.hvd_cell.parser.format_help()
            print(both.replace("::\n\n", "").replace("%hvd_line", "%hvd").replace("%hvd_cell", "%%hvd"))
            return None
        if not line.strip():
            raise UsageError("%hvd needs a command (status, stop, restart, push NAME..., pull NAME... [--rank R], "
                             "monitor), or %%hvd's flags to start the ranks (%hvd -np 2); see %hvd --help")
        if line.strip().startswith("-") and not line.strip().startswith("--rank"):
            return self.hvd_cell(f"{line} --no-monitor", "pass")  # IPython suggests %hvd for an empty %%hvd cell
        args = parse_line(self.hvd_line, line)
        if args.names and args.command not in ("push", "pull"):
            raise UsageError(f"%hvd {args.command} takes no names, got: {' '.join(args.names)}")
        if args.rank is not None and args.command != "pull":
            raise UsageError(f"--rank is for %hvd pull; %hvd {args.command} takes no rank")
        if args.command == "wait":
            if self.background is None:
                print("[hvd] no cell runs in the background")
            return self.wait_background()
        if args.command == "status":
            print(self.status())
        elif args.command == "stop":
            stopped = self.cluster is not None
            self.stop_ranks()
            print("[hvd] stopped the ranks" if stopped else "[hvd] no ranks running")
        elif args.command == "restart":
            if self.launch is None:
                raise UsageError("no ranks to restart: start them with %%hvd -np N")
            self._ensure_ranks(self.launch, restart=True)
        elif args.command == "push":
            return self._push(args.names)
        elif args.command == "monitor":
            if self.background is not None:
                print(f"[hvd] {self.background.describe()}: its monitor is under it")
            elif self.last_monitor is None:
                print("[hvd] no monitored cell has run yet")
            else:
                show_monitor(self.last_monitor, self.shell)
        else:
            return self._pull(args.names, 0 if args.rank is None else args.rank)
        return None

    def status(self) -> str:
        """Describe the running ranks: host, pid, device and whether each engine is initialised."""
        if self.cluster is None:
            return "[hvd] no ranks running"
        if self.background is not None and self.background.running():  # the ranks answer once it ends
            where = self.cluster.config.where()
            return f"[hvd] {len(self.cluster.ranks)} ranks on {where}: {self.background.describe()}"
        cluster = self.cluster
        try:
            states = cluster.gather(cluster.submit(rank_status), timeout=10)
        except RankError as exc:
            return f"[hvd] {exc}"
        config = cluster.config
        where = config.where()
        env = "".join(f", {name}={value}" for name, value in config.env)
        lines = [
            f"[hvd] {config.np} ranks on {where}, API {cluster.ranks[0].api}{env}, "
            f"started in {cluster.cold_start_s:.1f}s",
            f"{'rank':>4}  {'host':<20} {'local':>5} {'pid':>8}  {'device':<8} engine",
        ]
        for info, state in zip(cluster.ranks, states):
            engine = "initialised" if state["initialised"] else "not initialised"
            lines.append(f"{info.rank:>4}  {info.host:<20} {info.local_rank:>5} {info.pid:>8}  {info.device:<8} {engine}")
        return "\n".join(lines)

    def stop_ranks(self) -> None:
        """Stop the ranks and every process started for them."""
        if self.background is not None:
            self._idle_interrupt.release()
            self.background.stop_feeding()
            if self.background.running():
                print(f"[hvd] stopping {self.background.describe()}")
            self.background = None
        if self.cluster is not None:
            cluster, self._cluster = self.cluster, None
            survivors = cluster.stop()
            if survivors:
                print(f"[hvd] warning: processes survived the stop: {[p.pid for p in survivors]}")
        self.job.stopped()

    def _ensure_ranks(self, config: LaunchConfig, restart: bool) -> RankCluster:
        """Return running ranks for config, starting (or restarting) them when needed."""
        if self.cluster is not None:
            reason = "--restart" if restart else self._restart_reason(config)
            if reason:
                print(f"[hvd] restarting the ranks ({reason}): the variables they held are lost")
                self.stop_ranks()
        if self.cluster is None:
            self.launch = config
            cluster = RankCluster(config, self.start_timeout)
            self.job.publish("starting")
            cluster.start()
            self._cluster = cluster
            self._reinit = False
            self.job.publish("idle")
            inside = f" in {config.where()}" if config.allocation else ""
            print(f"[hvd] started {config.np} ranks{inside} in {cluster.cold_start_s:.1f}s")
        return self.cluster

    def _ended(self, view: MonitorDisplay | None, error: RankError | None) -> None:
        """A cell is over, finished (``error`` None) or not."""
        self._reinit = error is not None  # a cell that did not finish, however it ended, restarts the engines
        if view is not None:  # a failed cell's monitor stays too: %hvd monitor
            self._keep(view.monitor, error)
            view.close()

    def _restart_reason(self, config: LaunchConfig) -> str:
        """Why the running ranks cannot serve config, or '' when they can."""
        assert self.cluster is not None
        return config.changes_from(self.cluster.config) or self.cluster.what_died()

    def _launch_config(self, args: Any, cell: str) -> LaunchConfig:
        """The job a cell asks for: a full spec with -np, else the current job adjusted by the flags given."""
        if args.np is None and self.launch is None:
            raise UsageError("-np N is required to start the ranks, e.g. %%hvd -np 2")
        if args.np is not None and args.np < 1:
            raise UsageError(f"-np must be at least 1, got {args.np}")
        base = LaunchConfig(np=args.np, framework=default_framework(cell)) if args.np is not None else self.launch
        changes = {k: getattr(args, k) for k in ("hosts", "hostfile", "framework") if getattr(args, k) is not None}
        if args.np is None and (args.hosts or args.hostfile):  # a new placement replaces the old one
            changes = {"hosts": None, "hostfile": None, **changes}
        if args.hosts or args.hostfile:
            changes["allocation"] = ""
        if args.cpu:
            changes["cpu"] = True
        if args.env is not None:
            changes["env"] = _rank_env(args.env)
        config = LaunchConfig(**{**vars(base), **changes})
        if not config.hosts and not config.hostfile:  # in a Slurm allocation: its hosts, as mpiexec would
            try:
                slurm = allocation(os.environ)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
            if slurm:
                config = replace(config, hosts=slurm.listing(), allocation=slurm.job_id)
        if args.np is not None or args.hosts or args.hostfile:
            self._lost_hosts.clear()  # the cell says where to run
        elif self.cluster is None and self._lost_hosts:  # a job lost hosts and stopped
            config = self._without_lost_hosts(config)
        _check_placement(config)
        if reason := unavailable_reason(config.framework):
            raise UsageError(f"--framework {config.framework}: {reason}")
        return config

    def _without_lost_hosts(self, config: LaunchConfig) -> LaunchConfig:
        """The job config on the hosts left after a host was lost, when they have a slot for every rank; a
        UsageError saying why not, and what to run instead, when they do not."""
        hosts = placement(LaunchSpec(np=config.np, hosts=config.hosts, hostfile=config.hostfile))
        left = hosts_left(hosts, self._lost_hosts)
        if left == hosts:
            return config
        lost = ", ".join(sorted(self._lost_hosts))
        slots = sum(n for _, n in left)
        listing = hosts_listing(left)
        if slots < config.np:
            instead = f"run %%hvd -np {slots} --hosts {listing} to go on there, or " if left else ""
            raise UsageError(f"host {lost} was lost, and the hosts left ({listing or 'none'}) have {slots} slots for "
                             f"{config.np} ranks: {instead}give --hosts with hosts that are up")
        print(f"[hvd] host {lost} was lost: starting {config.np} ranks on the hosts left, {listing}")
        return replace(config, hosts=listing, hostfile=None)

    def _new_monitor(self, cell: str, np: int, baseline: float | None) -> Monitor:
        """A monitor for this cell, with the baseline given, or measured on one rank earlier in the session."""
        monitor = Monitor(np, cell_key(cell))
        if baseline is not None:
            monitor.set_baseline(baseline, "--baseline")
        elif monitor.key in self._baselines:
            monitor.set_baseline(self._baselines[monitor.key], "1-rank run of this cell")
        return monitor

    def _keep(self, monitor: Monitor, error: RankError | None = None) -> None:
        """Keep the cell's monitor for %hvd monitor, and a 1-rank run's throughput as the cell's baseline."""
        if error is None:
            monitor.finish()
        else:
            monitor.finish(str(error).splitlines()[0], error.ranks[0] if error.ranks else None)
        self.last_monitor = monitor
        measured = monitor.measured_rate()
        if len(monitor.ranks) == 1 and measured:
            self._baselines[monitor.key] = measured
            if monitor.baseline is None:
                monitor.set_baseline(measured, "this 1-rank run")

    def _push(self, names: list[str]) -> None:
        if not names:
            raise UsageError("usage: %hvd push NAME [NAME...]")
        missing = [n for n in names if n not in self.shell.user_ns]
        if missing:
            raise UsageError(f"not defined in the notebook: {', '.join(missing)}")
        self._end_background()
        self._running().push({n: self.shell.user_ns[n] for n in names})
        print(f"[hvd] pushed {', '.join(names)} to {len(self._running().ranks)} ranks")

    def _pull(self, names: list[str], rank: int) -> Any:
        """Set each named variable of rank ``rank`` in the notebook too; return the value of a single one,
        so that ``x = %hvd pull y`` works as well."""
        if not names:
            raise UsageError("usage: %hvd pull NAME [NAME...] [--rank R]")
        self._end_background()
        cluster = self._running()
        if not 0 <= rank < len(cluster.ranks):
            raise UsageError(f"--rank must be between 0 and {len(cluster.ranks) - 1}, got {rank}")
        values = cluster.pull(names, rank)
        self.shell.user_ns.update(zip(names, values))
        print(f"[hvd] pulled {', '.join(names)} from rank {rank}")
        return values[0] if len(names) == 1 else None

    def _running(self) -> RankCluster:
        if self.cluster is None:
            raise UsageError("no ranks running: start them with %%hvd -np N")
        return self.cluster


def parse_line(magic: Any, line: str) -> Any:
    """A magic's arguments, its line split as a shell splits a command line: quotes group words and go
    (IPython's own split keeps them, so `-x "MSG=a b"` arrived with its quotes and was refused)."""
    try:
        argv = arg_split(line, posix=True)
    except ValueError as exc:  # an unclosed quote
        raise UsageError(f"{line!r}: {exc}") from None
    return magic.parser.parse_args(argv)


def _rank_env(items: list[str]) -> tuple[tuple[str, str], ...]:
    """-x VAR=VALUE flags as sorted (name, value) pairs; the last value of a name counts."""
    try:
        env = dict(parse_export(item, value_required=True) for item in items)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return tuple(sorted(env.items()))


def _check_placement(config: LaunchConfig) -> None:
    """Reject host lists that mpiexec could not use, with a one-line reason. The hosts of --hosts must
    resolve here: ranks there are started after the controller, which would wait for them in vain."""
    try:
        hosts = check_placement(config.hosts, config.hostfile)
        check_slots(config.np, hosts)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for host, _ in hosts if config.hosts else []:
        try:
            socket.getaddrinfo(host, None)
        except OSError:
            raise UsageError(f"--hosts: unknown host {host!r}") from None
