"""The sockets of a job's processes, for tests that a job is reachable only where it should be.

Read from /proc/PID/net (the socket tables of the process's own network namespace, so that processes of the
namespace hosts in tests/hosts are seen too; psutil reads the caller's) and /proc/PID/fd.
"""
from __future__ import annotations

import ipaddress
import os
import struct
from typing import NamedTuple

import psutil

LISTEN, ESTABLISHED, UNCONNECTED = "0A", "01", "07"  # TCP states in /proc/net/tcp; 07 (close) for UDP


class Sock(NamedTuple):
    pid: int
    name: str
    kind: str  # tcp, tcp6, udp, udp6
    state: str
    addr: str
    port: int
    peer: str
    peer_port: int


def _address(text: str) -> tuple[str, int]:
    """'0100007F:1F90' (or its 32-digit IPv6 form) as ('127.0.0.1', 8080): each 32-bit word is host-endian."""
    hexaddr, hexport = text.split(":")
    raw = b"".join(struct.pack("=I", int(hexaddr[i:i + 8], 16)) for i in range(0, len(hexaddr), 8))
    addr = ipaddress.ip_address(raw)
    mapped = getattr(addr, "ipv4_mapped", None)  # an IPv4 peer of an IPv6 socket
    return str(mapped or addr), int(hexport, 16)


def sockets(process: psutil.Process) -> list[Sock]:
    """Every inet socket the process holds."""
    try:
        name = process.name()
        inodes = set()
        for fd in os.listdir(f"/proc/{process.pid}/fd"):
            try:
                target = os.readlink(f"/proc/{process.pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
        found = []
        for kind in ("tcp", "tcp6", "udp", "udp6"):
            with open(f"/proc/{process.pid}/net/{kind}") as table:
                for row in table.read().splitlines()[1:]:
                    fields = row.split()
                    if fields[9] in inodes:
                        (addr, port), (peer, peer_port) = _address(fields[1]), _address(fields[2])
                        found.append(Sock(process.pid, name, kind, fields[3], addr, port, peer, peer_port))
        return found
    except (OSError, psutil.Error):  # it ended meanwhile
        return []


def listening(processes: list[psutil.Process]) -> list[Sock]:
    """The TCP sockets in the LISTEN state, and the unconnected UDP ones, that these processes hold."""
    return [s for p in dict.fromkeys(processes) for s in sockets(p)
            if s.state == (LISTEN if s.kind.startswith("tcp") else UNCONNECTED)]


def connected(processes: list[psutil.Process]) -> list[Sock]:
    """The established TCP connections of these processes."""
    return [s for p in dict.fromkeys(processes) for s in sockets(p)
            if s.kind.startswith("tcp") and s.state == ESTABLISHED]


def loopback(addr: str) -> bool:
    return ipaddress.ip_address(addr).is_loopback


def outside(found: list[Sock], allowed: set[str]) -> list[Sock]:
    """The sockets bound to anything but loopback or an address in ``allowed``."""
    return [s for s in found if not loopback(s.addr) and s.addr not in allowed]


def tree(root: psutil.Process) -> list[psutil.Process]:
    """root and all its descendants."""
    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []
