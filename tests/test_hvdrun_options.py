"""hvdrun's horovodrun options: engine settings, mpiexec options, per-rank output files, --check-build."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hvdrun_cli import PRINT_ENV, PRINT_RANK, RUN_TIMEOUT_S, clean_env, hvdrun_argv, rank_lines, run_hvdrun, running

from jupyter_hvd.runner import hvdrun, rank_output
from jupyter_hvd.runner.launch import IF_INCLUDE_VARS, LISTEN_VAR, mpiexec_command
from jupyter_hvd.runner.rank_output import rank_folder

pytestmark = pytest.mark.timeout(120)

ENGINE_VARS = ["HOROVOD_FUSION_THRESHOLD", "HOROVOD_CYCLE_TIME", "HOROVOD_CACHE_CAPACITY",
               "HOROVOD_HIERARCHICAL_ALLREDUCE", "HOROVOD_TIMELINE", "HOROVOD_STALL_CHECK_DISABLE",
               "HOROVOD_STALL_CHECK_TIME_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
               "HOROVOD_TIMELINE_MARK_CYCLES"]
AUTOTUNE_VARS = ["HOROVOD_AUTOTUNE", "HOROVOD_AUTOTUNE_LOG", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES",
                 "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
                 "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"]
CACHE_USE = (
    "import jupyter_hvd as hvd, numpy as np\n"
    "hvd.init()\n"
    "for _ in range(5):\n"
    "    hvd.allreduce(np.ones(4, np.float32), name='same')\n"
    "m = hvd.metrics()\n"
    "print('requests', hvd.rank(), m['cached_requests'], m['full_requests'])\n"
    "hvd.shutdown()\n"
)
TEE = "import os, sys; r = os.environ['OMPI_COMM_WORLD_RANK']; print('out', r); print('err', r, file=sys.stderr)"


def env_of_ranks(tmp_path: Path, *flags: str, names: list[str] = ENGINE_VARS) -> str:
    """The variables each of 2 ranks sees under hvdrun with flags (one line, the same on both)."""
    result = subprocess.run(hvdrun_argv("-np", "2", *flags, sys.executable, "-c", PRINT_ENV, *names),
                            env=clean_env(), cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and lines[0] == lines[1], result.stdout
    return lines[0]


def test_engine_flags_become_horovod_env(tmp_path: Path) -> None:
    """The settings reach every rank's environment (what each flag sets: the tests below, without ranks)."""
    seen = env_of_ranks(tmp_path, "--fusion-threshold-mb", "1.5", "--cycle-time-ms", "3.5", "--cache-capacity", "64",
                        "--hierarchical-allreduce", "--timeline-filename", "tl.json", "--timeline-mark-cycles",
                        "--stall-check-warning-time-seconds", "30", "--stall-check-shutdown-time-seconds", "90")
    assert seen == (f"HOROVOD_FUSION_THRESHOLD={int(1.5 * 1024 * 1024)} HOROVOD_CYCLE_TIME=3.5 "
                    f"HOROVOD_CACHE_CAPACITY=64 HOROVOD_HIERARCHICAL_ALLREDUCE=1 "
                    f"HOROVOD_TIMELINE={tmp_path / 'tl.json'} HOROVOD_STALL_CHECK_DISABLE=<unset> "
                    f"HOROVOD_STALL_CHECK_TIME_SECONDS=30 HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=90 "
                    f"HOROVOD_TIMELINE_MARK_CYCLES=1")


def spec_env(*flags: str) -> dict[str, str]:
    """The variables hvdrun's flags give the ranks (besides those it forwards), without starting a job."""
    args = hvdrun.build_parser().parse_args(["-np", "2", *flags, "prog"])
    return hvdrun.launch_spec(args, {}).env


def test_switch_flags_turn_engine_features_off() -> None:
    env = spec_env("--disable-cache", "--no-hierarchical-allreduce", "--no-stall-check")
    assert env["HOROVOD_CACHE_CAPACITY"] == "0" and env["HOROVOD_HIERARCHICAL_ALLREDUCE"] == "0"
    assert env["HOROVOD_STALL_CHECK_DISABLE"] == "1"


def test_autotune_flags_become_horovod_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = spec_env("--autotune", "--autotune-log-file", "tune.csv", "--autotune-warmup-samples", "0",
                   "--autotune-steps-per-sample", "4", "--autotune-bayes-opt-max-samples", "7",
                   "--autotune-gaussian-process-noise", "0.5")
    assert {name: env.get(name) for name in AUTOTUNE_VARS} == {
        "HOROVOD_AUTOTUNE": "1", "HOROVOD_AUTOTUNE_LOG": str(tmp_path / "tune.csv"),
        "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "0", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "4",
        "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "7", "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE": "0.5"}


def test_log_and_affinity_flags_become_horovod_env() -> None:
    names = ["HOROVOD_LOG_LEVEL", "HOROVOD_LOG_HIDE_TIME", "HOROVOD_THREAD_AFFINITY"]
    env = spec_env("--log-level", "debug", "--log-without-timestamp", "--thread-affinity", "1,0")
    assert [env.get(n) for n in names] == ["debug", "1", "1,0"]
    env = spec_env("--log-level", "TRACE", "--log-with-timestamp")
    assert [env.get(n) for n in names] == ["trace", "0", None]


def test_our_older_stall_flag_name_still_works() -> None:
    assert spec_env("--stall-check-seconds", "12")["HOROVOD_STALL_CHECK_TIME_SECONDS"] == "12"


@pytest.mark.parametrize(("flags", "cached"), [([], True), (["--disable-cache"], False)], ids=["cache", "no-cache"])
def test_disable_cache_reaches_the_engine(flags: list[str], cached: bool) -> None:
    """Repeated ops of one name go by cache id on rank 1 from the third (a name gets an id the second time it
    comes), unless the cache is off: then every request is full."""
    result = run_hvdrun("-np", "2", *flags, sys.executable, "-c", CACHE_USE)
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("requests 1 "))
    cached_requests, full_requests = map(int, line.split()[2:])
    assert (cached_requests > 0) == cached
    assert full_requests == (2 if cached else 5)


def parse(*argv: str):
    return hvdrun.build_parser().parse_args([*argv, "prog"])


@pytest.mark.parametrize(
    ("argv", "options"),
    [
        ([], []),
        (["--mpi-args=--map-by ppr:2:node --report-bindings"], ["--map-by", "ppr:2:node", "--report-bindings"]),
        (["--mpi-args=--report-bindings", "--binding-args=--bind-to core --map-by core"],
         ["--bind-to", "core", "--map-by", "core", "--report-bindings"]),
    ],
)
def test_mpiexec_options(argv: list[str], options: list[str]) -> None:
    assert hvdrun.mpiexec_options(parse("-np", "2", *argv)) == options


# Every horovodrun option of Horovod 0.28.1 with a value it takes: hvdrun runs it, or refuses it with a reason.
HOROVODRUN_OPTIONS = {
    "-cb": [], "--check-build": [], "--disable-cache": [], "--start-timeout": ["30"], "--network-interfaces": ["lo"],
    "--network-interface": ["lo"], "--output-filename": ["out"], "--verbose": [], "--config-file": ["c.yaml"],
    "-p": ["22"], "--ssh-port": ["22"], "-i": ["key"], "--ssh-identity-file": ["key"], "--fusion-threshold-mb": ["64"],
    "--cycle-time-ms": ["5"], "--cache-capacity": ["1024"], "--hierarchical-allreduce": [],
    "--no-hierarchical-allreduce": [], "--hierarchical-allgather": [], "--no-hierarchical-allgather": [],
    "--autotune": [], "--no-autotune": [], "--autotune-log-file": ["a.csv"], "--autotune-warmup-samples": ["3"],
    "--autotune-steps-per-sample": ["10"], "--autotune-bayes-opt-max-samples": ["20"],
    "--autotune-gaussian-process-noise": ["0.8"], "--min-np": ["1"], "--min-num-proc": ["1"], "--max-np": ["4"],
    "--max-num-proc": ["4"], "--slots-per-host": ["2"], "--elastic-timeout": ["600"], "--reset-limit": ["3"],
    "--blacklist-cooldown-range": ["60", "300"], "--timeline-filename": ["t.json"], "--timeline-mark-cycles": [],
    "--no-timeline-mark-cycles": [], "--no-stall-check": [], "--stall-check": [],
    "--stall-check-warning-time-seconds": ["60"], "--stall-check-shutdown-time-seconds": ["0"],
    "--mpi-threads-disable": [], "--no-mpi-threads-disable": [], "--mpi-args": ["--map-by core"], "--tcp": [],
    "--binding-args": ["--bind-to none"], "--num-nccl-streams": ["1"], "--thread-affinity": ["0"],
    "--gloo-timeout-seconds": ["30"], "--log-level": ["WARNING"], "--log-with-timestamp": [],
    "--log-without-timestamp": [], "-prefix-timestamp": [], "--prefix-output-with-timestamp": [],
    "--log-hide-timestamp": [], "--no-log-hide-timestamp": [], "-H": ["localhost:2"], "--hosts": ["localhost:2"],
    "-hostfile": ["hosts"], "--hostfile": ["hosts"], "--host-discovery-script": ["discover.sh"], "--gloo": [],
    "--mpi": [], "--jsrun": [],
}


@pytest.mark.parametrize("option", HOROVODRUN_OPTIONS)
def test_every_horovodrun_option_runs_or_is_refused_with_a_reason(option: str, capsys) -> None:
    """Never "unrecognized arguments", nor a single-dash option read as another (-hostfile as -h, the help flag;
    -prefix-timestamp as -p)."""
    values = HOROVODRUN_OPTIONS[option]
    argv = [f"{option}={values[0]}"] if option in ("--mpi-args", "--binding-args") else [option, *values]
    try:
        args = parse("-np", "2", *argv)
    except SystemExit:
        assert "is a horovodrun option that hvdrun does not support: " in capsys.readouterr().err
    else:
        assert args.command == ["prog"]


def test_version() -> None:
    done = subprocess.run(hvdrun_argv("-v"), env=clean_env(), capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0 and re.fullmatch(r"hvdrun \(jupyter_hvd\) \d+\.\d+\.\d+\n", done.stdout), done


def test_network_interfaces_add_up_as_horovodruns_do() -> None:
    args = parse("-np", "2", "--network-interface", "eth0", "--network-interfaces", "eth1,ib0",
                 "--network-interface", "eth0")
    assert args.network_interface == "eth0,eth1,ib0"


def test_tcp_and_timestamps_reach_mpiexec_and_the_job_runs() -> None:
    args = parse("-np", "2", "--tcp", "-prefix-timestamp")
    assert hvdrun.mpiexec_options(args) == ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--output", "timestamp"]
    assert hvdrun.launch_spec(args, {}).env["NCCL_IB_DISABLE"] == "1"
    script = ("import numpy as np, jupyter_hvd as hvd\nhvd.init()\n"
              "print('sum', hvd.allreduce(np.ones(1 << 16), op=hvd.Sum)[0], flush=True)")
    result = run_hvdrun("-np", "2", "--tcp", "-prefix-timestamp", sys.executable, "-c", script)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if "sum" in line]
    assert len(lines) == 2 and all(re.match(r"\[.+\d\d:\d\d:\d\d.+\]<stdout>: sum 2\.0$", line) for line in lines), lines


@pytest.mark.parametrize("timestamp", [False, True])
def test_tag_output_starts_each_line_with_its_rank_as_horovodrun_does(timestamp: bool) -> None:
    flags = ["--tag-output", *(["-prefix-timestamp"] if timestamp else [])]
    assert hvdrun.mpiexec_options(parse("-np", "2", *flags)) == ["--output", "tag,timestamp" if timestamp else "tag"]
    script = "import sys, jupyter_hvd as hvd\nhvd.init()\nprint('out', hvd.rank())\nprint('err', file=sys.stderr)"
    result = run_hvdrun("-np", "2", *flags, sys.executable, "-c", script)
    assert result.returncode == 0, result.stderr
    stamp = r"\[[^]]*\d\d:\d\d:\d\d[^]]*\]" if timestamp else ""
    assert sorted(re.sub(stamp, "", line) for line in result.stdout.splitlines() if "out" in line) == \
        ["[1,0]<stdout>: out 0", "[1,1]<stdout>: out 1"], result.stdout
    assert sorted(re.sub(stamp, "", line) for line in result.stderr.splitlines() if "err" in line) == \
        ["[1,0]<stderr>: err", "[1,1]<stderr>: err"], result.stderr


def test_a_hostfile_given_as_horovodrun_spells_it(tmp_path: Path) -> None:
    """With --tcp too: a hostfile of this host alone listens on loopback, where TCP must go as well."""
    (tmp_path / "hosts").write_text("localhost slots=2\n")
    script = f"import numpy as np, jupyter_hvd as hvd\nhvd.init()\nhvd.allreduce(np.ones(4))\n{PRINT_RANK}"
    result = run_hvdrun("-np", "2", "-hostfile", str(tmp_path / "hosts"), "--tcp", sys.executable, "-c", script)
    assert result.returncode == 0, result.stderr
    assert rank_lines(result.stdout) == ["rank 0 2", "rank 1 2"]


def test_network_interface_is_where_mpi_and_nccl_connect_and_listen(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*IF_INCLUDE_VARS, LISTEN_VAR, "PRTE_MCA_prte_launch_agent"):
        monkeypatch.delenv(name, raising=False)
    spec = hvdrun.launch_spec(parse("-np", "2", "-H", "h1:1,h2:1", "--network-interface", "eth1,ib0"), {})
    assert spec.env["NCCL_SOCKET_IFNAME"] == "eth1,ib0"
    cmd, env = mpiexec_command(spec, ["prog"])
    assert env[LISTEN_VAR] == "eth1,ib0" and env["LD_PRELOAD"].split(":")[0].endswith("libjhvd_listen.so")
    joined = " ".join(cmd)
    assert "--mca btl_tcp_if_include eth1,ib0 --prtemca prte_if_include eth1,ib0" in joined
    assert f"{LISTEN_VAR}=eth1,ib0 prted" in joined  # the other hosts' daemons listen there too


def default_route_interface() -> str | None:
    """The interface of this host's default route (an up, addressed one), from /proc/net/route."""
    try:
        rows = [line.split() for line in Path("/proc/net/route").read_text().splitlines()[1:]]
    except OSError:
        return None
    return next((row[0] for row in rows if len(row) > 1 and row[1] == "00000000"), None)


def test_mpiexec_options_are_accepted_by_mpiexec() -> None:
    """The generated options run a real job (one host, so SSH is not used, but mpiexec must take them), with the
    caller's options in Horovod's docs' spelling (`-bind-to none -map-by slot`)."""
    nic = default_route_interface()
    if nic is None:
        pytest.skip("no default route, so no interface Open MPI is sure to accept")
    result = run_hvdrun("-np", "2", "-p", "2222", "-i", "/nonexistent/key", "--network-interface", nic,
                        "--mpi-args=-bind-to none -map-by slot", "--mpi", sys.executable, "-c",
                        "import os; e = os.environ; print('rank', e['OMPI_COMM_WORLD_RANK'], e['NCCL_SOCKET_IFNAME'])")
    assert result.returncode == 0, result.stderr
    assert rank_lines(result.stdout) == [f"rank 0 {nic}", f"rank 1 {nic}"]


def test_ranks_bound_each_to_its_own_core_still_run_their_lone_ops_themselves() -> None:
    """Ranks bound one core each see one core apiece, but the host has one for each of them: the caller of a
    lone op still runs the engine's steps itself (the engine's start-up line says how long it may)."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("binding 2 ranks to their own cores needs 2 cores")
    show = "import os, jupyter_hvd as hvd; hvd.init(); print('rank', hvd.rank(), len(os.sched_getaffinity(0)))"
    result = run_hvdrun("-np", "2", "--binding-args=--bind-to core", "--log-level", "info", sys.executable, "-c",
                        show)
    assert result.returncode == 0, result.stderr
    assert rank_lines(result.stdout) == ["rank 0 1", "rank 1 1"]
    waiters = re.findall(r"waiters (\d+) us: 2 ranks on (\d+) cores of this host", result.stderr)
    assert len(waiters) == 2 and all(int(us) > 0 and int(cores) >= 2 for us, cores in waiters), result.stderr


def test_output_filename_writes_each_rank_and_still_prints(tmp_path: Path) -> None:
    result = run_hvdrun("-np", "3", "--output-filename", str(tmp_path / "logs"), sys.executable, "-c", TEE)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.split("\n")[:-1]) == ["out 0", "out 1", "out 2"]
    assert sorted(line for line in result.stderr.splitlines() if line.startswith("err")) == ["err 0", "err 1", "err 2"]
    for r in range(3):
        assert (tmp_path / "logs" / f"rank.{r}" / "stdout").read_text() == f"out {r}\n"
        assert (tmp_path / "logs" / f"rank.{r}" / "stderr").read_text() == f"err {r}\n"


def test_output_filename_keeps_a_failing_rank_exit_code(tmp_path: Path) -> None:
    fail = "import os, sys; print('bye'); sys.exit(3 if os.environ['OMPI_COMM_WORLD_RANK'] == '1' else 0)"
    result = run_hvdrun("-np", "2", "--output-filename", str(tmp_path), sys.executable, "-c", fail)
    assert result.returncode == 3
    assert (tmp_path / "rank.1" / "stdout").read_text() == "bye\n"


@pytest.mark.parametrize(("program", "message"), [
    ("no-such-program-xyz", "cannot run 'no-such-program-xyz': not found on PATH"),
    ("./no_such_script.sh", "cannot run './no_such_script.sh': no such file"),
    ("train.py", "cannot run 'train.py': it is not executable; run it with its interpreter (hvdrun -np N python "
                 "train.py)"),
], ids=["not on PATH", "no file", "script without its interpreter"])
def test_a_program_that_cannot_run_here_is_refused_before_the_job_starts(program: str, message: str,
                                                                         tmp_path: Path) -> None:
    """Open MPI said only that it 'could not access an executable', in a box, after starting its daemons."""
    (tmp_path / "train.py").write_text("print('never')\n")
    result = subprocess.run(hvdrun_argv("-np", "2", program), cwd=tmp_path, env=clean_env(), input="",
                            capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 2 and result.stderr == f"hvdrun: error: {message} (see hvdrun --help)\n", result


def test_an_executable_in_the_working_folder_runs_by_its_bare_name_as_mpiexec_finds_it(tmp_path: Path) -> None:
    (tmp_path / "job.sh").write_text("#!/bin/sh\necho ran $OMPI_COMM_WORLD_RANK\n")
    (tmp_path / "job.sh").chmod(0o755)
    result = subprocess.run(hvdrun_argv("-np", "2", "job.sh"), cwd=tmp_path, env=clean_env(), input="",
                            capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0 and sorted(result.stdout.split()) == ["0", "1", "ran", "ran"], result


def test_an_output_folder_that_cannot_be_made_is_refused_before_the_job_starts(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    result = run_hvdrun("-np", "2", "--output-filename", str(tmp_path / "file" / "logs"), sys.executable, "-c", "0")
    assert result.returncode == 2, result
    assert result.stderr == f"hvdrun: error: --output-filename {tmp_path}/file/logs: cannot make it: Not a directory " \
                            f"(see hvdrun --help)\n"


def test_a_rank_on_another_host_reports_its_output_folder_or_program_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """There hvdrun cannot check first: each rank's wrapper says what failed, with no traceback."""
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    (tmp_path / "file").write_text("")
    assert rank_output.main([str(tmp_path / "file"), sys.executable, "-c", "0"]) == 1
    assert capsys.readouterr().err == (f"hvdrun: --output-filename: cannot make {tmp_path}/file/rank.1 on "
                                       f"{socket.gethostname()}: Not a directory\n")
    assert rank_output.main([str(tmp_path / "logs"), "no-such-program-xyz"]) == 127
    assert "hvdrun: cannot run 'no-such-program-xyz'" in capsys.readouterr().err


def test_a_killed_output_wrapper_takes_its_rank_along(tmp_path: Path) -> None:
    """mpiexec may end a rank with SIGKILL; under --output-filename that reaches the wrapper, not the rank."""
    pid_file = tmp_path / "pid"
    rank = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    wrapper = subprocess.Popen([sys.executable, "-m", "jupyter_hvd.runner.rank_output", str(tmp_path / "logs"),
                                sys.executable, "-c", rank], env=clean_env())
    try:
        deadline = time.monotonic() + 20
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and wrapper.poll() is None, "the rank did not start"
            time.sleep(0.05)
        child = int(pid_file.read_text())
        wrapper.send_signal(signal.SIGKILL)
        wrapper.wait(timeout=10)
        while time.monotonic() < deadline and running(child):
            time.sleep(0.05)
        assert not running(child)
    finally:
        wrapper.kill()


@pytest.mark.parametrize(("rank", "size", "name"), [("0", "1", "rank.0"), ("3", "12", "rank.03"),
                                                    ("11", "12", "rank.11"), ("7", "100", "rank.07"),
                                                    ("7", "101", "rank.007")])
def test_rank_folders_sort_in_rank_order(rank: str, size: str, name: str) -> None:
    env = {"OMPI_COMM_WORLD_RANK": rank, "OMPI_COMM_WORLD_SIZE": size}
    assert rank_folder("/logs", env) == Path("/logs", name)


def test_check_build_lists_what_is_available() -> None:
    result = run_hvdrun("--check-build")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "[X] MPI: mpiexec (Open MPI)" in out and "[ ] Gloo" in out
    has_mxnet = importlib.util.find_spec("mxnet") is not None
    assert ("[X] MXNet" if has_mxnet else "[ ] MXNet (jupyter_hvd.mxnet): mxnet is not installed") in out
    from jupyter_hvd import nccl_built
    assert ("[X] NCCL" if nccl_built() else "[ ] NCCL: ") in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hierarchical-allgather", "prog"], "--hierarchical-allgather is a horovodrun option that hvdrun "
                                               "does not support: allgather is not hierarchical here"),
        (["--gloo", "prog"], "always runs the job on Open MPI"),
        (["--log-level", "LOUD", "prog"], "invalid choice: 'LOUD'"),
        (["--cache-capacity", "8", "--disable-cache", "prog"], "not allowed with"),
        (["--no-stall-check", "--stall-check-warning-time-seconds", "5", "prog"], "not allowed with"),
        (["-p", "0", "prog"], "must be >= 1"),
        (["--cache-capacity", "-1", "prog"], "HOROVOD_CACHE_CAPACITY='-1': expected an integer >= 0"),
        (["--thread-affinity", "0,,1", "prog"], "HOROVOD_THREAD_AFFINITY='0,,1': expected a comma-separated"),
        (["--network-interface", "nosuch0", "prog"], "--network-interface: no interface or network of this host is "
                                                     "in 'nosuch0' (this host has lo 127.0.0.1"),
        (["--network-interface", "lo,10.0.0/33", "prog"], "--network-interface: '10.0.0/33' is not a network"),
    ],
)
def test_unsupported_or_conflicting_options_exit_2_with_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        hvdrun.main(["-np", "2", *args])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and err.startswith("hvdrun: error:")


def test_a_listen_variable_that_names_nothing_here_is_refused_before_mpiexec(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Open MPI's launcher would only say that it found no interface for its messages."""
    monkeypatch.setenv(LISTEN_VAR, "10.255.255.0/24")
    with pytest.raises(SystemExit) as exited:
        hvdrun.main(["-np", "2", "prog"])
    assert exited.value.code == 2
    assert f"{LISTEN_VAR}: no interface or network of this host is in '10.255.255.0/24'" in capsys.readouterr().err
