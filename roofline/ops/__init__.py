"""Op builders: turn a model + scenario into typed op records per phase."""

from roofline.ops.builder import build_ops, decode_ops, layer_groups, prefill_ops
from roofline.ops.records import Op

__all__ = ["Op", "build_ops", "decode_ops", "layer_groups", "prefill_ops"]
