"""The Slurm allocation a job starts in, read from the environment Slurm gives a process (no Slurm needed for
these: the host lists have no ranges, which are read without scontrol)."""
import pytest

from jupyter_hvd.runner.slurm import Allocation, allocation, counts, in_step

JOB = {"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "a,b", "SLURM_TASKS_PER_NODE": "2(x2)",
       "SLURM_JOB_CPUS_PER_NODE": "4(x2)"}


@pytest.mark.parametrize("text, expected", [("2(x3),1", [2, 2, 2, 1]), ("4", [4]), ("1,2", [1, 2])])
def test_counts_expand_slurms_repeats(text, expected):
    assert counts(text) == expected


def test_an_allocations_shell_or_batch_script_gets_its_hosts_and_tasks():
    assert allocation(JOB) == Allocation("12", (("a", 2), ("b", 2)))
    assert not in_step(JOB)
    assert allocation({}) is None


def test_within_a_step_the_slots_are_the_jobs_cpus_not_the_steps_tasks():
    step = {**JOB, "SLURM_STEP_ID": "0", "SLURM_TASKS_PER_NODE": "1", "SLURMD_NODENAME": "a"}
    assert in_step(step) and allocation(step) == Allocation("12", (("a", 4), ("b", 4)))


def test_a_one_node_allocation_seen_from_its_node_is_this_host_alone(monkeypatch):
    monkeypatch.setenv("PATH", "")  # no scontrol, as in a container Slurm started: a plain name needs none
    one = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "gpu07", "SLURM_TASKS_PER_NODE": "8"}
    assert allocation({**one, "SLURMD_NODENAME": "gpu07"}) is None  # a batch script or step on the node
    assert allocation(one) == Allocation("7", (("gpu07", 8),))  # salloc's shell, off the node


def test_ranges_without_scontrol_are_a_clear_error(monkeypatch):
    monkeypatch.setenv("PATH", "")
    with pytest.raises(ValueError, match="scontrol is not on PATH"):
        allocation({**JOB, "SLURM_JOB_NODELIST": "h[1-2]"})
