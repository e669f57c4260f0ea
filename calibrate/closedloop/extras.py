"""Kernels the eager torch model runs beyond the cost model's op list, priced by the same evaluator.

The cost model describes a serving engine with fused kernels: one SwiGLU kernel (3 passes),
one KV-cache write, and RoPE fused away. Eager torch cannot fuse, so per layer the validation
model (:mod:`calibrate.closedloop.model_ops`) also runs, for M = B·T tokens, activation bytes ``a``:

* **RoPE** over Q and K: M·(hq + hkv)·d elements read and written (fp32: one complex
  multiply, 2 passes; bf16/fp16: cast up, multiply, cast down — 3 kernels, 20 bytes/element);
* **SwiGLU as two kernels**: ``silu`` then ``mul`` make 5 passes over M·i instead of the
  fused kernel's 3, so one extra kernel and 2 extra passes;
* **the V copy**: K and V are written by two copy kernels that also read their source, so
  one extra kernel and M·2·hkv·d·a bytes read.

(The residual adds ride on the O and down GEMMs, ``addmm`` with β = 1, so they add no kernel.)
Each extra is an ``elementwise`` op record evaluated by :func:`roofline.evaluate.op_time` with
the same profile, so no number here is fitted. ``prediction + extras`` is the prediction of
the kernels the model really runs; the bare prediction is reported beside it.
"""

from __future__ import annotations

from typing import Literal

from roofline.evaluate import op_time
from roofline.ops.records import Op, elementwise
from roofline.profile import CalibrationProfile
from roofline.specs.hardware import ComputeDtype, HardwareSpec
from roofline.specs.model import ModelSpec

A_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0}


def eager_extra_ops(
    spec: ModelSpec, phase: Literal["prefill", "decode"], batch: int, tokens: int, dtype: str, graphs: bool
) -> list[Op]:
    """The extra kernels of one forward pass (all layers): prefill of ``tokens`` or one decode step."""
    a = spec.attention
    a_bytes = A_BYTES[dtype]
    dt: ComputeDtype = "fp32" if dtype == "fp32" else "bf16" if dtype == "bf16" else "fp16"
    m = batch * (tokens if phase == "prefill" else 1)
    layers = spec.num_layers
    half = dtype != "fp32"
    qk, v_read = m * (a.num_heads + a.num_kv_heads) * a.head_dim, m * 2 * a.num_kv_heads * a.head_dim
    rope = elementwise("eager.rope", "attention", "model", layers, dt, qk, 20.0 / a_bytes if half else 2.0, a_bytes)
    ops = [
        Op(**{**rope.__dict__, "kernels": 3 if half else 1}),
        elementwise("eager.v_copy_read", "attention", "model", layers, dt, v_read, 1.0, a_bytes, flops_per_elem=0.0),
    ]
    if spec.ffn.kind == "gated" and spec.num_dense_layers:
        elems = m * spec.ffn.intermediate_size
        ops.append(elementwise("eager.swiglu_mul", "ffn", "model", spec.num_dense_layers, dt, elems, 2.0, a_bytes))
    launch = "graph" if graphs and phase == "decode" else "eager"
    return [Op(**{**op.__dict__, "launch": launch}) for op in ops]


def eager_extra_s(
    spec: ModelSpec,
    hw: HardwareSpec,
    prof: CalibrationProfile,
    phase: Literal["prefill", "decode"],
    batch: int,
    tokens: int,
    dtype: str,
    graphs: bool,
) -> float:
    """Seconds of :func:`eager_extra_ops` under ``prof`` on ``hw`` (Σ count × op time)."""
    ops = eager_extra_ops(spec, phase, batch, tokens, dtype, graphs)
    return float(sum(op.count * float(op_time(op, hw, prof).time_s) for op in ops))
