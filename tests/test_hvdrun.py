"""Tests of the hvdrun launcher: real mpiexec, real ranks running plain Python."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hvdrun_cli import PRINT_ENV, PRINT_RANK, clean_env, hvdrun_argv, rank_lines, run_hvdrun, running

from jupyter_hvd.runner import child as child_process
from jupyter_hvd.runner import binding, hvdrun, session_folder
from jupyter_hvd.runner.binding import binding_options
from jupyter_hvd.runner.first_failure import misnamed_failure
from jupyter_hvd.runner.slurm import Allocation
from jupyter_hvd.runner.launch import (
    BTL_VAR,
    KEEP_FREED_MEMORY,
    LOCAL_SESSION_DIR_VAR,
    SESSION_DIR_VAR,
    SSH_ARGS_VAR,
    START_TIMEOUT_VAR,
    LaunchSpec,
    default_forward,
    find_mpiexec,
    mpiexec_command,
    parse_hosts,
)

pytestmark = pytest.mark.timeout(120)

FAIL_ON_RANK_1 = "import os, sys; sys.exit(3 if os.environ['OMPI_COMM_WORLD_RANK'] == '1' else 0)"
# Rank 1 raises and sleeps at exit after the abort that init's exit function sends; rank 0 prints the abort and
# exits at once (a plain exit would wait in MPI_Finalize for rank 1, and either could then be the first to end).
RAISE_ON_RANK_1_EXIT_LATE = (
    "import atexit, os, time, traceback, numpy as np, jupyter_hvd as hvd\n"
    "if os.environ['OMPI_COMM_WORLD_RANK'] == '1':\n"
    "    atexit.register(time.sleep, 30)\n"
    "hvd.init()\n"
    "if hvd.rank() == 1:\n"
    "    raise ValueError('bad batch')\n"
    "try:\n"
    "    hvd.allreduce(np.ones(4), name='loss')\n"
    "except hvd.EngineAbortedError:\n"
    "    traceback.print_exc()\n"
    "    os._exit(1)\n"
)
IGNORE_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)
# Page faults per step of a loop that allocates and writes 104 MB of 8 MB arrays and frees them, as an
# out-of-place allreduce of a gradient set does with each step's results.
FAULTS_PER_STEP = (
    "import numpy as np, resource\n"
    "def step():\n"
    "    results = [np.ones(2 << 20, np.float32) for _ in range(13)]\n"
    "faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
    "step()\n"
    "before = faults()\n"
    "for _ in range(5):\n"
    "    step()\n"
    "print((faults() - before) // 5, flush=True)\n"
)
SLEEP_WITH_PID = (
    "import os, time\n"
    "with open(os.environ['PID_FILE'], 'a') as f:\n"
    "    f.write(f'{os.getpid()}\\n')\n"
    "time.sleep(60)\n"
)


# --- launch module ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hosts", "expected"),
    [
        ("localhost", [("localhost", 1)]),
        ("h1:4,h2:4", [("h1", 4), ("h2", 4)]),
        (" node-1.example.com:2 , 10.0.0.3 ", [("node-1.example.com", 2), ("10.0.0.3", 1)]),
    ],
)
def test_parse_hosts(hosts: str, expected: list[tuple[str, int]]) -> None:
    assert parse_hosts(hosts) == expected


@pytest.mark.parametrize("hosts", ["", "h1,", "h1:", "h1:0", "h1:x", "h1:2:3", "h 1:2", ":4"])
def test_parse_hosts_rejects_bad_syntax(hosts: str) -> None:
    with pytest.raises(ValueError, match="bad host entry"):
        parse_hosts(hosts)


def test_find_mpiexec_prefers_the_one_next_to_python() -> None:
    assert find_mpiexec() == os.path.join(sys.prefix, "bin", "mpiexec")


def test_find_mpiexec_names_what_it_searched(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match=f"{tmp_path}.*PATH"):
        find_mpiexec()


def test_mpiexec_command_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding, "machine_cores", lambda: 2)  # 3 ranks outnumber them: unbound
    monkeypatch.setenv("SET_IN_ENV", "1")
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    spec = LaunchSpec(np=3, env={"A": "1"}, forward=["SET_IN_ENV", "NOT_SET_ANYWHERE", "A"])
    cmd, env = mpiexec_command(spec, ["python", "train.py", "-x"])
    assert cmd == [
        find_mpiexec(), "-np", "3", "--bind-to", "none", "--oversubscribe",
        "-x", "A", "-x", "SET_IN_ENV", "python", "train.py", "-x",
    ]
    assert env["A"] == "1" and env["SET_IN_ENV"] == "1"
    root = os.geteuid() == 0
    assert (env.get("OMPI_ALLOW_RUN_AS_ROOT") == "1") == root
    assert (env.get("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM") == "1") == root


@pytest.mark.parametrize("binding", [["--bind-to", "core"], ["-bind-to", "core"], ["--bind-to=core"]])
def test_a_callers_binding_replaces_the_default_one(binding: list[str]) -> None:
    """mpiexec refuses a second --bind-to, so the caller's own (--binding-args, --mpi-args) is the only one."""
    cmd, _ = mpiexec_command(LaunchSpec(np=2, mpi_args=[*binding, "--report-bindings"]), ["true"])
    assert "none" not in cmd
    assert cmd[-len(binding) - 2:] == ["--" + binding[0].lstrip("-"), *binding[1:], "--report-bindings", "true"]
    assert mpiexec_command(LaunchSpec(np=2, mpi_args=["--map-by", "core"]), ["true"])[0][3:5] == ["--bind-to", "none"]


def test_the_callers_options_take_the_two_dashes_open_mpi_5_needs() -> None:
    """Horovod's docs spell mpiexec's options as Open MPI 4 took them (`-bind-to none -map-by slot`); Open MPI 5
    reads `-bind-to` as the program to run. Options without a hyphen inside, and values, stay as they are."""
    given = ["-bind-to", "none", "-map-by", "slot", "-report-bindings", "-mca", "btl", "^openib", "-x", "A=-b-c",
             "--rank-by=slot", "-display-map=x"]
    cmd, _ = mpiexec_command(LaunchSpec(np=2, mpi_args=given), ["true"])
    assert cmd[-len(given) - 1:] == ["--bind-to", "none", "--map-by", "slot", "--report-bindings", "-mca", "btl",
                                     "^openib", "-x", "A=-b-c", "--rank-by=slot", "--display-map=x", "true"]


def test_mpiexec_command_session_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SESSION_DIR_VAR, raising=False)
    assert SESSION_DIR_VAR not in mpiexec_command(LaunchSpec(np=1), ["true"])[1]
    cmd, env = mpiexec_command(LaunchSpec(np=1, session_dir="/tmp/jhvd.x"), ["true"])
    assert env[SESSION_DIR_VAR] == "/tmp/jhvd.x" and SESSION_DIR_VAR not in cmd  # mpiexec's, not the ranks'
    several = mpiexec_command(LaunchSpec(np=2, hosts="h1,h2", listen="any", session_dir="/tmp/jhvd.x"), ["true"])[1]
    assert several[LOCAL_SESSION_DIR_VAR] == "/tmp/jhvd.x" and SESSION_DIR_VAR not in several  # this host's alone
    monkeypatch.setenv(SESSION_DIR_VAR, "/scratch/mine")  # the user's choice is kept
    assert mpiexec_command(LaunchSpec(np=1, session_dir="/tmp/jhvd.x"), ["true"])[1][SESSION_DIR_VAR] == "/scratch/mine"


def test_ssh_gives_up_on_an_unreachable_host_after_the_start_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host that drops ssh's packets failed the job only when the kernel gave up connecting (134 s here)."""
    monkeypatch.delenv(START_TIMEOUT_VAR, raising=False)
    monkeypatch.delenv(SSH_ARGS_VAR, raising=False)
    several = LaunchSpec(np=2, hosts="h1,h2", listen="any")
    assert mpiexec_command(several, ["true"])[1][SSH_ARGS_VAR] == "-o ConnectTimeout=30"
    assert SSH_ARGS_VAR not in mpiexec_command(LaunchSpec(np=2), ["true"])[1]  # no ssh on one host
    monkeypatch.setenv(START_TIMEOUT_VAR, "7.5")
    assert mpiexec_command(several, ["true"])[1][SSH_ARGS_VAR] == "-o ConnectTimeout=8"
    args = hvdrun.build_parser().parse_args(["-np", "2", "-H", "h1,h2", "-p", "2222", "-i", "/keys/id rsa",
                                             "--start-timeout", "3", "true"])
    spec = dataclasses.replace(hvdrun.launch_spec(args, os.environ), listen="any")
    assert mpiexec_command(spec, ["true"])[1][SSH_ARGS_VAR] == "-p 2222 -i '/keys/id rsa' -o ConnectTimeout=3"
    monkeypatch.setenv(SSH_ARGS_VAR, "-o ConnectTimeout=60")  # the user's own comes first, and ssh takes the first
    assert mpiexec_command(spec, ["true"])[1][SSH_ARGS_VAR] == ("-o ConnectTimeout=60 -p 2222 -i '/keys/id rsa' "
                                                                "-o ConnectTimeout=3")
    monkeypatch.setenv(START_TIMEOUT_VAR, "soon")
    with pytest.raises(ValueError, match=r"\$HOROVOD_START_TIMEOUT must be a positive number of seconds, got 'soon'"):
        mpiexec_command(several, ["true"])


@pytest.mark.parametrize(
    ("spec", "placement"),
    [
        (LaunchSpec(np=5, hosts="h1:4, h2", listen="any"), ["--host", "h1:4,h2:1"]),
        (LaunchSpec(np=4, hostfile="hosts.txt", listen="any"), ["--hostfile", "hosts.txt"]),
    ],
)
def test_mpiexec_command_placement(spec: LaunchSpec, placement: list[str], tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts.txt").write_text("h1 slots=4\n")
    cmd, _ = mpiexec_command(spec, ["prog"])
    start = cmd.index(placement[0])
    assert cmd[start:start + 2] == placement


@pytest.mark.parametrize(
    ("spec", "argv", "message"),
    [
        (LaunchSpec(np=0), ["prog"], ">= 1"),
        (LaunchSpec(np=2, hosts="a", hostfile="f"), ["prog"], "not both"),
        (LaunchSpec(np=2, hosts="a:0"), ["prog"], "bad host entry"),
        (LaunchSpec(np=2), [], "no command"),
        (LaunchSpec(np=1, hosts="no-such-host.invalid"), ["prog"], "cannot tell which network leads to no-such-host"),
        (LaunchSpec(np=3, hosts="h1,h2", listen="any"), ["prog"],
         r"3 ranks, but the hosts have 2 slots \(h1:1,h2:1\): a host takes one rank per slot; start 2 or fewer "
         r"ranks, or give the hosts more slots"),
        (LaunchSpec(np=5, hostfile="hosts.txt", listen="any"), ["prog"], r"5 ranks, but the hosts have 4 slots \(h1:4\)"),
        (LaunchSpec(np=5, allocation=Allocation("7", (("h1", 2), ("h2", 2))), listen="any"), ["prog"],
         r"5 ranks, but the hosts have 4 slots \(h1:2,h2:2\)"),
    ],
)
def test_mpiexec_command_rejects_bad_specs(spec: LaunchSpec, argv: list[str], message: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A placement with fewer slots than ranks among them: Horovod refuses it, as mpiexec does without
    --oversubscribe (which hvdrun passes for a job on this host alone with more ranks than cores)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts.txt").write_text("h1 slots=4\n")
    with pytest.raises(ValueError, match=message):
        mpiexec_command(spec, argv)


def test_default_forward_picks_python_and_horovod_settings() -> None:
    environ = {"PYTHONPATH": "p", "HOROVOD_CYCLE_TIME": "1", "JUPYTER_HVD_X": "y", "HOME": "/root"}
    assert default_forward(environ) == ["PYTHONPATH", "HOROVOD_CYCLE_TIME", "JUPYTER_HVD_X"]


# --- hvdrun end to end -------------------------------------------------------------------


def test_all_ranks_run_with_rank_and_size() -> None:
    """Two ranks; more than the cores: test_oversubscribes_more_ranks_than_cores."""
    result = run_hvdrun("-np", "2", sys.executable, "-c", PRINT_RANK)
    assert result.returncode == 0, result.stderr
    assert rank_lines(result.stdout) == ["rank 0 2", "rank 1 2"]


def test_failing_rank_exit_code_is_returned() -> None:
    result = run_hvdrun("-np", "2", sys.executable, "-c", FAIL_ON_RANK_1)
    assert result.returncode == 3, result.stderr


def test_the_rank_that_failed_is_named_where_open_mpi_names_a_peer_it_aborted() -> None:
    """Rank 1 raises and takes 30 s to exit after its abort; rank 0, aborted in its allreduce, exits first, and
    Open MPI's report names it: hvdrun says which rank failed and why (and the job ends at rank 0's exit)."""
    result = run_hvdrun("-np", "2", sys.executable, "-c", RAISE_ON_RANK_1_EXIT_LATE)
    assert result.returncode == 1, result.stderr
    assert "[prterun" in result.stderr and "@1,0]" in result.stderr, result.stderr
    assert result.stderr.rstrip().splitlines()[-1] == (
        "hvdrun: the job failed at rank 1 (rank 1 raised ValueError: bad batch); Open MPI's report above names "
        "rank 0, which stopped because of it"), result.stderr


@pytest.mark.parametrize(("output", "expected"), [
    ("EngineAbortedError: engine aborted by rank 2: stalled\n   Process name: [prterun-h-1@1,0]\n", "rank 2"),
    ("MXNetError: engine aborted by rank 1: why\nprterun noticed that process rank 0 with PID 9 on node h exited "
     "on signal 9 (Killed).", "rank 1"),
    ("engine aborted by rank 0: old\nengine aborted by rank 1: new\nProcess name: [prterun-h-1@1,0]", "rank 1 (new)"),
    ("engine aborted by rank 1: why\n   Process name: [prterun-h-1@1,1]\n", ""),
    ("ValueError: bad\n   Process name: [prterun-h-1@1,1]\n", ""),
    ("engine aborted by rank 1: why\n", ""),
])
def test_misnamed_failure_reads_the_abort_and_the_launchers_report(output: str, expected: str) -> None:
    found = misnamed_failure(output)
    assert (expected in found) if expected else found == "", found


@pytest.mark.skipif(os.geteuid() != 0, reason="needs to run as root")
def test_runs_as_root_without_user_settings() -> None:
    env = clean_env()
    assert not any(name.startswith("OMPI_ALLOW_RUN_AS_ROOT") for name in env)
    result = run_hvdrun("-np", "2", sys.executable, "-c", PRINT_RANK, env=env)
    assert result.returncode == 0, result.stderr
    assert len(rank_lines(result.stdout)) == 2


def test_oversubscribes_more_ranks_than_cores() -> None:
    np = 2 * (os.cpu_count() or 1)
    result = run_hvdrun("-np", str(np), "--", sys.executable, "-c", PRINT_RANK)
    assert result.returncode == 0, result.stderr
    assert rank_lines(result.stdout) == sorted(f"rank {r} {np}" for r in range(np))


def test_x_forwards_and_sets_variables_and_a_single_host_job_leaves_out_libfabric() -> None:
    env = {k: v for k, v in clean_env(FORWARD_ME="from-env", HOROVOD_LOG_LEVEL="debug").items() if k != BTL_VAR}
    result = run_hvdrun("-np", "2", "-x", "FORWARD_ME", "-x", "SET_ME=a=b", sys.executable, "-c",
                        PRINT_ENV, "FORWARD_ME", "SET_ME", "HOROVOD_LOG_LEVEL", "PYTHONUNBUFFERED", BTL_VAR,
                        env=env)
    assert result.returncode == 0, result.stderr
    expected = f"FORWARD_ME=from-env SET_ME=a=b HOROVOD_LOG_LEVEL=debug PYTHONUNBUFFERED=1 {BTL_VAR}=^ofi"
    assert result.stdout.splitlines() == [expected, expected]


def test_single_host_jobs_leave_out_libfabric_unless_the_user_chose_transports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The job's environment, as mpiexec passes it on to the ranks (seen there: the test above)."""
    monkeypatch.delenv(BTL_VAR, raising=False)
    assert mpiexec_command(LaunchSpec(np=2), ["true"])[1][BTL_VAR] == "^ofi"
    monkeypatch.setenv(BTL_VAR, "self,sm,tcp")
    assert mpiexec_command(LaunchSpec(np=2), ["true"])[1][BTL_VAR] == "self,sm,tcp"


def test_multi_host_jobs_keep_open_mpis_transports(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(BTL_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts.txt").write_text("h1\nh2\n")
    for spec in (LaunchSpec(np=2, hosts="h1,h2", listen="eth0"), LaunchSpec(np=2, hostfile="hosts.txt", listen="eth0")):
        assert BTL_VAR not in mpiexec_command(spec, ["true"])[1]


def test_ranks_keep_freed_memory_for_the_next_step() -> None:
    """A rank that frees a step's results and allocates the next's reuses the memory: glibc's defaults give it
    back to the system and fault in thousands of pages again every step (6,000-7,000 here)."""
    env = {k: v for k, v in clean_env().items() if k not in KEEP_FREED_MEMORY}
    plain = subprocess.run([sys.executable, "-c", FAULTS_PER_STEP], env=env, capture_output=True, text=True, timeout=60)
    if int(plain.stdout) < 1000:  # e.g. transparent huge pages for every mapping: 52 faults for 104 MB
        pytest.skip(f"a plain process faults only {plain.stdout.strip()} pages per step on this machine")
    result = run_hvdrun("-np", "2", sys.executable, "-c", FAULTS_PER_STEP, env=env)
    assert result.returncode == 0, result.stderr
    faults = [int(line) for line in result.stdout.split()]
    assert len(faults) == 2 and max(faults) < 100, faults


def test_the_users_malloc_settings_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEEP_FREED_MEMORY:
        monkeypatch.delenv(name, raising=False)
    cmd, env = mpiexec_command(LaunchSpec(np=2, hosts="h1,h2", listen="eth0"), ["true"])
    assert all(env[name] == value and ["-x", name] == cmd[cmd.index(name) - 1:cmd.index(name) + 1]
               for name, value in KEEP_FREED_MEMORY.items())
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1000")
    assert mpiexec_command(LaunchSpec(np=2), ["true"])[1]["MALLOC_TRIM_THRESHOLD_"] == "1000"


def test_hosts_option_with_localhost_slots() -> None:
    result = run_hvdrun("-np", "4", "-H", "localhost:4", sys.executable, "-c", PRINT_RANK)
    assert result.returncode == 0, result.stderr
    assert rank_lines(result.stdout) == [f"rank {r} 4" for r in range(4)]


def test_verbose_prints_mpiexec_command() -> None:
    result = run_hvdrun("-np", "1", "--verbose", sys.executable, "-c", "pass")
    assert result.returncode == 0, result.stderr
    assert f"{find_mpiexec()} -np 1 {' '.join(binding_options(1, [], False, {}))} --oversubscribe" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["prog"], "required: -np"),
        (["-np", "0", "prog"], "must be >= 1"),
        (["-np", "2", "-H", "localhost", "--hostfile", "h", "prog"], "give --hosts or --hostfile, not both"),
        (["-np", "2"], "no command given"),
        (["-np", "2", "--"], "no command given"),
        (["-np", "2", "-H", "localhost:0", "prog"], "bad host entry"),
        (["-np", "4", "-H", "localhost:2", "prog"], "4 ranks, but the hosts have 2 slots (localhost:2)"),
        (["-np", "2", "-x", "=1", "prog"], "-x needs a variable name, got '=1'"),
        (["-np", "2", "--no-such-flag", "prog"], "unrecognized arguments"),
    ],
)
def test_bad_flags_exit_2_with_one_line_error(args: list[str], message: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        hvdrun.main(args)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and err.startswith("hvdrun: error:")


def test_a_bad_flag_on_the_command_line_exits_2_with_one_line() -> None:
    result = run_hvdrun("-np", "2", "--no-such-flag", sys.executable)
    assert result.returncode == 2
    assert "unrecognized arguments" in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("hvdrun: error:")
    assert "Traceback" not in result.stderr


def test_missing_mpiexec_exits_127(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert hvdrun.main(["-np", "1", "prog"]) == 127
    err = capsys.readouterr().err
    assert err.startswith("hvdrun: error: mpiexec not found") and err.count("\n") == 1


def wait_for_pids(pid_file: Path, count: int, proc: subprocess.Popen, deadline_s: float = 30) -> list[int]:
    """Poll pid_file until count ranks have written their pid; fail with hvdrun's stderr if it ends first."""
    deadline = time.monotonic() + deadline_s
    pids: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None:
        pids = [int(line) for line in pid_file.read_text().split()] if pid_file.exists() else []
        if len(pids) == count:
            return pids
        time.sleep(0.05)
    proc.kill()
    _, stderr = proc.communicate()
    raise AssertionError(f"{len(pids)} of {count} ranks started (hvdrun exit {proc.returncode}); stderr:\n{stderr}")


def next_pids(count: int) -> list[int]:
    """The pids the next processes started here will most likely get (Linux hands them out in order)."""
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    last = int(subprocess.check_output(["sh", "-c", "echo $$"]))
    return [q if q < pid_max else 300 + q - pid_max for q in range(last + 1, last + 1 + count)]


def test_session_files_of_a_killed_mpiexec_do_not_stop_the_next_one() -> None:
    """A killed mpiexec leaves $TMPDIR/ompi.<pid>/pmix.vm.tool behind. Under Open MPI's default, the next
    mpiexec that gets that pid fails ("The PMIx server's listener thread failed to start"); hvdrun's own
    session folder keeps it clear of them."""
    planted = []
    try:
        for pid in next_pids(40):
            folder = Path(tempfile.gettempdir(), f"ompi.{pid}")
            if not folder.exists():
                folder.mkdir()
                planted.append(folder)
                (folder / "pmix.vm.tool").write_text("left by a killed mpiexec")
        proc = subprocess.run(hvdrun_argv("-np", "2", sys.executable, "-c", "print('ran')"), env=clean_env(),
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.count("ran") == 2
    finally:
        for folder in planted:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("teed", [False, True], ids=["plain", "output-filename"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_signal_stops_every_rank(tmp_path: Path, signum: int, teed: bool) -> None:
    pid_file = tmp_path / "pids"
    tee = ["--output-filename", str(tmp_path / "out")] if teed else []
    proc = subprocess.Popen(
        hvdrun_argv("-np", "4", *tee, "-x", f"PID_FILE={pid_file}", sys.executable, "-c", SLEEP_WITH_PID),
        env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )
    try:
        pids = wait_for_pids(pid_file, 4, proc)
        sent = time.monotonic()
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=15)
        assert proc.returncode != 0
        while any(map(running, pids)) and time.monotonic() - sent < 15:
            time.sleep(0.05)
        assert not any(map(running, pids)), stderr
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_hvdrun_ends_its_ranks_and_the_next_one_clears_its_folder(tmp_path: Path) -> None:
    """SIGKILL skips hvdrun's clean-up: mpiexec still stops (it gets SIGTERM when hvdrun dies), and the
    session folder left in $TMPDIR goes at the next launch."""
    pid_file = tmp_path / "pids"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = clean_env(TMPDIR=str(tmp))
    proc = subprocess.Popen(hvdrun_argv("-np", "2", "-x", f"PID_FILE={pid_file}", sys.executable, "-c",
                                        SLEEP_WITH_PID),
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        pids = wait_for_pids(pid_file, 2, proc)
        left = [p.name for p in tmp.iterdir()]
        assert left and all(name.startswith(f"jhvd.{proc.pid}.") for name in left), left
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 20
        while any(map(running, pids)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(map(running, pids))
        assert [p.name for p in tmp.iterdir()] == left
    finally:
        proc.kill()
        proc.communicate()  # waits, and closes its stderr pipe
    done = run_hvdrun("-np", "1", sys.executable, "-c", "print('ran')", env=env)
    assert done.returncode == 0 and "ran" in done.stdout, done.stderr
    assert list(tmp.iterdir()) == []


def test_sweep_removes_only_folders_of_ended_launches(tmp_path: Path) -> None:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = tmp_path / f"jhvd.{ended.stdout.strip()}.x1"
    kept = [tmp_path / f"jhvd.{os.getpid()}.x2", tmp_path / "jhvd.abc", tmp_path / "ompi.123"]
    for folder in [gone, *kept]:
        folder.mkdir()
        (folder / "f").write_text("session file")
    assert session_folder.sweep_stale(str(tmp_path)) == [str(gone)]
    assert sorted(tmp_path.iterdir()) == sorted(kept)


def test_child_ignoring_forwarded_signal_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(child_process, "KILL_AFTER_S", 0.5)
    child = subprocess.Popen(
        [sys.executable, "-c", IGNORE_SIGTERM],
        stdout=subprocess.PIPE, text=True,
    )
    with child:
        assert child.stdout.readline() == "ready\n"
        with child_process.SignalForwarder(child) as forwarder:
            os.kill(os.getpid(), signal.SIGTERM)
            assert forwarder.wait() == -signal.SIGKILL


def test_run_maps_death_by_signal_to_128_plus_signum() -> None:
    cmd = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    assert hvdrun.run(cmd, dict(os.environ)) == 128 + signal.SIGKILL
