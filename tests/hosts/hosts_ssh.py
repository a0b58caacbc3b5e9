"""sshd on the namespace hosts: host and user keys made for one run, sshd configs, and the client's config.

Port 22 takes the cluster's key (``id_cluster``); port 2222 takes only a second key (``id_alt``), so that a
login there proves that both ``-p`` and ``-i`` reached ssh. ``config`` gives ssh the cluster's key and known
hosts; ``config_bare`` only the known hosts, so that a job launched with it needs ``-i``.
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

SSHD = "/usr/sbin/sshd"
ALT_PORT = 2222


def keygen(path: Path, comment: str) -> str:
    """Make an ed25519 key pair at path (no passphrase); return the public key line."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


class SshSetup:
    """Keys, sshd configs and client configs for the hosts, in folder."""

    def __init__(self, folder: Path, hosts: list[tuple[str, str]]):
        self.folder = folder
        self.hosts = hosts
        folder.mkdir(mode=0o700, parents=True)
        self.key = folder / "id_cluster"
        self.alt_key = folder / "id_alt"
        (folder / "authorized_keys").write_text(keygen(self.key, "cluster") + "\n")
        (folder / "authorized_keys_alt").write_text(keygen(self.alt_key, "alt") + "\n")
        known = []
        for name, addr in hosts:
            public = " ".join(keygen(folder / f"{name}_host_key", name).split()[:2])
            known += [f"{name},{addr} {public}", f"[{name}]:{ALT_PORT},[{addr}]:{ALT_PORT} {public}"]
            (folder / f"sshd_config_{name}").write_text(self._sshd_config(name, addr))
        (folder / "known_hosts").write_text("\n".join(known) + "\n")
        common = ["Host *", f"  UserKnownHostsFile {folder / 'known_hosts'}", "  StrictHostKeyChecking yes",
                  "  GlobalKnownHostsFile /dev/null", "  IdentitiesOnly yes", "  BatchMode yes",
                  "  ConnectTimeout 10", "  LogLevel ERROR"]
        (folder / "config_bare").write_text("\n".join(common) + "\n")
        (folder / "config").write_text("\n".join(common + [f"  IdentityFile {self.key}"]) + "\n")

    def _sshd_config(self, name: str, addr: str) -> str:
        return "\n".join([
            f"ListenAddress {addr}:22",
            f"ListenAddress {addr}:{ALT_PORT}",
            f"HostKey {self.folder / f'{name}_host_key'}",
            f"PidFile {self.folder / f'sshd_{name}.pid'}",
            f"AuthorizedKeysFile {self.folder / 'authorized_keys'}",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "MaxStartups 100:30:200",
            "MaxSessions 100",
            "LogLevel ERROR",
            f"Match LocalPort {ALT_PORT}",
            f"  AuthorizedKeysFile {self.folder / 'authorized_keys_alt'}",
            "",
        ])

    def sshd_argv(self, name: str) -> list[str]:
        """sshd for host name, in the foreground, logging to stderr."""
        return [SSHD, "-D", "-e", "-f", str(self.folder / f"sshd_config_{name}")]

    def ssh_argv(self, name: str, *command: str) -> list[str]:
        return ["ssh", "-F", str(self.folder / "config"), name, *command]

    def wait_ready(self, timeout_s: float) -> None:
        """Return once every host takes a login, or raise naming those that do not."""
        deadline = time.monotonic() + timeout_s
        waiting = [name for name, _ in self.hosts]
        while waiting:
            waiting = [n for n in waiting
                       if subprocess.run(self.ssh_argv(n, "true"), capture_output=True).returncode != 0]
            if waiting and time.monotonic() > deadline:
                raise RuntimeError(f"sshd on {', '.join(waiting)} took no login within {timeout_s:g} s")
            if waiting:
                time.sleep(0.2)

    def describe(self) -> dict:
        return {"config": str(self.folder / "config"), "config_bare": str(self.folder / "config_bare"),
                "key": str(self.key), "alt_key": str(self.alt_key), "alt_port": ALT_PORT}
