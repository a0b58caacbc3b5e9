"""Where hvdrun and %%hvd place the ranks: an equal share of one host's cores each, else unbound."""
from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest
from hvdrun_cli import rank_lines, run_hvdrun

from jupyter_hvd.runner import binding
from jupyter_hvd.magic.rank_device import cpu_threads
from jupyter_hvd.runner.binding import (BINDING_VAR, BOUND_VAR, UNBOUND, binding_options, binds_ranks, is_option,
                                      machine_cores)
from jupyter_hvd.runner.launch import LaunchSpec, mpiexec_command

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("arg", ["--bind-to", "-bind-to", "--bind-to=core"])
def test_every_spelling_of_an_option_is_seen(arg: str) -> None:
    assert is_option(arg, "bind-to")


@pytest.mark.parametrize("arg", ["core", "--bind-tox", "--map-by", "bind-to"])
def test_other_words_are_not_the_option(arg: str) -> None:
    assert not is_option(arg, "bind-to")


@pytest.mark.parametrize(
    ("np", "cores", "mpi_args", "several_hosts", "options"),
    [
        (2, 2, [], False, ["--map-by", "slot:PE=1", "--bind-to", "core"]),
        (3, 8, [], False, ["--map-by", "slot:PE=2", "--bind-to", "core"]),
        (1, 8, [], False, ["--map-by", "slot:PE=8", "--bind-to", "core"]),
        (3, 2, [], False, UNBOUND),  # more ranks than cores
        (2, 0, [], False, UNBOUND),  # the launcher is kept to some cores
        (2, 8, [], True, UNBOUND),  # hosts may differ
        (2, 8, ["--map-by", "ppr:2:node"], False, UNBOUND),  # the caller maps: ours would be a second --map-by
        (2, 8, ["--bind-to", "hwthread"], False, []),  # the caller binds: theirs is the only one
        (9, 2, ["--bind-to=core"], True, []),
    ],
)
def test_binding_options(monkeypatch: pytest.MonkeyPatch, np: int, cores: int, mpi_args: list[str],
                         several_hosts: bool, options: list[str]) -> None:
    monkeypatch.setattr(binding, "machine_cores", lambda: cores)
    assert binding_options(np, mpi_args, several_hosts, {}) == options


def test_the_launchers_variable_places_ranks_unless_the_caller_binds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding, "machine_cores", lambda: 8)
    env = {BINDING_VAR: "--bind-to none --map-by core"}
    assert binding_options(2, [], False, env) == ["--bind-to", "none", "--map-by", "core"]
    assert binding_options(2, [], True, env) == ["--bind-to", "none", "--map-by", "core"]
    assert binding_options(2, ["--bind-to", "core"], False, env) == []
    monkeypatch.setenv(BINDING_VAR, "--bind-to none")  # where the kernel of %%hvd runs
    assert mpiexec_command(LaunchSpec(np=2), ["true"])[0][3:6] == ["--bind-to", "none", "--oversubscribe"]


@pytest.mark.parametrize(("args", "bound"), [
    (["--map-by", "slot:PE=1", "--bind-to", "core"], True), (["--bind-to=hwthread"], True),
    (["--bind-to", "core:overload-allowed"], True), (UNBOUND, False), (["--bind-to=none"], False), ([], False)])
def test_whether_mpiexec_binds_each_rank_is_read_from_its_options(args: list[str], bound: bool) -> None:
    assert binds_ranks(["-np", "2", *args, "python"]) == bound


def test_the_launcher_tells_the_ranks_whether_they_are_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding, "machine_cores", lambda: 8)
    assert mpiexec_command(LaunchSpec(np=2), ["true"])[1][BOUND_VAR] == "1"
    monkeypatch.setenv(BOUND_VAR, "1")  # as in a rank that launches a job of its own
    assert BOUND_VAR not in mpiexec_command(LaunchSpec(np=9), ["true"])[1]  # more ranks than cores: unbound


@pytest.mark.parametrize(("usable", "local_size", "bound", "threads"), [
    (8, 2, False, 4), (8, 2, True, 8), (8, 16, False, 1), (1, 1, True, 1)])
def test_a_ranks_threads_are_its_cores_or_its_part_of_the_shared_ones(
        monkeypatch: pytest.MonkeyPatch, usable: int, local_size: int, bound: bool, threads: int) -> None:
    """Not the machine's count: 2 ranks in an 8-CPU part of a 128-CPU node (a Slurm job) took 64 threads each."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(usable)))
    monkeypatch.setattr(os, "cpu_count", lambda: 128)
    if bound:
        monkeypatch.setenv(BOUND_VAR, "1")
    else:
        monkeypatch.delenv(BOUND_VAR, raising=False)
    assert cpu_threads(local_size) == threads


def test_a_rank_of_a_launcher_kept_to_one_cpu_takes_one_thread() -> None:
    """As a job of a Slurm allocation with part of a node: the rank took the machine's count (2 here)."""
    cpus = sorted(os.sched_getaffinity(0))
    show = ("import os; from jupyter_hvd.magic.rank_device import pin_device; pin_device(0, 1, True); "
            "print('rank', os.environ['OMP_NUM_THREADS'])")
    hvdrun = [sys.executable, "-m", "jupyter_hvd.runner.hvdrun", "-np", "1", sys.executable, "-c", show]
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    kept = subprocess.run(["taskset", "-c", str(cpus[0]), *hvdrun], capture_output=True, text=True, timeout=100,
                          env=env)
    assert kept.returncode == 0, kept.stderr
    assert rank_lines(kept.stdout) == ["rank 1"]


def test_machine_cores_counts_cores_only_where_the_launcher_may_use_them_all() -> None:
    count = "from jupyter_hvd.runner.binding import machine_cores; print(machine_cores())"
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) == os.cpu_count():
        assert 1 <= machine_cores() <= len(cpus)
    if len(cpus) < 2:
        pytest.skip("keeping a launcher to some cores needs 2")
    kept = subprocess.run(["taskset", "-c", str(cpus[0]), sys.executable, "-c", count], capture_output=True,
                          text=True, check=True)
    assert kept.stdout.strip() == "0"


def test_two_ranks_get_their_own_share_of_the_cores() -> None:
    show = "import os; print('rank', os.environ['OMPI_COMM_WORLD_RANK'], sorted(os.sched_getaffinity(0)))"
    result = run_hvdrun("-np", "2", sys.executable, "-c", show)
    assert result.returncode == 0, result.stderr
    shares = [ast.literal_eval(line.split(" ", 2)[2]) for line in rank_lines(result.stdout)]
    cores = machine_cores()
    if cores < 2:  # unbound: each rank may run anywhere the launcher may
        assert shares == [sorted(os.sched_getaffinity(0))] * 2
    else:
        assert not set(shares[0]) & set(shares[1]) and len(shares[0]) == len(shares[1]) >= 1
