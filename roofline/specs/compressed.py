"""DeepSeek-V4 hybrid compressed attention and manifold-constrained hyper-connections, as a spec block.

Read from HF ``transformers`` ``modeling_deepseek_v4.py`` (``DeepseekV4Attention``, ``DeepseekV4CSACompressor``,
``DeepseekV4HCACompressor``, ``DeepseekV4Indexer``, ``DeepseekV4HyperConnection``, ``DeepseekV4HyperHead``) and the
DeepSeek-V4 model card (https://huggingface.co/deepseek-ai/DeepSeek-V4-Flash). Every layer (mixer ``compressed``)
runs shared-KV multi-query attention: one KV head of ``head_dim`` d read as both K and V, ``num_heads`` query heads
from a low-rank query (q_a h → q_lora, q_b q_lora → H·d), per-head sinks, and a grouped low-rank output projection
(``o_groups`` g blocks of H·d/g → ``o_lora_rank`` r_o, then g·r_o → h). Its keys are

* the last ``sliding_window`` W uncompressed tokens (every layer);
* with compress ratio m > 0 (the layer's ``compress_ratio``), one compressed entry per m source tokens, a
  softmax-gated sum of the window's kv_proj (h → c·d) under gate_proj (h → c·d) + a position bias (m × c·d) and
  an RMSNorm (d). CSA (m = 4) uses overlapping windows (c = 2) and a lightning indexer that picks the
  ``index_topk`` best entries per query (``index_heads`` n × ``index_head_dim`` d_i, its own compressor at d_i,
  q_b q_lora → n·d_i, weights_proj h → n); HCA (m = 128) attends every entry (c = 1, no indexer).

Hyper-connections (``hc_mult`` n streams): each layer has two mixers (before attention, before the MoE), each a
projection of the flattened n·h streams to (2 + n)·n coefficients plus (2 + n)·n biases and 3 scales; the model
ends with a head (n × n·h, n, 1).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from roofline.specs._base import Frozen

#: compress ratios of the released checkpoints: 0 = sliding window only, 4 = CSA, 128 = HCA
CSA_RATIO = 4
HCA_RATIO = 128


class CompressedAttention(Frozen):
    """Shape of DeepSeek-V4 attention shared by every ``compressed`` layer (module docstring)."""

    head_dim: int = Field(gt=0, description="d: the one shared K=V head (512)")
    rope_head_dim: int = Field(gt=0, description="rotary dims at the end of each head (64)")
    q_lora_rank: int = Field(gt=0)
    o_groups: int = Field(gt=0)
    o_lora_rank: int = Field(gt=0)
    sliding_window: int = Field(gt=0)
    index_heads: int = Field(gt=0)
    index_head_dim: int = Field(gt=0)
    index_topk: int = Field(gt=0, description="compressed entries a CSA query attends")
    hc_mult: int = Field(gt=0, description="hyper-connection streams n")

    @model_validator(mode="after")
    def _consistent(self) -> CompressedAttention:
        if self.rope_head_dim > self.head_dim:
            raise ValueError("rope_head_dim exceeds head_dim")
        return self

    def index_cache_bytes(self) -> float:
        """Indexer key cache per compressed entry: d_i FP8 bytes + 4 B per 128 (as DSA: 132 B for 128)."""
        return self.index_head_dim + self.index_head_dim / 128 * 4

    def attention_params(self, hidden: int, heads: int, ratio: int) -> int:
        """Weights of one layer's attention at compress ratio ``ratio`` (0, 4 or 128).

        q_a h·q + q_a_norm q + q_b q·H·d + kv_proj h·d + kv_norm d + o_a H·d·r_o + o_b g·r_o·h + sinks H;
        compressor (c = 2 on CSA, 1 on HCA): kv/gate 2·h·c·d + position bias m·c·d + kv_norm d;
        CSA indexer: kv/gate 2·h·2·d_i + position bias m·2·d_i + kv_norm d_i + q_b q·n·d_i + weights_proj h·n.
        """
        h, d, q = hidden, self.head_dim, self.q_lora_rank
        n = h * q + q + q * heads * d + h * d + d + heads * d * self.o_lora_rank + self.o_groups * self.o_lora_rank * h
        n += heads
        if ratio == 0:
            return n
        c = 2 if ratio == CSA_RATIO else 1
        n += 2 * h * c * d + ratio * c * d + d
        if ratio == CSA_RATIO:
            di, ni = self.index_head_dim, self.index_heads
            n += 2 * h * 2 * di + ratio * 2 * di + di + q * ni * di + h * ni
        return n

    def hc_params(self, hidden: int, num_layers: int) -> int:
        """Hyper-connection weights: 2 per layer of (2 + n)·n × n·h + (2 + n)·n + 3, and the head n·n·h + n + 1."""
        n, h = self.hc_mult, hidden
        mixer = (2 + n) * n * n * h + (2 + n) * n + 3
        return 2 * num_layers * mixer + n * n * h + n + 1
