"""The launch contract (jupyter_hvd.runner.launch) without ranks: -x flags, placements, a rank's place."""
from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_hvd.runner.launch import RankPlace, check_placement, parse_export, rank_place, started_by_launcher


@pytest.mark.parametrize(
    ("item", "expected"),
    [("LEVEL=debug", ("LEVEL", "debug")), ("EMPTY=", ("EMPTY", "")), ("SET_ME=a=b", ("SET_ME", "a=b")),
     ("FORWARD_ME", ("FORWARD_ME", None))],
)
def test_x_flags_set_or_pass_a_variable(item: str, expected: tuple[str, str | None]) -> None:
    assert parse_export(item) == expected


@pytest.mark.parametrize(("item", "message"), [("=value", "-x needs a variable name, got '=value'"),
                                               ("1X=2", "-x needs a variable name"), ("A B=1", "variable name")])
def test_x_flags_without_a_variable_name_are_refused(item: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_export(item)


def test_x_flags_that_must_set_a_value_refuse_a_bare_name() -> None:
    with pytest.raises(ValueError, match="-x needs VAR=VALUE, got 'LEVEL'"):
        parse_export("LEVEL", value_required=True)
    assert parse_export("LEVEL=", value_required=True) == ("LEVEL", "")


def test_a_placement_is_hosts_or_a_hostfile(tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# the lab\nh1 slots=4\nh2\n")
    assert check_placement(None, None) == []
    assert check_placement("h1:4,h2", None) == [("h1", 4), ("h2", 1)]
    assert check_placement(None, str(hostfile)) == [("h1", 4), ("h2", 1)]
    with pytest.raises(ValueError, match="give --hosts or --hostfile, not both"):
        check_placement("h1", str(hostfile))
    with pytest.raises(ValueError, match=f"--hostfile {tmp_path / 'none'}: no such file"):
        check_placement(None, str(tmp_path / "none"))
    with pytest.raises(ValueError, match="--hosts: bad host entry 'h1:0'"):
        check_placement("h1:0", None)
    hostfile.write_text("h1 slots=4\nh2:2 # as --hosts writes it\n")  # mpiexec would look for a host 'h2:2'
    with pytest.raises(ValueError, match=f"the hostfile {hostfile}, line 2: 'h2:2' is how --hosts gives slots; "
                                         "a hostfile line is 'h2 slots=2'"):
        check_placement(None, str(hostfile))


def test_a_rank_reads_its_place_from_what_mpiexec_sets() -> None:
    environ = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
               "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    assert rank_place(environ) == RankPlace(rank=3, size=4, local_rank=1, local_size=2)
    assert rank_place({}) == RankPlace(rank=0, size=1, local_rank=0, local_size=1)  # no launcher: alone
    assert started_by_launcher(environ) and started_by_launcher({"PMIX_RANK": "0"})
    assert not started_by_launcher({"HOME": "/root"})
