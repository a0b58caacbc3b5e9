"""Where hvdrun and %%hvd place the ranks: an equal share of one host's cores each, else unbound."""
from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest
from hvdrun_cli import rank_lines, run_hvdrun

from jupyter_hvd.runner import binding
from jupyter_hvd.runner.binding import BINDING_VAR, UNBOUND, binding_options, is_option, machine_cores
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
