"""Run the measurement suites within a time budget, saving every record as it finishes.

Bad conditions never end the run: an out-of-memory size is skipped with its reason, a
non-finite or absurd timing is rejected with a note, an unsupported dtype is skipped
once, any other error of a case is recorded, and Ctrl-C stops the suites while keeping
everything measured. Under torchrun (WORLD_SIZE > 1) the collectives run first on every
rank, rank 0 deciding for all; then only rank 0 goes on with the other suites.
"""

from __future__ import annotations

import datetime as dt
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, TypedDict

from calibrate.measure import device as devmod
from calibrate.measure.budget import WEIGHTS, Budget, Rates, reserve_s
from calibrate.measure.buffers import Pool
from calibrate.measure.context import (
    CPU_SHAPES,
    CPU_SHAPES_QUICK,
    GPU_SHAPES,
    GPU_SHAPES_QUICK,
    AttnShape,
    SuiteContext,
    World,
    default_dtypes,
    model_shapes,
)
from calibrate.measure.env import CpuInfo, GpuInfo, ThreadInfo, Versions, cpu_info, gpu_info, thread_info, versions
from calibrate.measure.nvml import snapshot
from calibrate.measure.records import SUITES, Case, Record, RunLog, Skip, make_record, now_iso
from calibrate.measure.store import Store, measurements_path
from calibrate.measure.timing import CudaTimer, HostTimer, Timer, check_timing
from calibrate.suites import SUITE_CASES

if TYPE_CHECKING:
    from roofline.specs.jsontypes import JsonObject

RUN, REUSE, STOP, PASS = 1, 0, -1, 2
ProgressFn = Callable[[str, str, str, float], None]  # suite, key, status, elapsed seconds


@dataclass
class RunConfig:
    """What to measure and where to save it (see ``calibrate.cli.run_calibration``)."""

    device: str = "cpu"
    budget_s: float = 60.0
    model: str | None = None
    tp: int = 1
    output: Path = Path("calibration.yaml")
    resume: bool = False
    quick: bool = False
    threads: int | None = 1
    dtypes: tuple[str, ...] | None = None
    suites: tuple[str, ...] | None = None


class RunInfo(TypedDict, total=False):
    """The measuring environment of a run, as its profile's provenance records it."""

    versions: Versions
    cpu: CpuInfo
    gpu: GpuInfo
    threads: ThreadInfo
    nvml_before: JsonObject
    nvml_after: JsonObject
    gemm_power_samples_w: list[float]
    pool_bytes: int
    llc_bytes: int
    started: str
    finished: str


@dataclass
class RunResult:
    """Records (this run's and reused ones), environment, counts and how the run ended."""

    records: list[Record]
    target: devmod.Target
    info: RunInfo
    log: RunLog
    interrupted: bool
    wall_s: float
    world: World
    store_path: Path
    reused: int = 0
    notes: list[str] = field(default_factory=list)


def import_torch() -> ModuleType:
    """torch, imported only when measuring."""
    import torch

    return torch


def _is_oom(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or "out of memory" in text or "can't allocate memory" in text


class Runner:
    """One calibration run; see the module docstring."""

    def __init__(
        self,
        cfg: RunConfig,
        progress: ProgressFn | None = None,
        on_record: Callable[[Record], None] | None = None,
        start: float | None = None,
    ) -> None:
        """``start``: time.monotonic() when the run began (default now); the budget counts from it."""
        self.cfg = cfg
        self.progress = progress
        self.on_record = on_record
        self.budget = Budget(cfg.budget_s - reserve_s(cfg.budget_s), start=start)
        self.torch = import_torch()
        self.world = World.from_env()
        self.target = devmod.resolve(self.torch, cfg.device, self.world)
        self.log = RunLog()
        self.measured: set[str] = set()  # keys measured in this run
        self.passed: set[str] = set()  # suites with cases passed over for lack of time
        self.unmeasured: dict[str, tuple[str, str]] = {}  # key -> (suite, why) for cases not run
        self.notes: list[str] = [self.target.note] if self.target.note else []

    # ---- set-up -----------------------------------------------------------------------
    def _context(self) -> SuiteContext:
        torch, t, cfg = self.torch, self.target, self.cfg
        cpu = cpu_info()
        self.info: RunInfo = {"versions": versions(torch), "cpu": cpu, "started": now_iso()}
        capability = None
        if t.is_cuda:
            torch.cuda.set_device(t.index)
            g = gpu_info(torch, t.index)
            self.info["gpu"] = g
            self.info["nvml_before"] = snapshot(g.get("uuid"), t.index)
            maj, mino = (int(x) for x in g["capability"].split("."))
            capability = (maj, mino)
            llc = g.get("l2_cache_bytes") or (t.datasheet.l2_cache_bytes if t.datasheet else None) or 50 * 2**20
        else:
            llc = cpu["llc_bytes"]
        self.info["threads"] = thread_info(torch)
        if cfg.model:
            shapes, attn = model_shapes(cfg.model, cfg.tp)
        elif t.is_cuda:
            shapes, attn = (GPU_SHAPES_QUICK if cfg.quick else GPU_SHAPES), AttnShape()
        else:
            shapes, attn = (CPU_SHAPES_QUICK if cfg.quick else CPU_SHAPES), AttnShape()
        pool = Pool(
            torch,
            t.device,
            devmod.pool_bytes(torch, t, int(llc), cpu["mem_available_bytes"]),
            int(llc),
            max_views=512 if t.is_cuda else 4096,
        )
        self.info["pool_bytes"], self.info["llc_bytes"] = pool.nbytes, int(llc)
        dtypes = cfg.dtypes or default_dtypes(torch, t.is_cuda, capability)
        return SuiteContext(
            torch,
            t.device,
            t.is_cuda,
            cfg.quick,
            pool,
            tuple(dtypes),
            shapes,
            attn,
            self.world,
            capability,
            cpu["mem_available_bytes"],
        )

    def _timers(self) -> tuple[Timer, Timer]:
        torch, quick = self.torch, self.cfg.quick
        self.rounds = 5 if quick else 7
        self.round_s = (0.001 if quick else 0.002) if self.target.is_cuda else (0.01 if quick else 0.02)
        sync = torch.cuda.synchronize if self.target.is_cuda else None
        host = HostTimer(self.rounds, self.round_s if not self.target.is_cuda else 0.005, sync=sync)
        dev: Timer = CudaTimer(torch, self.rounds, self.round_s) if self.target.is_cuda else host
        return host, dev

    # ---- the run ------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Measure every suite within the budget; Ctrl-C ends early, keeping what was measured."""
        torch, t, cfg = self.torch, self.target, self.cfg
        old_threads = torch.get_num_threads()
        if not t.is_cuda and cfg.threads:
            torch.set_num_threads(cfg.threads)
        threads = torch.get_num_threads()
        interrupted = False
        try:
            self._init_distributed()
            self.ctx = ctx = self._context()
            header = {
                "device": t.label,
                "device_name": t.name if t.is_cuda else ctx_cpu_name(self.info),
                "threads": None if t.is_cuda else threads,
                "world_size": self.world.size,
                "created": now_iso(),
            }
            self.store = Store(measurements_path(cfg.output), header, cfg.resume, write=self.world.rank == 0)
            self.host, self.dev = host, dev = self._timers()
            self.rates = Rates(devmod.initial_rates(t, threads))
            self.max_flops, self.max_bw = devmod.limits(t, threads)
            self.max_call_s = 0.25 if t.is_cuda else (0.3 if cfg.quick else 0.6)
            try:
                self._passes(ctx, host, dev)
            except KeyboardInterrupt:
                interrupted = True
                self.notes.append("interrupted (Ctrl-C): suites stopped; the profile is fitted from what was measured")
            if t.is_cuda:
                self.info["nvml_after"] = snapshot(self.info["gpu"].get("uuid"), t.index)
            self.info["finished"] = now_iso()
        finally:
            torch.set_num_threads(old_threads)
        return RunResult(
            self.store.records(),
            t,
            self.info,
            self.log,
            interrupted,
            self.budget.elapsed(),
            self.world,
            self.store.path,
            len(self.store.reused),
            self.notes,
        )

    def _passes(self, ctx: SuiteContext, host: Timer, dev: Timer) -> None:
        """First pass over every suite by weight; a second pass spends what is left on the
        cases the first one passed over for lack of time."""
        order = self._order()
        weights = {**WEIGHTS, "collective": WEIGHTS["collective"] if self.world.size > 1 else 0.01}
        for i, suite in enumerate(order):
            self.budget.begin_suite(suite, order[i:], weights)
            self._sampled_suite(suite, ctx, host, dev)
        again = [s for s in order if s in self.passed and s != "collective"]
        try:
            for i, suite in enumerate(again):
                if self.budget.remaining() < 1.0:
                    break
                self.budget.begin_suite(suite, again[i:], weights)
                self._run_suite(suite, ctx, host, dev)
        finally:
            for key, (suite, why) in self.unmeasured.items():
                if key not in self.measured:
                    self.log.add(suite, why)

    def _sampled_suite(self, suite: str, ctx: SuiteContext, host: Timer, dev: Timer) -> None:
        """Run ``suite``; for the GEMM suite on an NVIDIA GPU, sample the board power meanwhile (NVML) into
        ``info['gemm_power_samples_w']`` (:mod:`calibrate.measure.power`)."""
        from calibrate.measure.nvml import nvml_power_reader
        from calibrate.measure.power import PowerSampler

        read = (
            nvml_power_reader(self.info.get("gpu", {}).get("uuid"), self.target.index)
            if (suite == "gemm" and self.target.is_cuda)
            else None
        )
        sampler = PowerSampler(read) if read is not None else None
        if sampler is not None:
            sampler.start()
        try:
            self._run_suite(suite, ctx, host, dev)
        finally:
            if sampler is not None:
                self.info.setdefault("gemm_power_samples_w", []).extend(sampler.stop())

    def _order(self) -> list[str]:
        wanted = list(self.cfg.suites or SUITES)
        if self.world.size > 1 and "collective" in wanted:
            wanted = ["collective"] + [s for s in wanted if s != "collective"]
        return wanted if self.world.rank == 0 else [s for s in wanted if s == "collective"]

    def _init_distributed(self) -> None:
        if self.world.size <= 1:
            return
        import torch.distributed as dist

        if not dist.is_initialized():
            backend = "nccl" if self.target.is_cuda else "gloo"
            if self.target.is_cuda:
                self.torch.cuda.set_device(self.target.index)
            timeout = dt.timedelta(seconds=max(900.0, 4 * self.cfg.budget_s))
            dist.init_process_group(backend, timeout=timeout)

    def _decide(self, case: Case) -> int:
        if case.key in self.measured:
            return PASS
        if self.store.done(case.key):
            return REUSE
        if self.budget.suite_over():
            return STOP
        if self.rates.call_s(case) > self.max_call_s:
            self.unmeasured[case.key] = (case.suite, "too_slow")
            return PASS
        if not self.budget.fits(self.rates.case_s(case, self.rounds, self.round_s)):
            self.passed.add(case.suite)
            self.unmeasured.setdefault(case.key, (case.suite, "budget"))
            return PASS
        return RUN

    def _agree(self, decision: int, suite: str) -> int:
        """All ranks take rank 0's decision for collective cases."""
        if self.world.size <= 1 or suite != "collective":
            return decision
        import torch.distributed as dist

        dev = self.target.device if self.target.is_cuda else "cpu"
        flag = self.torch.tensor([decision], dtype=self.torch.int64, device=dev)
        dist.broadcast(flag, src=0)
        return int(flag.item())

    def _run_suite(self, suite: str, ctx: SuiteContext, host: Timer, dev: Timer) -> None:
        self.log.stopped.pop(suite, None)
        cases = SUITE_CASES[suite](ctx)
        for case in cases:
            decision = self._agree(self._decide(case) if self.world.rank == 0 else RUN, suite)
            if decision == STOP:
                self.log.stopped[suite] = f"budget used up after {self.budget.elapsed():.1f} s"
                self.passed.add(suite)
                for rest in [case, *cases]:  # cheap: cases allocate nothing until built
                    if rest.key not in self.measured and not self.store.done(rest.key):
                        self.unmeasured.setdefault(rest.key, (suite, "budget"))
                break
            if decision == REUSE:
                if case.key not in self.store.reused:
                    self.store.reuse(case.key)
                    self.log.add(suite, "reused")
                continue
            if decision == PASS:
                continue
            rec = self._measure(case, ctx, host, dev)
            self.measured.add(case.key)
            self.store.add(rec)
            self.rates.update(case, rec)
            self.log.add(suite, rec["status"])
            if self.progress is not None:
                self.progress(suite, case.key, rec["status"], self.budget.elapsed())
            if self.on_record is not None:
                self.on_record(rec)

    def _measure(self, case: Case, ctx: SuiteContext, host: Timer, dev: Timer) -> Record:
        t0 = time.perf_counter()
        bench = None
        oom = False
        try:
            avail = ctx.mem_available
            if not ctx.is_cuda and avail and case.alloc_bytes > avail // 2:
                raise Skip(f"needs about {case.alloc_bytes / 1e9:.1f} GB but only {avail / 1e9:.1f} GB is available")
            bench = case.build()
            timing = (dev if bench.timing == "device" else host).measure(bench)
            q = case.params
            dtype = str(q.get("dtype", "fp32"))
            problem = check_timing(
                timing, float(q.get("flops", 0)), float(q.get("bytes", 0)), self.max_flops.get(dtype, 1e17), self.max_bw
            )
            rec = make_record(
                case,
                "rejected" if problem else "ok",
                problem or timing.note,
                median_s=timing.median_s,
                spread=timing.spread,
                samples_s=list(timing.samples_s),
                calls_per_round=timing.calls_per_round,
                method=timing.method,
            )
        except Skip as exc:
            rec = make_record(case, "skipped", str(exc))
        except (RuntimeError, MemoryError, ValueError, TypeError, NotImplementedError) as exc:
            oom = _is_oom(exc)
            first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            rec = (
                make_record(case, "skipped", f"out of memory at this size: {first}")
                if oom
                else make_record(case, "error", f"{type(exc).__name__}: {first}")
            )
        finally:
            del bench
            if oom:
                gc.collect()
                if ctx.is_cuda:
                    self.torch.cuda.empty_cache()
        rec["wall_s"] = round(time.perf_counter() - t0, 4)
        return rec


def ctx_cpu_name(info: RunInfo) -> str:
    """CPU model name from the environment info."""
    return str(info.get("cpu", {}).get("model_name", "cpu"))
