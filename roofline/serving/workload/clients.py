"""The common benchmark clients as data: how each sends and times requests (``--client``, ``Workload.client``).

``roofline/data/clients.yaml`` states, per tool at a version and each value cited from its source, the load it
offers (a request rate, possibly capped by ``max_concurrency``, or C closed-loop workers), its burstiness, its
warm-up (how many requests, whether it waits for them to finish before measuring, whether they count), whether
its workers start at once or ramp, and what its TTFT / TPOT / ITL measure. :func:`with_client` applies a tool's
protocol to a workload: fields the workload sets itself win; the rest take the tool's defaults:

* a rate tool's ``burstiness`` k → gamma arrivals of CV 1/√k (k = 1: Poisson; none: a constant interval);
* warm-up W = ``warmup_requests`` + ``warmup_per_concurrency`` × C on client-driven sends (closed loop, or a
  capped rate); an uncapped rate's drained warm-up leaves an empty engine, i.e. a cold start, and is not
  simulated (with a shared prefix it would warm the cache: give ``warmup=`` and ``max_concurrency=`` then);
* ``ramp_s``: closed-loop workers start spread over it.

``ideal`` is the simulator's own protocol (every request counted from a cold start, all C workers at once, no
warm-up). The simulator times what these tools time: TTFT from the send to the first token, TPOT per request
(E2E − TTFT)/(output − 1) averaged over requests, ITL over every inter-token gap.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.errors import ScenarioError, suggest

if TYPE_CHECKING:
    from roofline.serving.workload.stream import Workload

CLIENTS_PATH = Path(__file__).resolve().parents[2] / "data" / "clients.yaml"
PROTOCOL_FIELDS = ("load", "burstiness", "max_concurrency", "warmup_requests", "warmup_per_concurrency",
                   "warmup_drained", "ramp_s")  # fmt: skip
IDEAL: dict[str, Any] = {
    "tool": "roofline's own protocol",
    "version": "-",
    "load": "either",
    "burstiness": 1.0,
    "max_concurrency": None,
    "warmup_requests": 0,
    "warmup_per_concurrency": 0,
    "warmup_drained": True,
    "ramp_s": 0.0,
    "ttft": "send to first token",
    "tpot": "(E2E - TTFT)/(output - 1) per request, mean over requests",
    "itl": "every inter-token gap",
    "sources": {"load": "roofline.serving.simulate (every request counted from a cold start)"},
}


@functools.cache
def clients() -> dict[str, dict[str, Any]]:
    """Every benchmark client by name: the shipped file's, and ``ideal``."""
    import yaml

    data = yaml.safe_load(CLIENTS_PATH.read_text(encoding="utf-8")) if CLIENTS_PATH.is_file() else {}
    return {**{k: v for k, v in (data or {}).items() if isinstance(v, dict)}, "ideal": IDEAL}


def client(name: str) -> dict[str, Any]:
    """The protocol of client ``name``; a ScenarioError naming the known ones (and the nearest) otherwise."""
    known = clients()
    if name not in known:
        hint = suggest(name, list(known))
        raise ScenarioError(f"unknown client {name!r}{hint}; known clients: {', '.join(sorted(known))}")
    return known[name]


def with_client(wl: Workload) -> Workload:
    """``wl`` with its client's protocol applied (module docstring), and ``client`` cleared."""
    c = client(str(wl.client))
    rate = wl.qps is not None  # every tool has both modes; ``load`` is the one it runs by default
    update: dict[str, Any] = {"client": None}
    k = c.get("burstiness", 1.0)
    if rate and wl.arrival == "poisson" and k is None:  # a constant interval (perf_analyzer's rate mode)
        update["arrival"] = "constant"
    elif rate and wl.arrival == "poisson" and float(k) != 1.0:
        update |= {"arrival": "gamma", "arrival_cv": 1.0 / math.sqrt(float(k))}
    if rate and wl.max_concurrency is None and c.get("max_concurrency") is not None:
        update["max_concurrency"] = int(c["max_concurrency"])
    slots = wl.concurrency if wl.concurrency is not None else update.get("max_concurrency", wl.max_concurrency)
    if wl.warmup == 0 and slots is not None:
        update["warmup"] = int(c.get("warmup_requests") or 0) + int(c.get("warmup_per_concurrency") or 0) * slots
        update["warmup_drained"] = bool(c.get("warmup_drained", True))
    if wl.ramp_s == 0 and wl.concurrency is not None:
        update["ramp_s"] = float(c.get("ramp_s") or 0.0)
    return dataclasses.replace(wl, **update)


def client_table() -> str:
    """One line per client: tool, version, load, warm-up and timing conventions."""
    lines = []
    for name, c in sorted(clients().items()):
        warm = f"{c.get('warmup_requests') or 0} + {c.get('warmup_per_concurrency') or 0}·C"
        drained = "drained" if c.get("warmup_drained", True) else "not drained"
        lines.append(
            f"{name:15s} {c.get('tool', '')} {c.get('version', '')}: load {c.get('load')}, burstiness "
            f"{c.get('burstiness', 1.0)}, max concurrency {c.get('max_concurrency')}, warm-up {warm} ({drained}), "
            f"ramp {c.get('ramp_s', 0)} s; TTFT {c.get('ttft', '')}"
        )
    return "\n".join(lines)
