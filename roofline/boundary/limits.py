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

#: Candidates (hardware × precision × tp) one plan evaluates. The default plan has 18 × 1 × 4;
#: measured: 180,000 candidates (``--tp 1..10000:1``) took 31 s and 1.7 GB.
MAX_PLAN_CANDIDATES = 2_000


def human_bytes(n: int) -> str:
    """'4 MiB' for the limits above (binary units, as they are defined)."""
    for unit, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= f:
            return f"{n / f:g} {unit}"
    return f"{n} B"
