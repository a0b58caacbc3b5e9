"""Which of this host's networks reach a job's other hosts, so that a job on several hosts listens there only."""
from __future__ import annotations

import ipaddress
import socket

import psutil

_PROBE_PORT = 9  # UDP "connect" only picks a route and a source address: nothing is sent


def hostfile_hosts(path: str) -> list[str]:
    """The host names in an Open MPI hostfile ("h1 slots=4" lines; # starts a comment)."""
    with open(path) as f:
        lines = [line.split("#", 1)[0].split() for line in f]
    return [words[0] for words in lines if words]


def source_address(host: str) -> str | None:
    """The address of this host that packets to ``host`` leave from (IPv4), or None when ``host`` does not
    resolve here or no route reaches it."""
    try:
        target = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_DGRAM)[0][4][0]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((target, _PROBE_PORT))
            return probe.getsockname()[0]
    except OSError:
        return None


def network_of(address: str) -> str | None:
    """The network (CIDR) of the interface that holds ``address``, or None if no interface holds it."""
    for addrs in psutil.net_if_addrs().values():
        for addr in addrs:
            if addr.family == socket.AF_INET and addr.address == address and addr.netmask:
                return str(ipaddress.ip_interface(f"{address}/{addr.netmask}").network)
    return None


def reaching_networks(hosts: list[str]) -> tuple[list[str], list[str]]:
    """The networks (CIDR) of this host's interfaces that reach ``hosts``, and the hosts whose way could not be
    told (names that do not resolve here). Hosts reached over loopback are this host: they need no network."""
    networks, unknown = [], []
    for host in dict.fromkeys(hosts):
        source = source_address(host)
        if source is None:
            unknown.append(host)
        elif not ipaddress.ip_address(source).is_loopback:
            network = network_of(source)
            networks.append(network) if network else unknown.append(host)
    return list(dict.fromkeys(networks)), unknown
