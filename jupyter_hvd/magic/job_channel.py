"""The kernel end of the JupyterLab job panel: a comm target that reports the %%hvd job and stops or restarts it.

The frontend opens a comm to ``jupyter_hvd.job``; the kernel answers with the job and sends it
again at every transition (ranks starting and started, a cell running and ending, stopped).
Kernel->frontend messages go out on IOPub, so they arrive while a cell runs; the frontend's
``refresh``, ``stop`` and ``restart`` requests are handled when the kernel is idle.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from .failures import RankError

if TYPE_CHECKING:
    from .cluster import RankInfo
    from .magics import HvdMagics

TARGET = "jupyter_hvd.job"
STATES = ("none", "starting", "idle", "running", "failed", "stopped")


class JobChannel:
    """The open panel comms of one kernel and the state of its %%hvd job; without a kernel it only keeps state."""

    def __init__(self, magics: HvdMagics):
        self._magics = weakref.ref(magics)  # the magics own the channel, the comm manager holds our callbacks
        self.state = "none"
        self.error = ""
        self.failed_rank: int | None = None
        self._ranks: list[RankInfo] = []  # the job's last known ranks, kept after a stop to show them gone
        self._comms: list[Any] = []

    def register(self, shell: Any) -> bool:
        """Register the comm target with the kernel's comm manager; False (and nothing done) outside a kernel."""
        if getattr(shell, "kernel", None) is None:  # plain IPython, or a test's InteractiveShell
            return False
        import comm

        comm.get_comm_manager().register_target(TARGET, self._open)
        shell.events.register("post_run_cell", self._after_cell)
        return True

    # -- transitions, called by the magics -------------------------------------------------------

    def publish(self, state: str, error: str = "", failed_rank: int | None = None) -> None:
        """Enter state and send the job to every open panel."""
        assert state in STATES, state
        self.state, self.error, self.failed_rank = state, error, failed_rank
        if state == "starting":
            self._ranks = []  # the new job's ranks are known once started
        self.broadcast()

    def stopped(self) -> None:
        """The ranks were stopped (or there were none to stop)."""
        self.publish("stopped" if self.state != "none" else "none")

    def ended(self, exc: BaseException | None) -> None:
        """A start or cell that ended without reporting its end (an exception on the way out) is over."""
        if self.state in ("starting", "running"):
            if exc is None:
                self.publish("idle")
            else:
                self.failed(exc)

    def failed(self, exc: BaseException) -> None:
        """A cell or a start failed: keep the first failing rank and the message's first line."""
        ranks = getattr(exc, "ranks", ()) if isinstance(exc, RankError) else ()
        line = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        self.publish("failed", line, ranks[0] if ranks else None)

    # -- the job as the panel sees it ------------------------------------------------------------

    def job(self) -> dict[str, Any]:
        """The job dict sent to the panel: state, size, framework, cells run, last error and the ranks."""
        magics = self._magics()
        cluster = magics.cluster if magics is not None else None
        if cluster is not None and cluster.ranks:
            self._ranks = list(cluster.ranks)
        launch = magics.launch if magics is not None else None
        state = self.state
        if state in ("idle", "running") and cluster is None:  # the job ended without passing through us
            state = "stopped"
        return {
            "state": state,
            "np": launch.np if launch is not None else 0,
            "framework": launch.framework if launch is not None else "",
            "cells": magics._cells if magics is not None else 0,
            "error": self.error,
            "failed_rank": self.failed_rank,
            "ranks": [
                {"rank": r.rank, "host": r.host, "pid": r.pid, "device": r.device,
                 "alive": cluster is not None and r.alive()}
                for r in self._ranks
            ],
        }

    def broadcast(self) -> None:
        """Send the job to every open panel comm."""
        if not self._comms:
            return
        message = {"type": "job", "job": self.job()}
        for c in list(self._comms):
            try:
                c.send(message)
            except Exception:  # a comm whose frontend went away; it is dropped at its close
                continue

    # -- comm callbacks --------------------------------------------------------------------------

    def _open(self, c: Any, _msg: dict[str, Any]) -> None:
        self._comms.append(c)
        c.on_msg(lambda msg: self._on_msg(c, msg))
        c.on_close(lambda _msg: self._comms.remove(c) if c in self._comms else None)
        c.send({"type": "job", "job": self.job()})

    def _after_cell(self, result: Any) -> None:
        magics = self._magics()
        if magics is not None and magics.background is not None and result.success:
            return  # a --noblock cell runs on: the job is running until its end is shown
        self.ended(result.error_before_exec or result.error_in_exec)

    def _on_msg(self, c: Any, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data", {})
        action = data.get("action") if isinstance(data, dict) else None
        magics = self._magics()
        if magics is None:
            c.send({"type": "error", "message": "the %hvd magics are gone (extension unloaded)"})
            return
        try:
            if action == "refresh":
                pass
            elif action in ("stop", "restart"):  # exactly what %hvd stop / %hvd restart do
                magics.hvd_line(action)
            else:
                raise RankError(f"unknown action {action!r}")
        except Exception as exc:  # the panel shows it; the kernel keeps serving
            self.ended(exc)
            c.send({"type": "error", "message": next(iter(str(exc).splitlines()), type(exc).__name__)})
        self.broadcast()
