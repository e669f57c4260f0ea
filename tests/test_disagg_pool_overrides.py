"""Per-pool engine options of disaggregated serving: a prefill engine limited to one request at a time."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from roofline.cli.app import app
from roofline.serving.simulate import simulate

M = "llama-3.1-8b"
SPEC = "prefill=h100-sxm:tp1x1,decode=h100-sxm:tp1x1,link=50GB/s,latency=0s"
KW = dict(qps=1e9, arrival="constant", prompt_len=1024, output_len=16, num_requests=3)


def _prefill_done(**over: object) -> np.ndarray:
    r = simulate(M, disagg=SPEC, **KW, **over)  # type: ignore[arg-type]
    return np.sort(r.requests["prefill_done_s"].to_numpy())


def test_one_request_at_a_time_serialises_the_prefills() -> None:
    """GIVEN three 1,024-token prompts arriving together (1 ns apart) on one idle prefill engine: the first
    starts a step alone at once. WHEN the token budget (8,192) holds the other two THEN they share the
    next step and finish together; WHEN ``max_num_seqs`` = 1 THEN each starts when the one before ends and
    takes one solo prefill t₁ = done₁ (the first started at 0): done₂ = 2·t₁, done₃ = 3·t₁."""
    together = _prefill_done()
    assert together[2] == pytest.approx(together[1], rel=1e-12)
    serial = _prefill_done(prefill_overrides={"max_num_seqs": 1})
    assert serial[0] == pytest.approx(together[0], rel=1e-12)
    assert serial[1] == pytest.approx(2 * serial[0], rel=1e-6)
    assert serial[2] == pytest.approx(3 * serial[0], rel=1e-6)
    assert serial[2] > together[2]  # two prompts in one step beat two steps of one


def test_pool_options_stay_in_their_pool_and_win_over_the_shared_ones() -> None:
    """A decode-pool option leaves the prefill side identical; a prefill-pool option overrides the same
    option given for both pools."""
    base = _prefill_done()
    assert np.array_equal(_prefill_done(decode_overrides={"max_num_seqs": 1}), base)
    both = _prefill_done(engine_overrides={"max_num_seqs": 1}, prefill_overrides={"max_num_seqs": 8})
    assert np.array_equal(both, base)


def test_cli_pool_options_match_the_api_and_bad_ones_name_their_flag() -> None:
    args = ["simulate-disagg", M, "--disagg", SPEC, "--qps", "4", "-N", "20", "-p", "512", "-n", "16", "--json"]
    res = CliRunner().invoke(app, [*args, "--prefill-set", "max_num_seqs=1", "--decode-set", "max_num_seqs=4"])
    assert res.exit_code == 0, res.output
    api = simulate(
        M,
        disagg=SPEC,
        qps=4.0,
        num_requests=20,
        prompt_len=512,
        output_len=16,
        prefill_overrides={"max_num_seqs": 1},
        decode_overrides={"max_num_seqs": 4},
    )
    assert json.loads(res.output)["summary"]["ttft_mean_s"] == api.summary["ttft_mean_s"]
    bad = CliRunner().invoke(app, [*args, "--decode-set", "max_num_seqs"])
    assert bad.exit_code != 0 and "--decode-set" in bad.output


@pytest.mark.parametrize("field", ["engine_overrides", "prefill_overrides", "decode_overrides"])
def test_pool_options_that_are_not_a_mapping_are_named(field: str) -> None:
    from roofline.errors import ScenarioError

    with pytest.raises(ScenarioError, match=f"^{field} must map engine option names to values"):
        simulate(M, disagg=SPEC, qps=1.0, num_requests=2, **{field: "max_num_seqs=1"})  # type: ignore[arg-type]
