"""Rank side: a %%hvd rank's start (device, engine, the API bound to ``hvd``) and the state its cells share.

The framework's API (MXNet or torch take seconds to import) is imported by setup_rank(), not here. The
engine's lifecycle (init, shutdown, abort) goes through the core ``jupyter_hvd`` module, whatever framework
module is bound to ``hvd``.
"""
from __future__ import annotations

import importlib
import os
import socket
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..runner.launch import rank_place
from . import rank_shell
from .rank_stdin import refuse_keyboard
from .rank_workers import send_cell_definitions_by_value
from .frameworks import api_module
from .rank_device import pin_device


@dataclass
class RankState:
    """What a rank keeps between cells (this module lives as long as the rank's ipyparallel engine)."""

    engine: ModuleType | None = None  # the core jupyter_hvd module, once set up
    api: ModuleType | None = None  # the module bound to ``hvd`` in the cells
    device: str = "cpu"


STATE = RankState()


def setup_rank(framework: str, cpu: bool) -> dict[str, Any]:
    """Pin this rank to its device, init the engine and bind the framework's API to ``hvd`` for the cells."""
    place = rank_place()
    STATE.device = pin_device(place.local_rank, place.local_size, cpu, framework)
    rank_shell.use_inline_matplotlib()
    rank_shell.catch_exit(rank_shell.current_shell())
    rank_shell.forget_engine_options()
    refuse_keyboard(place.rank)
    send_cell_definitions_by_value()
    engine = STATE.engine = importlib.import_module("jupyter_hvd")
    STATE.api = rank_shell.current_shell().user_ns["hvd"] = importlib.import_module(api_module(framework))
    engine.init()
    return {
        "rank": place.rank,
        "local_rank": place.local_rank,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        **rank_status(),
    }


def rank_status() -> dict[str, Any]:
    """Report this rank's device, engine API module and whether its engine is initialised."""
    engine = STATE.engine
    return {
        "device": STATE.device,
        "api": getattr(STATE.api, "__name__", None),
        "initialised": bool(engine is not None and engine.is_initialized()),
    }
