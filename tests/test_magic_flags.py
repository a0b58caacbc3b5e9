"""The %%hvd magic's flags and the job they ask for, checked without starting ranks."""
import importlib.util
import os
import sys

import pytest
from IPython.core.error import UsageError

from jupyter_hvd.magic.cluster import SPIN_ENV, LaunchConfig, engine_spin
from jupyter_hvd.magic.magics import HvdMagics, parse_line
from jupyter_hvd.magic.rank_device import pin_device


def config_of(magics: HvdMagics, line: str, cell: str = "") -> LaunchConfig:
    """The job ``%%hvd line`` over ``cell`` asks ``magics`` for."""
    return magics._launch_config(parse_line(magics.hvd_cell, line), cell)


@pytest.mark.parametrize(
    "line, message",
    [
        ("%%hvd -np 0", "-np must be at least 1"),
        ("%%hvd --bogus", "unrecognized arguments: --bogus"),
        ("%%hvd -np two", "invalid int value"),
        ("%%hvd -np 2 --hosts no-such-host.invalid:2", "unknown host 'no-such-host.invalid'"),
        ("%%hvd -np 2 --hosts localhost:0", "--hosts: bad host entry 'localhost:0'"),
        ("%%hvd -np 3 --hosts localhost:2", "3 ranks, but the hosts have 2 slots (localhost:2)"),
        ("%%hvd -np 2 --hostfile /no/such/hostfile", "no such file"),
        ("%%hvd -np 2 --hosts localhost --hostfile /etc/hostname", "give --hosts or --hostfile, not both"),
        ("%%hvd -np 2 --framework tensorflow", "invalid choice: 'tensorflow'"),
        ("%%hvd -np 2 --rank 5", "--rank must be between 0 and 1"),
        ("%%hvd -np 2 --timeout -1", "--timeout must be positive"),
        ("%%hvd -np 2 --start-timeout 0", "--start-timeout must be positive"),
        ("%%hvd -np 2 --baseline 0", "--baseline must be positive"),
        ("%%hvd -np 2 -o 1x", "-o needs a variable name"),
        ("%%hvd -np 2 -x LEVEL", "-x needs VAR=VALUE, got 'LEVEL'"),
        ("%%hvd -np 2 -x =debug", "-x needs a variable name, got '=debug'"),
        ("%%hvd -np 2 -x 'MSG=no end", "No closing quotation"),
        ("%hvd frobnicate", "invalid choice: 'frobnicate'"),
        ("%hvd push undefined_here", "not defined in the notebook: undefined_here"),
        ("%hvd push", "usage: %hvd push NAME"),
        ("%hvd status extra", "%hvd status takes no names, got: extra"),
        ("%hvd stop now please", "%hvd stop takes no names, got: now please"),
        ("%hvd push x --rank 1", "--rank is for %hvd pull; %hvd push takes no rank"),
        ("%hvd", "%hvd needs a command (status, stop, restart, push NAME..., pull NAME... [--rank R], monitor), "
                 "or %%hvd's flags to start the ranks (%hvd -np 2)"),
    ],
)
def test_bad_flags_give_one_clear_message(ip, capsys, line, message):
    result = ip.run_cell(f"{line}\nprint('never runs')" if line.startswith("%%") else line)
    out = "".join(capsys.readouterr())
    assert not result.success
    assert isinstance(result.error_in_exec, UsageError)
    assert message in out
    assert "Traceback" not in out and "never runs" not in out


def test_np_is_required_the_first_time(ip):
    with pytest.raises(UsageError, match="-np N is required"):
        HvdMagics(ip).hvd_cell("", "print(1)")


def test_flags_without_np_adjust_the_running_job_and_np_starts_a_new_one(ip, tmp_path):
    magics = HvdMagics(ip)
    magics.launch = config_of(magics, "-np 2 --framework none -x LEVEL=debug -x EMPTY= -x LEVEL=info")
    assert magics.launch.env == (("EMPTY", ""), ("LEVEL", "info"))  # sorted, the last value of a name counts
    assert config_of(magics, "") == magics.launch  # the ranks are reused
    assert config_of(magics, "--cpu").cpu and config_of(magics, "--cpu").env == magics.launch.env
    assert config_of(magics, "-x OTHER=1").env == (("OTHER", "1"),)  # a different set
    (tmp_path / "my hosts").write_text("localhost slots=2\n")
    quoted = config_of(magics, f"""-x "MSG=hello world" -x 'Q="as is"' --hostfile "{tmp_path}/my hosts" """)
    assert quoted.env == (("MSG", "hello world"), ("Q", '"as is"')) and quoted.hostfile == f"{tmp_path}/my hosts"
    moved = config_of(magics, "--hosts localhost:2")
    assert (moved.hosts, moved.np, moved.env) == ("localhost:2", 2, magics.launch.env)
    assert config_of(magics, "-np 2 --framework none") == LaunchConfig(np=2, framework="none")  # -x dropped


@pytest.mark.parametrize(
    "line, reason",
    [
        ("", ""),
        ("-np 1 --framework none", "changed -np"),
        ("-x LEVEL=debug", "changed -x"),
        ("--cpu", "changed --cpu"),
        ("--hosts localhost:2 -x A=1", "changed --hosts, -x"),
    ],
)
def test_a_job_that_differs_says_what_changed(ip, line, reason):
    magics = HvdMagics(ip)
    running = LaunchConfig(np=2, framework="none")
    magics.launch = running
    assert config_of(magics, line).changes_from(running) == reason


def test_framework_defaults_to_mxnet_when_installed(ip, monkeypatch):
    from jupyter_hvd import _C
    for name in ("torch", "mxnet"):  # a kernel that has imported neither (other tests here import them)
        monkeypatch.delitem(sys.modules, name, raising=False)
    fresh = HvdMagics(ip)
    expected = "mxnet" if importlib.util.find_spec("mxnet") and hasattr(_C, "mxnet_push") else "none"
    assert config_of(fresh, "-np 1").framework == expected
    if importlib.util.find_spec("torch"):  # the cell that starts the ranks chooses by its imports
        assert config_of(fresh, "-np 1", "import torch\nmodel = torch.nn.Linear(2, 2)").framework == "torch"


def test_a_missing_framework_is_a_usage_error(ip, monkeypatch):
    real_find_spec = importlib.util.find_spec
    missing = {"mxnet"}

    def without(name, *args):
        return None if name in missing else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without)
    fresh = HvdMagics(ip)
    torch_default = "torch" if real_find_spec("torch") else "none"  # no MXNet: PyTorch when installed
    assert config_of(fresh, "-np 1").framework == torch_default
    with pytest.raises(UsageError, match="mxnet is not installed"):
        config_of(fresh, "-np 1 --framework mxnet")
    missing.add("torch")
    assert config_of(fresh, "-np 1").framework == "none"
    with pytest.raises(UsageError, match="torch is not installed"):
        config_of(fresh, "-np 1 --framework torch")


def test_a_build_without_the_mxnet_bridge_defaults_to_another_api(ip, monkeypatch):
    from jupyter_hvd import _C
    monkeypatch.delattr(_C, "mxnet_push", raising=False)
    fresh = HvdMagics(ip)
    want = "torch" if importlib.util.find_spec("torch") else "none"  # PyTorch when installed, else the numpy API
    assert config_of(fresh, "-np 1").framework == want
    with pytest.raises(UsageError, match="built without its MXNet bridge.*pip install --no-build-isolation"):
        config_of(fresh, "-np 1 --framework mxnet")


@pytest.mark.parametrize(
    "visible, local_rank, cpu, device, pinned",
    [
        ("3,5", 1, False, "gpu:5", "3,5"),
        ("3,5", 2, False, "gpu:3", "3,5"),
        ("3,5", 0, True, "cpu", ""),
        ("", 0, False, "cpu", ""),
    ],
)
def test_device_pinning_follows_the_local_rank(monkeypatch, visible, local_rank, cpu, device, pinned):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert pin_device(local_rank, 2, cpu) == device
    assert os.environ["CUDA_VISIBLE_DEVICES"] == pinned
    assert ("OMP_NUM_THREADS" in os.environ) == (device == "cpu")


def test_engine_spin_is_off_only_where_the_ranks_outnumber_the_cores(monkeypatch):
    cores = len(os.sched_getaffinity(0))
    monkeypatch.delenv(SPIN_ENV, raising=False)
    assert engine_spin(LaunchConfig(np=cores)) == {}
    assert engine_spin(LaunchConfig(np=cores + 1)) == {SPIN_ENV: "0"}
    assert engine_spin(LaunchConfig(np=cores + 1, hosts="a:2,b:2")) == {}  # other hosts' cores are not these
    monkeypatch.setenv(SPIN_ENV, "500")
    assert engine_spin(LaunchConfig(np=cores + 1)) == {}  # the user's value reaches the ranks as it is


def test_help_shows_both_magics(ip, capsys):
    assert ip.run_cell("%hvd --help").success
    said = capsys.readouterr().out
    assert said.startswith("  %hvd [--rank RANK]") and "\n  %%hvd [-np NP]" in said and "%hvd_" not in said, said
