"""Workload generators and trace replay: distributions hit their stated moments, traces parse strictly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from roofline.errors import ScenarioError
from roofline.serving.workload.arrivals import arrival_times, parse_length
from roofline.serving.workload.trace import block_hashes, load_trace


def test_arrival_processes_have_the_stated_rate_and_cv() -> None:
    """Poisson gaps: mean 1/λ, CV 1; gamma: CV as given (k = 1/CV²); constant: CV 0; first send at 0."""
    rng = np.random.default_rng(0)
    for proc, cv in (("poisson", 1.0), ("gamma", 2.0), ("gamma", 0.5), ("constant", 0.0)):
        t = arrival_times(200_000, 4.0, proc, cv if cv else 1.0, rng)
        gaps = np.diff(t)
        assert t[0] == 0.0
        assert gaps.mean() == pytest.approx(0.25, rel=0.02)
        assert gaps.std() / gaps.mean() == pytest.approx(cv, abs=0.03)


def test_length_distributions_have_the_stated_moments() -> None:
    """lognormal(mean, CV): σ² = ln(1 + CV²), μ = ln(mean) − σ²/2 gives that mean and CV; uniform[a, b] mean (a+b)/2."""
    rng = np.random.default_rng(1)
    x = parse_length("lognormal:1000:0.5", "p").sample(200_000, rng)
    assert x.mean() == pytest.approx(1000, rel=0.01) and x.std() / x.mean() == pytest.approx(0.5, rel=0.02)
    u = parse_length({"dist": "uniform", "low": 100, "high": 300}, "p").sample(200_000, rng)
    assert u.min() == 100 and u.max() == 300 and u.mean() == pytest.approx(200, rel=0.01)
    assert list(parse_length([5, 6], "p").sample(5, rng)) == [5, 6, 5, 6, 5]
    assert parse_length(2048, "p").sample(3, rng).tolist() == [2048] * 3
    n = parse_length("normal:50:100", "p").sample(10_000, rng)
    assert n.min() >= 1


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("0", "> 0"),
        ("uniform:5:2", "LOW <= HIGH"),
        ("lognormal:100:-1", "CV"),
        ("zipf:1:2", "unknown"),
        ([1, 0, 3], ">= 1"),
        ("file:/nonexistent", "does not exist"),
        (True, "not a length"),
    ],
)
def test_bad_lengths_name_the_field(spec: object, needle: str) -> None:
    with pytest.raises(ScenarioError, match="prompt_len") as e:
        parse_length(spec, "prompt_len")
    assert needle in str(e.value)


def test_trace_accepts_benchmark_field_names(tmp_path: Path) -> None:
    """Mooncake rows (timestamp in ms, input_length, output_length, hash_ids) and ours parse alike; sorted by time."""
    p = tmp_path / "t.jsonl"
    p.write_text(
        json.dumps({"timestamp": 2500, "input_length": 700, "output_length": 9, "hash_ids": [7, 8]})
        + "\n\n"
        + json.dumps({"arrival_s": 1.0, "prompt_tokens": 100, "output_tokens": 3})
        + "\n"
    )
    tr = load_trace(p)
    assert tr.arrival_s.tolist() == [0.0, 1.5]
    assert tr.prompt_tokens.tolist() == [100, 700] and tr.output_tokens.tolist() == [3, 9]
    assert tr.hashes == [(), (7, 8)]


def test_block_hashes_chain_trace_ids() -> None:
    """Trace ids cover 512 tokens: engine blocks of 16 inside the same ids chain share hashes; a differing
    earlier id changes every later block."""
    a = block_hashes((1, 2), 1024, 16, 512)
    b = block_hashes((1, 3), 1024, 16, 512)
    c = block_hashes((9, 2), 1024, 16, 512)
    assert len(a) == 64 and a[:32] == b[:32] and a[32:] != b[32:] and not set(a) & set(c)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("not json", "line 1: not valid JSON"),
        ("[1, 2]", "line 1: expected a JSON object"),
        ('{"arrival_s": "soon", "prompt_tokens": 3, "output_tokens": 1}', "'arrival_s' must be a number"),
        ('{"arrival_s": 0, "prompt_tokens": 2.5, "output_tokens": 1}', "'prompt_tokens' must be a whole number"),
        ('{"arrival_s": 0, "prompt_tokens": 3}', "missing field 'output_tokens'"),
        ('{"arrival_s": 0, "prompt_tokens": 3, "output_tokens": 1, "hash_ids": 5}', "'hash_ids' must be a list"),
    ],
)
def test_malformed_trace_lines_name_line_and_field(tmp_path: Path, line: str, needle: str) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(line + "\n")
    with pytest.raises(ScenarioError, match=r"bad\.jsonl") as e:
        load_trace(p)
    assert needle in str(e.value)
