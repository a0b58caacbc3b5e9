"""A host lost in the middle of a job: which one, by what Open MPI's launcher printed, which ranks ran there,
and what is left of the placement.

Open MPI cannot go on without a lost rank, so its launcher stops the ranks on every other host too. It
notices at once when the host's processes die and their connections close; a host that goes silent
(powered off, cut off) is noticed when its daemon stops answering TCP keepalives: after
HOST_SILENCE_S, with the settings below (Open MPI's own wait 8 minutes).
"""
from __future__ import annotations

import re

# PRRTE's keepalive on its daemons' connections (a host's kernel answers these even when it is busy), set
# for jobs on several hosts unless the user set them: idle seconds before the first probe, seconds between
# probes, and probes missed before the daemon is declared lost.
KEEPALIVE = {"PRTE_MCA_oob_tcp_keepalive_time": "10", "PRTE_MCA_oob_tcp_keepalive_intvl": "2",
             "PRTE_MCA_oob_tcp_keepalive_probes": "5"}
HOST_SILENCE_S = 10 + 2 * 5

# "Remote daemon: [prterun-head-7420@0,2] on node h2" (it stopped answering), "Remote host:   h2" (its daemon
# ended, or never started).
_LOST = (re.compile(r"Remote daemon:.* on node (\S+)"), re.compile(r"Remote host:\s+(\S+)"))


# A daemon that never started on its host: ssh could not log in there (its own words say why), or the daemon
# could not call back.
NEVER_STARTED = "A daemon failed to report back after being spawned"
_SSH_SAID = ("Permission denied (", "host key is known for", "Host key verification failed",
             "REMOTE HOST IDENTIFICATION", "Could not resolve hostname", "ssh: connect to host",
             "Connection closed by", "Connection timed out during")


# What ssh says of a host it could not reach at all (as opposed to one that refused the login).
_UNREACHED = ("Connection timed out", "No route to host", "Connection refused", "Could not resolve hostname",
              "Network is unreachable")


def start_failure(output: str) -> str:
    """Why Open MPI's launcher could not start its daemons on the other hosts: ssh could not reach them or log in,
    as ssh said; '' otherwise (PRRTE reports a daemon killed in the middle of a job in the same words as one
    never started)."""
    if NEVER_STARTED not in output:
        return ""
    said = list(dict.fromkeys(line.strip() for line in output.splitlines() if any(s in line for s in _SSH_SAID)))
    if not said:
        return ""
    if all(any(u in line for u in _UNREACHED) for line in said):
        return (f"ssh could not reach the host ({' '.join(said)}): the host is down or not on this network, or a "
                "firewall drops ssh (hvdrun --start-timeout, or $HOROVOD_START_TIMEOUT, is how long ssh tries)")
    return (f"ssh could not log in ({' '.join(said)}): `ssh HOST true` must work with no password and no "
            "question (a key that ssh offers, the host in known_hosts; ~/.ssh/config can give both)")


def lost_hosts(output: str) -> list[str]:
    """The hosts that Open MPI's launcher says it lost, in the order it says so."""
    found = [m.group(1) for pattern in _LOST for m in pattern.finditer(output)]
    return list(dict.fromkeys(found))


def ranks_by_host(placement: list[tuple[str, int]], np: int) -> dict[str, list[int]]:
    """Which ranks mpiexec puts on each host by default: it fills each host's slots in order (a placement has a
    slot for every rank: launch.check_slots)."""
    ranks: dict[str, list[int]] = {host: [] for host, _ in placement}
    rank = 0
    for host, slots in placement:
        take = min(slots, np - rank)
        ranks[host] += range(rank, rank + take)
        rank += take
    return ranks


def describe(lost: list[str], ranks: dict[str, list[int]], how: str) -> str:
    """One line: the lost hosts with their ranks, how the loss showed, and what became of the others."""
    def listing(hosts: list[str]) -> str:
        return "; ".join(f"{h} (rank{'s' if len(ranks.get(h, [])) != 1 else ''} "
                         f"{', '.join(map(str, ranks.get(h, []))) or 'none'})" for h in hosts)

    others = [h for h in ranks if h not in lost and ranks[h]]
    line = f"lost host {listing(lost)}: {how}"
    if others:
        line += f"; the ranks on {listing(others)} were stopped with it, as MPI cannot go on without a rank"
    return line


def job_failure(output: str, ranks: dict[str, list[int]]) -> str:
    """What mpiexec's output says went wrong with the job's hosts: one where the job could not start, or one lost
    in its middle (with the ranks it held, ``ranks``: each host's); '' when it lost none."""
    lost = lost_hosts(output)
    if not lost:
        return ""
    if failed := start_failure(output):
        return f"could not start the job on {', '.join(lost)}: {failed}"
    return describe(lost, ranks, "Open MPI's launcher lost contact with it (see above)")


def hosts_left(placement: list[tuple[str, int]], lost: set[str]) -> list[tuple[str, int]]:
    """The placement without the lost hosts."""
    return [(host, slots) for host, slots in placement if host not in lost]
