"""P:D sizing against co-located serving at equal SLOs."""

from __future__ import annotations

from roofline.serving.plan.disagg import plan_disagg


def test_pd_plan_is_cheapest_feasible_and_beats_colocation_on_tight_tpot() -> None:
    """Llama-3.1-8B on H100, 40 req/s of 2048-token prompts, 256 outputs; SLOs p90 TTFT ≤ 0.3 s, TPOT ≤ 12 ms.

    Co-located replicas mix 2048-token prefill chunks into their decode steps, so their TPOT p90 stays
    above 12 ms until the load per replica is small (≥ 8 replicas here); a decode pool sees no prefill,
    so 3 decode GPUs hold TPOT while 2 prefill GPUs keep TTFT under 0.3 s: fewer GPUs in all.
    Invariants: the chosen plan meets both SLOs and every candidate with fewer GPUs misses one.
    """
    pl = plan_disagg(
        "llama-3.1-8b",
        "h100-sxm",
        40.0,
        ttft_slo_s=0.3,
        tpot_slo_s=0.012,
        p_max=3,
        d_max=3,
        n_max=10,
        num_requests=600,
        prompt_len=2048,
        output_len=256,
    )
    bd, bc = pl.best_disagg, pl.best_colocated
    assert bd is not None and bc is not None
    assert bd.ok and bd.ttft_s <= 0.3 and bd.tpot_s <= 0.012
    assert all(not c.ok for c in pl.disagg if c.gpus < bd.gpus)
    assert all(not c.ok for c in pl.colocated if c.gpus < bc.gpus)
    assert bd.gpus < bc.gpus
    assert bd.kv_transfer_s > 2048 * 131_072 / 50e9  # at least one transfer's link time (plus queueing)


def test_cli_plan_disagg() -> None:
    import json

    from typer.testing import CliRunner

    from roofline.cli.app import app

    args = [
        "plan-disagg",
        "llama-3.1-8b",
        "h100-sxm",
        "--qps",
        "5",
        "--ttft",
        "1s",
        "--tpot",
        "50ms",
        "--p-max",
        "1",
        "--d-max",
        "2",
        "--n-max",
        "2",
        "-p",
        "512",
        "-n",
        "64",
        "-N",
        "100",
    ]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["best_disagg"]["label"] == "1P:1D" and doc["best_colocated"]["gpus"] == 1
    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0 and "KV transfer ms" in table.output
    none = CliRunner().invoke(app, [*args[:5], "--ttft", "1us", *args[7:]])
    assert none.exit_code != 0 and "no deployment" in none.output and "Traceback" not in none.output


def test_pools_of_attention_dp_workers_are_counted_by_their_gpus() -> None:
    """P:D with wide-EP workers: a prefill instance of 2 DP ranks and a decode instance of 4 (one GPU each) count
    2·P + 4·D GPUs; a co-located replica of 4 ranks counts 4 per replica."""
    from roofline.serving.plan.disagg import plan_disagg

    sizes = {"dp_prefill": 2, "dp_decode": 4, "dp_colocated": 4, "p_max": 2, "d_max": 1, "n_max": 1}
    res = plan_disagg("qwen3-30b-a3b", "h100-sxm", 5.0, num_requests=60, **sizes)
    assert [(c.label, c.gpus) for c in res.disagg] == [("1P:1D", 6), ("2P:1D", 8)]
    assert [(c.label, c.gpus) for c in res.colocated] == [("1× tp1dp4", 4)]
