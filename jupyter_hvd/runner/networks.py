"""Which of this host's networks reach a job's other hosts, so that a job on several hosts listens there only."""
from __future__ import annotations

import ipaddress
import socket

import psutil

_PROBE_PORT = 9  # UDP "connect" only picks a route and a source address: nothing is sent


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


def is_loopback(listen: str) -> bool:
    """Whether the interfaces and networks of ``listen`` (names or CIDR networks, as JUPYTER_HVD_LISTEN takes
    them) are all loopback: `lo`, or 127.0.0.0/8."""
    interfaces = psutil.net_if_addrs()

    def loopback(rule: str) -> bool:
        if "/" in rule:
            return ipaddress.ip_network(rule, strict=False).is_loopback
        addresses = [a.address for a in interfaces.get(rule, []) if a.family == socket.AF_INET]
        return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)
    return all(loopback(rule) for rule in listen.split(","))


def listen_address(hosts: list[str], listen: str | None) -> str:
    """The one address of this host for a server that the processes on ``hosts`` connect to (the notebook's
    controller): loopback when they all are this host, an address in ``listen`` (interface names or CIDR
    networks, "any" for every address) when given, else the address that reaches them. ValueError when
    that is not one address."""
    if listen == "any":
        return "*"
    if listen and listen != "loopback":
        rules = listen.split(",")
        for name, addrs in psutil.net_if_addrs().items():
            for addr in addrs:
                if addr.family == socket.AF_INET and any(
                        rule == name or ("/" in rule and ipaddress.ip_address(addr.address) in
                                         ipaddress.ip_network(rule, strict=False)) for rule in rules):
                    return addr.address
        raise ValueError(f"no address of this host is on {listen}")
    sources = {host: source_address(host) for host in dict.fromkeys(hosts)}
    unknown = [host for host, source in sources.items() if source is None]
    if unknown:
        raise ValueError(f"cannot tell which address of this host reaches {', '.join(unknown)} "
                         "(not a name it resolves)")
    remote = sorted({source for source in sources.values() if not ipaddress.ip_address(source).is_loopback})
    if len(remote) > 1:
        raise ValueError(f"the hosts are reached through different addresses of this host ({', '.join(remote)}); "
                         "choose one with JUPYTER_HVD_LISTEN (an interface or a network)")
    return remote[0] if remote else "127.0.0.1"
