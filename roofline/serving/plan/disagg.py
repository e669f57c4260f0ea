"""Size the prefill:decode ratio for a load and SLOs, and compare with co-located serving at equal SLOs.

For an offered rate X (open loop, the workload of ``roofline.simulate(..., disagg=...)``) and SLOs on a TTFT and a TPOT
percentile, every P:D pair with P ≤ p_max prefill and D ≤ d_max decode instances is simulated; a pair
meets the SLOs when all requests complete and both percentiles are within their limits. The plan is the
pair with the fewest GPUs (P·tp_p·dp_p + D·tp_d·dp_d; ties: lower TPOT percentile). Co-located serving runs N
replicas of tp_c·dp_c GPUs, each taking X/N (round-robin split of a Poisson stream is Poisson at X/N); its plan
is the smallest N that meets the same SLOs. Cost per hour = GPUs × the hardware's listed price (when the
spec carries one). ``dp_prefill`` / ``dp_decode`` / ``dp_colocated`` > 1 make each instance a wide-EP MoE worker of
that many attention data-parallel ranks of tp GPUs (ep = dp × tp; :mod:`roofline.serving.sim.ranks`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from roofline.boundary.limits import MAX_PARALLEL, MAX_PLAN_CELLS, MAX_PLAN_SIM_REQUESTS
from roofline.engine.presets import EngineArg
from roofline.errors import ScenarioError
from roofline.prediction import ModelArg
from roofline.serving.plan.result import rented_gpus
from roofline.serving.simulate import simulate
from roofline.serving.workload.arrivals import LengthArg
from roofline.serving.workload.stream import Workload
from roofline.specs.disagg import DisaggConfig, Pool
from roofline.specs.library import hardware as load_hardware
from roofline.specs.moe_layout import wide_ep


@dataclass(frozen=True)
class Candidate:
    """One evaluated deployment: label, GPUs, latency percentiles (s), KV transfer mean (s), meets SLOs."""

    label: str
    gpus: int
    ttft_s: float
    tpot_s: float
    kv_transfer_s: float
    ok: bool
    usd_per_hour: float | None


@dataclass(frozen=True)
class DisaggPlan:
    """All candidates of both kinds and the cheapest that meet the SLOs (None: none does)."""

    disagg: tuple[Candidate, ...]
    colocated: tuple[Candidate, ...]

    @staticmethod
    def _pick(cands: tuple[Candidate, ...]) -> Candidate | None:
        ok = [c for c in cands if c.ok]
        return min(ok, key=lambda c: (c.gpus, c.tpot_s)) if ok else None

    @property
    def best_disagg(self) -> Candidate | None:
        """Cheapest disaggregated deployment that meets the SLOs."""
        return self._pick(self.disagg)

    @property
    def best_colocated(self) -> Candidate | None:
        """Cheapest co-located deployment that meets the SLOs."""
        return self._pick(self.colocated)


def plan_disagg(
    model: ModelArg,
    hardware: str,
    qps: float,
    *,
    tp_prefill: int = 1,
    tp_decode: int = 1,
    tp_colocated: int = 1,
    p_max: int = 4,
    d_max: int = 4,
    n_max: int = 8,
    ttft_slo_s: float = 1.0,
    tpot_slo_s: float = 0.05,
    percentile: int = 90,
    first_token: str = "prefill",
    link: float | None = None,
    prompt_len: LengthArg = 1024,
    output_len: LengthArg = 256,
    num_requests: int = 1000,
    engine: EngineArg = "vllm",
    seed: int = 0,
    engine_overrides: Mapping[str, object] | None = None,
    dp_prefill: int = 1,
    dp_decode: int = 1,
    dp_colocated: int = 1,
) -> DisaggPlan:
    """Evaluate every P:D pair and co-located replica count (see the module docstring); percentile ∈ {50, 90, 99}."""
    if percentile not in (50, 90, 99):
        raise ScenarioError(f"percentile={percentile!r} must be 50, 90 or 99")
    sizes = {"tp_prefill": tp_prefill, "tp_decode": tp_decode, "tp_colocated": tp_colocated}
    sizes |= {"dp_prefill": dp_prefill, "dp_decode": dp_decode, "dp_colocated": dp_colocated}
    for name, tp in sizes.items():
        if isinstance(tp, bool) or not isinstance(tp, int) or not 1 <= tp <= MAX_PARALLEL:
            raise ScenarioError(
                f"{name}={tp!r} must be a whole number from 1 to {MAX_PARALLEL:,} "
                "(roofline.boundary.limits MAX_PARALLEL)"
            )
    if first_token not in ("prefill", "decode"):
        raise ScenarioError(f"first_token={first_token!r} must be prefill or decode")
    for name, slo in (("ttft_slo_s", ttft_slo_s), ("tpot_slo_s", tpot_slo_s)):
        if not (isinstance(slo, int | float) and 0 < slo < float("inf")):
            raise ScenarioError(f"{name}={slo!r} must be a positive number of seconds")
    _check_plan_size(p_max, d_max, n_max, num_requests)
    price = load_hardware(hardware).price
    usd = price.usd_per_gpu_hour if price is not None else None
    inst = price.gpus_per_instance if price is not None else 1
    q = f"p{percentile}"
    wl = Workload(prompt_len=prompt_len, output_len=output_len, num_requests=num_requests, seed=seed)
    dis = []
    for p in range(1, p_max + 1):
        for d in range(1, d_max + 1):
            pools = _pool(hardware, tp_prefill, dp_prefill, p), _pool(hardware, tp_decode, dp_decode, d)
            cfg = DisaggConfig(*pools, link, first_token=first_token)  # type: ignore[arg-type]
            r = simulate(
                model, None, engine, disagg=cfg, workload=replace(wl, qps=qps), engine_overrides=engine_overrides
            )
            s = r.summary
            ttft, tpot = s[f"ttft_{q}_s"], s[f"tpot_{q}_s"]
            ok = s["completed"] == r.config["num_requests"] and ttft <= ttft_slo_s and tpot <= tpot_slo_s
            g = cfg.prefill.gpus + cfg.decode.gpus
            rent = rented_gpus(p, cfg.prefill.gpus // p, inst) + rented_gpus(d, cfg.decode.gpus // d, inst)  # own nodes
            dis.append(
                Candidate(
                    f"{p}P:{d}D", g, ttft, tpot, s["kv_transfer_mean_s"], bool(ok), None if usd is None else rent * usd
                )
            )
    col = []
    for n in range(1, n_max + 1):
        w = replace(wl, qps=qps / n)
        ep = wide_ep(tp_colocated, dp_colocated)
        sim = simulate(
            model, hardware, engine, tp_colocated, workload=w, engine_overrides=engine_overrides, dp=dp_colocated, ep=ep
        )
        ttft, tpot = sim.summary[f"ttft_{q}_s"], sim.summary[f"tpot_{q}_s"]
        ok = not sim.saturated and ttft <= ttft_slo_s and tpot <= tpot_slo_s
        per = tp_colocated * dp_colocated
        cost = None if usd is None else rented_gpus(n, per, inst) * usd
        label = f"{n}× tp{tp_colocated}" + (f"dp{dp_colocated}" if dp_colocated > 1 else "")
        col.append(Candidate(label, n * per, ttft, tpot, 0.0, bool(ok), cost))
    return DisaggPlan(tuple(dis), tuple(col))


def _pool(hardware: str, tp: int, dp: int, count: int) -> Pool:
    """``count`` instances of tp GPUs, or of dp attention-DP ranks of tp GPUs with the experts over all dp × tp."""
    return Pool(hardware, tp, count, wide_ep(tp, dp), dp)


def _check_plan_size(p_max: int, d_max: int, n_max: int, num_requests: int) -> None:
    """At most MAX_PLAN_CELLS cells (P × D + N) and MAX_PLAN_SIM_REQUESTS requests in all (roofline.boundary.limits),
    checked before the first cell is simulated."""
    for name, v in (("p_max", p_max), ("d_max", d_max), ("n_max", n_max), ("num_requests", num_requests)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ScenarioError(f"{name}={v!r} must be a whole number >= 1")
    cells = p_max * d_max + n_max
    if cells > MAX_PLAN_CELLS:
        raise ScenarioError(
            f"p_max={p_max:,} × d_max={d_max:,} + n_max={n_max:,} is {cells:,} deployments to simulate, more than "
            f"{MAX_PLAN_CELLS:,} (roofline.boundary.limits MAX_PLAN_CELLS): lower them; the defaults 4, 4 and 8 cover "
            "a P:D ratio from 1:4 to 4:1"
        )
    total = cells * num_requests
    if total > MAX_PLAN_SIM_REQUESTS:
        raise ScenarioError(
            f"{cells:,} deployments × num_requests={num_requests:,} is {total:,} simulated requests, more than "
            f"{MAX_PLAN_SIM_REQUESTS:,} (roofline.boundary.limits MAX_PLAN_SIM_REQUESTS): lower num_requests or "
            "p_max, d_max, n_max"
        )
