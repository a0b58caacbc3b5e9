"""jupyter_hvd.run (Horovod's horovod.run) across the namespace hosts: the ranks on other hosts fetch the function
from the caller's server and send back what they returned or raised; ssh options reach the hosts; a host that ssh
cannot log in to is named with what ssh said; a host lost in the middle of the call is named with its ranks."""
import re
import subprocess
import sys
import textwrap
import time

import pytest
from host_loss_runs import RELEASE_LIMIT_S, ranks_on, released_after
from hosts_jobs import JobOutput

from cluster_info import REPO

pytestmark = pytest.mark.timeout(300)

CALLER = textwrap.dedent('''
    import socket, sys, jupyter_hvd

    def where(fail_on=None):
        import numpy as np, jupyter_hvd as hvd
        hvd.init()
        if socket.gethostname() == fail_on:
            raise RuntimeError(f"nothing to do on {fail_on}")
        total = hvd.allreduce(np.ones(1), op=hvd.Sum)
        return socket.gethostname(), hvd.rank(), float(total[0])

    options = eval(sys.argv[1])
    print("returned", jupyter_hvd.run(where, num_proc=3, hosts="h1:1,h2:2", **options))
    try:
        jupyter_hvd.run(where, kwargs={"fail_on": "h2"}, num_proc=3, hosts="h1:1,h2:2", **options)
    except RuntimeError as error:
        print("raised", error)
    ''')


def call(cluster, options: str, config: str = "config") -> subprocess.CompletedProcess:
    """CALLER run on head (outside the hosts) with jupyter_hvd.run's extra ``options`` (a dict's text)."""
    try:
        return subprocess.run([sys.executable, "-c", CALLER, options], cwd=REPO,
                              env=cluster.env(config, HOROVOD_START_TIMEOUT="200"),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=240)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"jupyter_hvd.run with {options} hung:\n{exc.stdout}") from None


def test_ranks_on_other_hosts_return_and_raise_to_the_caller(cluster):
    result = call(cluster, "{}")
    assert result.returncode == 0, result.stdout
    assert "returned [('h1', 0, 3.0), ('h2', 1, 3.0), ('h2', 2, 3.0)]" in result.stdout, result.stdout
    assert re.search(r"raised rank [12] raised RuntimeError: nothing to do on h2\n", result.stdout), result.stdout


def test_ssh_options_reach_the_hosts_and_a_refused_login_is_named(cluster):
    """Port 2222 takes only the second key, and the ssh config given has no key."""
    result = call(cluster, f"dict(ssh_port={cluster.ssh['alt_port']}, ssh_identity_file={cluster.ssh['alt_key']!r})",
                  config="config_bare")
    assert result.returncode == 0, result.stdout
    assert "returned [('h1', 0, 3.0), ('h2', 1, 3.0), ('h2', 2, 3.0)]" in result.stdout, result.stdout
    refused = call(cluster, f"dict(ssh_identity_file={cluster.ssh['alt_key']!r}, start_timeout=120)",
                   config="config_bare")
    assert refused.returncode != 0
    assert "could not start the job on h" in refused.stdout, refused.stdout
    assert "ssh could not log in (root@h" in refused.stdout and "Permission denied (publickey" in refused.stdout


LOOP = textwrap.dedent('''
    import jupyter_hvd

    def loop():
        import numpy as np, jupyter_hvd as hvd
        hvd.init()
        x = np.ones(1 << 18, np.float32)
        hvd.allreduce(x, name="loop")
        print("looping", hvd.rank(), flush=True)
        while True:
            hvd.allreduce(x, name="loop")

    jupyter_hvd.run(loop, num_proc=4, hosts="h1:2,h2:2")
    ''')


def test_a_host_lost_in_the_middle_of_the_call_is_named_and_the_others_released(cluster):
    proc = subprocess.Popen([sys.executable, "-c", LOOP], env=cluster.env(HOROVOD_START_TIMEOUT="200"), cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output = JobOutput(proc)
        output.wait_for("looping", 4, timeout=RELEASE_LIMIT_S)
        survivors = ranks_on(cluster, ["h1"])
        began = time.monotonic()
        cluster.kill_host("h2", link_down=False)
        released = released_after(survivors, began)
        proc.wait(timeout=RELEASE_LIMIT_S)
        print(f"\nrun, h2's processes killed: the ranks on h1 released {released:.1f} s after")
        text = output.text()
        assert proc.returncode != 0 and "RunError: lost host h2 (ranks 2, 3)" in text, text
        assert "ranks 0, 1, 2, 3 stopped with the job" in text, text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cluster.revive("h2")


def test_a_host_that_never_answers_fails_the_call_after_start_timeout(cluster):
    """As horovod.run's start_timeout bounds its checks of the hosts, ours bounds how long ssh tries to reach one."""
    with cluster.silent_address() as silent:
        code = (f"import jupyter_hvd\ntry:\n    jupyter_hvd.run(print, num_proc=2, hosts='h1:1,{silent}:1', "
                "start_timeout=2)\nexcept RuntimeError as error:\n    print('raised', error)")
        result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=cluster.env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert f"raised could not start the job on {silent}: ssh could not reach the host (ssh: connect to host " \
           f"{silent} port 22: Connection timed out)" in result.stdout, result.stdout
