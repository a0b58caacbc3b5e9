"""Which of this host's networks reach a job's other hosts, so that a job on several hosts listens there only."""
from __future__ import annotations

import ipaddress
import socket

import psutil

_PROBE_PORT = 9  # UDP "connect" only picks a route and a source address: nothing is sent
LISTEN_LOOPBACK, LISTEN_ANY = "loopback", "any"  # JUPYTER_HVD_LISTEN's two words besides interfaces and networks


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


def _rules(listen: str) -> list:
    """The rules of ``listen`` (comma-separated interface names and CIDR networks, as JUPYTER_HVD_LISTEN and
    hvdrun --network-interface take them): names, and networks parsed. ValueError for a malformed network."""
    rules = []
    for rule in listen.split(","):
        if "/" not in rule:
            rules.append(rule)
            continue
        try:
            rules.append(ipaddress.ip_network(rule, strict=False))
        except ValueError:
            raise ValueError(f"{rule!r} is not a network: give a CIDR network such as 10.0.0.0/24, "
                             f"or an interface name") from None
    return rules


def _interface_addresses() -> list[tuple[str, str]]:
    """This host's interfaces and their IPv4 addresses."""
    return [(name, addr.address) for name, addrs in psutil.net_if_addrs().items()
            for addr in addrs if addr.family == socket.AF_INET]


def addresses_on(listen: str) -> list[str]:
    """This host's IPv4 addresses on the interfaces or networks of ``listen``; ValueError when it is malformed
    or names none of them."""
    rules, interfaces = _rules(listen), _interface_addresses()
    found = [address for name, address in interfaces
             if any(rule == name if isinstance(rule, str) else ipaddress.ip_address(address) in rule for rule in rules)]
    if not found:
        have = ", ".join(f"{name} {address}" for name, address in interfaces)
        raise ValueError(f"no interface or network of this host is in {listen!r} (this host has {have})")
    return found


def check_listen(listen: str | None, source: str) -> None:
    """ValueError, naming ``source``, when ``listen`` (a JUPYTER_HVD_LISTEN value) is malformed or names nothing
    on this host, where mpiexec and the notebook's controller listen (Open MPI's launcher would only say that it
    found no interface)."""
    if listen and listen not in (LISTEN_LOOPBACK, LISTEN_ANY):
        try:
            addresses_on(listen)
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None


def is_loopback(listen: str) -> bool:
    """Whether the interfaces and networks of ``listen`` are all loopback: `lo`, or 127.0.0.0/8."""
    interfaces = _interface_addresses()

    def loopback(rule) -> bool:
        if not isinstance(rule, str):
            return rule.is_loopback
        addresses = [address for name, address in interfaces if name == rule]
        return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)
    return all(loopback(rule) for rule in _rules(listen))


def listen_address(hosts: list[str], listen: str | None) -> str:
    """The one address of this host for a server that the processes on ``hosts`` connect to (the notebook's
    controller): loopback when they all are this host, an address in ``listen`` (interface names or CIDR
    networks, "any" for every address) when given, else the address that reaches them. ValueError when
    that is not one address."""
    if listen == LISTEN_ANY:
        return "*"
    if listen and listen != LISTEN_LOOPBACK:
        return addresses_on(listen)[0]
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
