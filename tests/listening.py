"""The listening sockets of a job's processes, for tests that a job is reachable only where it should be."""
from __future__ import annotations

import ipaddress

import psutil


def listening(processes: list[psutil.Process]) -> list[tuple[int, str, str, int]]:
    """(pid, name, address, port) of every TCP socket in the LISTEN state, and every unconnected UDP socket,
    that these processes hold (those that end meanwhile are skipped)."""
    found = []
    for process in dict.fromkeys(processes):
        try:
            name = process.name()
            for conn in process.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN or (conn.status == psutil.CONN_NONE and not conn.raddr):
                    found.append((process.pid, name, conn.laddr.ip, conn.laddr.port))
        except psutil.Error:
            continue
    return found


def outside(sockets: list[tuple[int, str, str, int]], allowed: set[str]) -> list[tuple[int, str, str, int]]:
    """The sockets bound to anything but loopback or an address in ``allowed``."""
    return [s for s in sockets if not ipaddress.ip_address(s[2].split("%")[0]).is_loopback and s[2] not in allowed]


def tree(root: psutil.Process) -> list[psutil.Process]:
    """root and all its descendants."""
    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []
