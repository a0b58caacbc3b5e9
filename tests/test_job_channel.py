"""The job panel's comm in a real kernel: job messages at every transition, stop and restart from the panel."""
import time
import uuid

import psutil
import pytest
from test_kernel import Kernel, describe

pytestmark = pytest.mark.timeout(240)

TARGET = "jupyter_hvd.job"
WAIT_S = 120.0


class PanelComm:
    """A frontend's end of the job comm over a kernel's channels: what JupyterLab's panel sends and receives."""

    def __init__(self, kernel: Kernel):
        self.kc = kernel.kc
        self.comm_id = uuid.uuid4().hex
        self.messages: list[dict] = []  # data of every comm_msg the kernel sent on our comm
        self.closed = False

    def open(self) -> None:
        self._request("comm_open", {"comm_id": self.comm_id, "target_name": TARGET, "data": {}})

    def send(self, data: dict) -> None:
        self._request("comm_msg", {"comm_id": self.comm_id, "data": data})

    def execute(self, code: str) -> dict:
        """Run code, collecting the job messages sent meanwhile; return the execute reply's content."""
        msg_id = self.kc.execute(code)
        self._until_idle(msg_id)
        return self._reply(msg_id)

    def jobs(self) -> list[dict]:
        return [m["job"] for m in self.messages if m.get("type") == "job"]

    def states(self) -> list[str]:
        return [job["state"] for job in self.jobs()]

    def _request(self, msg_type: str, content: dict) -> None:
        msg = self.kc.session.msg(msg_type, content)
        self.kc.shell_channel.send(msg)
        self._until_idle(msg["header"]["msg_id"])

    def _until_idle(self, msg_id: str) -> None:
        """Read IOPub until the kernel is idle after msg_id, keeping our comm's messages."""
        deadline = time.monotonic() + WAIT_S
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"the kernel did not finish {msg_id} within {WAIT_S:g}s; got {self.states()}"
            msg = self.kc.get_iopub_msg(timeout=left)
            content, kind = msg["content"], msg["msg_type"]
            if kind == "comm_msg" and content["comm_id"] == self.comm_id:
                self.messages.append(content["data"])
            elif kind == "comm_close" and content["comm_id"] == self.comm_id:
                self.closed = True
            elif (kind == "status" and content["execution_state"] == "idle"
                  and msg["parent_header"].get("msg_id") == msg_id):
                return

    def _reply(self, msg_id: str) -> dict:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            reply = self.kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply["content"]
        raise AssertionError(f"no reply to {msg_id} within {WAIT_S:g}s")


def gone(pids: list[int], timeout: float = 15.0) -> list[int]:
    """Wait for these processes to exit; return the pids still alive."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


@pytest.fixture
def kernel():
    k = Kernel()
    yield k
    k.close()


def test_comm_is_refused_before_the_extension_is_loaded(kernel):
    panel = PanelComm(kernel)
    panel.open()
    assert panel.closed and not panel.messages


def test_job_messages_stop_and_restart(kernel):
    panel = PanelComm(kernel)
    assert panel.execute("%load_ext jupyter_hvd")["status"] == "ok"
    panel.open()
    assert not panel.closed
    assert panel.jobs() == [{"state": "none", "np": 0, "framework": "", "cells": 0, "error": "",
                             "failed_rank": None, "ranks": []}]

    reply = panel.execute("%%hvd -np 2 --framework none --no-monitor\nprint('rank', hvd.rank())")
    assert reply["status"] == "ok", reply
    assert panel.states()[1:] == ["starting", "idle", "running", "idle"], panel.states()
    job = panel.jobs()[-1]
    assert job["np"] == 2 and job["framework"] == "none" and job["cells"] == 1 and not job["error"]
    assert [r["rank"] for r in job["ranks"]] == [0, 1]
    assert all(r["alive"] and r["pid"] > 0 and r["host"] and r["device"] for r in job["ranks"]), job
    pids = [r["pid"] for r in job["ranks"]]
    assert all(psutil.pid_exists(p) for p in pids)

    reply = panel.execute("%%hvd --no-monitor\nif hvd.rank() == 1:\n    raise ValueError('bad batch')")
    assert reply["status"] == "error"
    job = panel.jobs()[-1]
    assert panel.states()[-2:] == ["running", "failed"], panel.states()
    assert job["failed_rank"] == 1 and "ValueError" in job["error"] and "bad batch" in job["error"], job
    assert "\n" not in job["error"]

    count = len(panel.messages)
    panel.send({"action": "refresh"})
    assert panel.states()[count:] == ["failed"]

    panel.send({"action": "stop"})
    job = panel.jobs()[-1]
    assert job["state"] == "stopped", panel.states()
    assert [r["pid"] for r in job["ranks"]] == pids and not any(r["alive"] for r in job["ranks"]), job
    left = gone(pids)
    assert not left, describe([psutil.Process(p) for p in left])

    count = len(panel.messages)
    panel.send({"action": "restart"})
    assert panel.states()[count:][:2] == ["starting", "idle"], panel.states()
    job = panel.jobs()[-1]
    assert job["state"] == "idle" and len(job["ranks"]) == 2 and all(r["alive"] for r in job["ranks"]), job
    assert not {r["pid"] for r in job["ranks"]} & set(pids)

    reply = panel.execute("%%hvd --no-monitor\nprint('after restart', hvd.rank())")
    assert reply["status"] == "ok", reply
    assert panel.states()[-2:] == ["running", "idle"]
    panel.send({"action": "stop"})
    assert panel.jobs()[-1]["state"] == "stopped"


def test_restart_without_a_job_is_an_error(kernel):
    panel = PanelComm(kernel)
    panel.execute("%load_ext jupyter_hvd")
    panel.open()
    panel.send({"action": "restart"})
    errors = [m for m in panel.messages if m.get("type") == "error"]
    assert len(errors) == 1 and "no ranks to restart" in errors[0]["message"], panel.messages
    assert panel.jobs()[-1]["state"] == "none"


def test_a_cell_in_the_background_keeps_the_job_running_until_it_is_waited_for(kernel):
    panel = PanelComm(kernel)
    panel.execute("%load_ext jupyter_hvd")
    panel.open()
    reply = panel.execute("%%hvd -np 2 --framework none --no-monitor --noblock\nprint('rank', hvd.rank())")
    assert reply["status"] == "ok", reply
    assert panel.states()[-1] == "running", panel.states()
    assert panel.execute("x = 1")["status"] == "ok"
    assert panel.states()[-1] == "running", panel.states()
    assert panel.execute("%hvd wait")["status"] == "ok"
    assert panel.states()[-1] == "idle", panel.states()
