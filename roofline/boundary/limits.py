"""Every limit roofline enforces on what a user passes in, in one place.

Inputs are untrusted (see SECURITY.md): spec and profile YAML, config.json files, calibration
stores, command-line values and API arguments. Each is checked at the boundary against the
limits below *before* any work proportional to it is done, so no input can make roofline hang
or exhaust memory; a value over a limit is a :class:`~roofline.errors.RooflineError` naming the
file or option, the limit and a fix. The limits are far above any real model or deployment
(each states what it is compared with) and are deliberately not configurable.

This module imports only the standard library: the CLI's option parsing uses it at start-up.
"""

from __future__ import annotations

#: Bytes of one spec, profile or config.json file. Bundled specs are < 4 kB, the largest
#: Hugging Face config.json files (DeepSeek-V3, gpt-oss) < 10 kB, a measured profile < 100 kB.
MAX_SPEC_FILE_BYTES = 4 * 2**20

#: Bytes of a calibration measurement store (``*.measurements.jsonl``). A full GPU run writes
#: about 2,000 records of < 2 kB each (< 4 MB).
MAX_STORE_FILE_BYTES = 256 * 2**20

#: Bytes of a data table read by roofline (``accuracy --data``). The shipped
#: validation/published.csv is about 110 kB.
MAX_DATA_FILE_BYTES = 64 * 2**20

#: YAML nodes after expanding anchors/aliases (scalars + mappings + sequences). A bundled
#: spec has < 200; a "billion laughs" document expands to 10^9.
MAX_YAML_NODES = 100_000

#: Nesting depth of a YAML or JSON document. Specs nest 3 levels; profiles 4.
MAX_YAML_DEPTH = 50

#: Bytes of a JSONL request trace (``--trace``). 2,000,000 requests (MAX_SIM_REQUESTS) of ~100 bytes a line
#: are ~200 MB; measured, a 35 MiB trace of 5,000 prompts carrying their 1,024 token ids grows memory by
#: 213 MiB (6 × the file), so 256 MiB bound a trace's load to about 1.5 GB.
MAX_TRACE_FILE_BYTES = 256 * 2**20

#: Decoder layers of a model spec (YAML or config.json). The deepest published LLMs have
#: 126 (Llama-3.1-405B) to 160 layers.
MAX_LAYERS = 10_000

#: Any width of a model spec (hidden size, heads, head_dim, vocabulary, experts, FFN width).
#: The largest published are a 256k vocabulary and 53,248-wide FFNs.
MAX_MODEL_DIM = 2**24

#: Tokens of one sequence (prompt + output). The longest published context window is 10M
#: tokens (Llama 4 Scout); 2^24 = 16.8M.
MAX_SEQUENCE_TOKENS = 2**24

#: Concurrent sequences of one replica (batch). Engines cap it at a few thousand
#: (vLLM ``max_num_seqs`` defaults to 256 or 1024).
MAX_BATCH = 2**20

#: GPUs in one parallelism degree (tp, pp, ep) or one replica. The largest scale-up domains
#: (TPU v5p pods) have 8,960 chips.
MAX_PARALLEL = 16_384

#: Values in one CLI list or range (``--batch 1..1000000:1``), and points in one sweep grid.
#: Measured: a 1,000,000-point sweep took 6 s and 0.75 GB as CSV but 27 s and 5 GB as JSON;
#: 200,000 points bound a JSON sweep to about 1 GB.
MAX_LIST_VALUES = 10_000
MAX_SWEEP_POINTS = 200_000

#: Points in one ``roofline.sweep`` call from Python (no text rendering): a vectorised grid of
#: 1,000,000 points takes about 1 s and a 1,000,000-row DataFrame (~0.2 GB); 5,000,000 bounds it to ~1 GB.
MAX_API_SWEEP_POINTS = 5_000_000

#: Requests per second a plan is asked to serve (the largest public services report
#: ~10^5 req/s in total), and GPUs a plan may use.
MAX_QPS = 1e9

#: Requests in one simulation (generated or replayed from a trace). Measured: 1,000,000 requests
#: peak at 328 MiB and take ~75 s on one core; 2,000,000 bounds a run to ~0.7 GB.
MAX_SIM_REQUESTS = 2_000_000
MAX_PLAN_GPUS = 10_000_000

#: Seconds of simulated time from the first arrival to the last (open-loop arrivals drawn at ``qps``, or a
#: trace's ``arrival_s``). float64 resolves 10^9 s (32 years) to 0.12 µs, a ten-thousandth of a 1 ms decode
#: step, so every step and latency keeps its precision below it; at ``qps`` 1e-308 the gaps overflow to
#: infinity and requests would never arrive. A week of traffic is 6 × 10^5 s.
MAX_SIM_SPAN_S = 1e9

#: Coefficient of variation of gamma arrival gaps (``arrival_cv``), with shape k = 1/CV². Below 10^-6 the
#: gaps equal 1/qps to 10^-12 (use ``arrival=constant``) and k overflows float64 near 10^-154; above 100
#: (k < 10^-4) nearly every gap draws as 0 and a run arrives at 8 × (2,000 requests) to 10^10 × (50) the
#: rate asked for (measured), so the run is not the load it names. vLLM's ``--burstiness`` k = 0.1 is CV 3.2.
MIN_ARRIVAL_CV = 1e-6
MAX_ARRIVAL_CV = 100.0

#: Requests of all seeded replicas of one ``simulate`` call together (replicas × num_requests, when
#: replicas > 1). Replicas after the first only add their summaries to the spread of the intervals,
#: which 8 replicas of 20,000 requests (160,000) already measure; measured, 1,000,000 requests take
#: ~75 s on one core, so 500,000 bound a call with replicas to about 40 s.
MAX_REPLICA_REQUESTS = 500_000

#: Engine instances of one pool of a disaggregated deployment (``--disagg prefill=HW:tpTxN``'s N). Each
#: instance is one engine simulation and one pass over the requests, and the link's schedule holds one
#: slot per instance: 1,024 × 2,000,000 requests is seconds. Published disaggregated deployments
#: (DeepSeek-V3's inference system, Mooncake) run tens of instances per pool.
MAX_POOL_INSTANCES = 1_024

#: Cells one ``plan_disagg`` simulates: P × D pairs (``p_max`` × ``d_max``) plus ``n_max`` co-located
#: counts, and their simulated requests together (cells × num_requests). Measured: a cell of 50 requests
#: takes ~10 ms and the default 4 × 4 + 8 cells of 1,000 requests 3.4 s (~0.14 ms a request); 1,024 cells
#: and 2,000,000 requests in all bound a plan to a few minutes.
MAX_PLAN_CELLS = 1_024
MAX_PLAN_SIM_REQUESTS = 2_000_000

#: Speculated tokens per step searched by ``spec-plan`` (``k_max``), and its (batch, k) points
#: (batches × k_max). Published draft depths are at most 16 (EAGLE-3, Medusa, MTP); for α ≤ 0.95
#: the tokens per step τ(k) gain less than 10^-4 beyond k = 256. Measured: a point takes ~2 ms, so
#: 10,000 points bound a search to about 20 s.
MAX_SPEC_K = 256
MAX_SPEC_POINTS = 10_000

#: Mean front-end seconds per request and CPU seconds per engine step (EngineConfig ``request_overhead_s``,
#: ``step_overhead_s``), and the fixed seconds per KV transfer of a disaggregated deployment (``--disagg
#: latency``, 0.1 ms by default). Measured overheads are milliseconds; an hour is far above any, and keeps the
#: per-request gamma draws and every time sum exact to well under a microsecond (at 10^300 the sum
#: send + overhead lost the send time and TTFT came out negative).
MAX_OVERHEAD_S = 3600.0

#: Bytes per second per GPU of the link between disaggregated pools (``--disagg link``). A 1 Gb/s Ethernet
#: port is 1.25 × 10^8; NVLink 5 is 1.8 × 10^12. Below 10^6 a 1,024-token prompt of a 70B model (320 MiB of
#: KV) takes five minutes to move, and at 10^-300 the transfer time is infinite.
MIN_LINK_BYTES_PER_S = 1e6
MAX_LINK_BYTES_PER_S = 1e15

#: Candidates (hardware × precision × tp) one plan evaluates. The default plan has 18 × 1 × 4;
#: measured: 180,000 candidates (``--tp 1..10000:1``) took 31 s and 1.7 GB.
MAX_PLAN_CANDIDATES = 2_000


def human_bytes(n: int) -> str:
    """'4 MiB' for the limits above (binary units, as they are defined)."""
    for unit, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= f:
            return f"{n / f:g} {unit}"
    return f"{n} B"
