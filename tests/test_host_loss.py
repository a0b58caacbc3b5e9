"""What hvdrun and %%hvd say when Open MPI's launcher loses a host, or never starts on one, and what mpiexec said
when it ended a job: read from what the launcher and ssh printed (tests/hosts runs the real cases)."""
from jupyter_hvd.magic.host_report import LAST_WORDS, last_words
from jupyter_hvd.runner.host_loss import describe, lost_hosts, ranks_by_host, start_failure

BLOCK = """------------------------------------------------------------
A daemon failed to report back after being spawned. This could
be due to several factors, including inability to find the
daemon executable, or the executable was unable to find its
required supporting libraries.

  Local host:    head
  Remote host:   h2
  Daemon exit status: 255
------------------------------------------------------------"""


def test_a_host_that_ssh_could_not_log_in_to_is_named_with_what_ssh_said():
    output = "[head:00260] plm:ssh: Warning: setpgid failed\nroot@h2: Permission denied (publickey).\n" + BLOCK
    assert lost_hosts(output) == ["h2"]
    assert start_failure(output).startswith("ssh could not log in (root@h2: Permission denied (publickey).): "
                                            "`ssh HOST true` must work with no password and no question")
    unknown = ("No ED25519 host key is known for h2 and you have requested strict checking.\n"
               "Host key verification failed.\n" + BLOCK)
    assert "(No ED25519 host key is known for h2 and you have requested strict checking. Host key verification " \
           "failed.)" in start_failure(unknown)


def test_a_host_that_ssh_could_not_reach_is_named_as_unreachable_not_as_refusing_the_login():
    output = "ssh: connect to host h2 port 22: Connection timed out\n" + BLOCK
    said = start_failure(output)
    assert said.startswith("ssh could not reach the host (ssh: connect to host h2 port 22: Connection timed out): the "
                           "host is down or not on this network, or a firewall drops ssh"), said
    assert "--start-timeout" in said and "no password" not in said


def test_a_daemon_killed_in_the_middle_of_a_job_is_a_lost_host_though_prrte_says_it_never_reported_back():
    """Under load PRRTE gives a host whose processes were killed mid-job the words of a daemon never started."""
    output = "looping 0\nConnection to h2 closed by remote host.\n" + BLOCK
    assert lost_hosts(output) == ["h2"] and start_failure(output) == ""


def test_a_host_lost_while_the_job_ran_is_not_a_start_failure():
    output = "A process or daemon was unable to complete a TCP connection\n  Remote daemon: [prterun-head-1@0,2] " \
             "on node h2\n"
    assert lost_hosts(output) == ["h2"] and start_failure(output) == ""
    assert describe(["h2"], {"h1": [0], "h2": [1]}, "gone").startswith("lost host h2 (rank 1): gone; the ranks on h1")


def test_ranks_fill_each_hosts_slots_in_order_as_mpiexec_places_them():
    assert ranks_by_host([("h1", 2), ("h2", 2)], 3) == {"h1": [0, 1], "h2": [2]}
    assert ranks_by_host([("h1", 1), ("h2", 2), ("h3", 2)], 5) == {"h1": [0], "h2": [1, 2], "h3": [3, 4]}
    assert ranks_by_host([], 4) == {}  # this host alone


def test_mpiexecs_last_words_leave_out_ipyparallels_log_lines():
    output = ("2026-12-07 10:52:19.530 [IPEngine.3.3] WARNING | debugpy_stream undefined, debugging will not be "
              "enabled\n" + "\n".join(f"line {i}" for i in range(20)) + "\n\n" +
              "2026-12-07 10:52:20.605 [IPController] WARNING | unhandled iopub msg_type: 'data_message'\n"
              "prterun noticed that process rank 2 with PID 879 on node h2 exited on\nsignal 11.\n\0")
    said = last_words(output).splitlines()
    assert len(said) == LAST_WORDS and said[0] == "line 10" and said[-1] == "signal 11.", said
    assert last_words("2026-12-07 10:52:19.530 [IPEngine.0.0] WARNING | x\n\n") == ""
