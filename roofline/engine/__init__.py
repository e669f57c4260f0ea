"""Serving-engine semantics: :class:`EngineConfig` and the named presets (vllm, sglang, trtllm, ideal)."""

from roofline.engine.config import EngineConfig
from roofline.engine.presets import DEFAULT_ENGINE, PRESETS, engine_preset, resolve_engine

__all__ = ["DEFAULT_ENGINE", "PRESETS", "EngineConfig", "engine_preset", "resolve_engine"]
