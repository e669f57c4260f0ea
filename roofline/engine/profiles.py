"""Which calibration profile prices an engine on a device: the engine's own kernels where they were measured.

``roofline/data/engine_profiles/<hardware>_<engine>.yaml`` holds, for each (GPU, engine) that AIConfigurator
0.12.0's kernel tables cover, a profile fitted from that engine's own kernels on that GPU
(``roofline calibrate import-aiconfigurator --ship``; ``tests/test_engine_profiles.py`` re-derives each one from
the tables). With ``engine_kernels`` (:data:`BY_DEFAULT`) an entry point without ``calibration`` prices (hardware,
engine) with that profile, and with the shipped default profile where none exists (a device or engine the tables
do not cover, the ``ideal`` engine); every output states which it used (:func:`roofline.provenance.device_evidence`).
An explicit ``calibration`` always wins; pass a shipped file (``--calibration
roofline/data/engine_profiles/h100-sxm_vllm.yaml``) to use one.

:data:`BY_DEFAULT` is off, by measurement: on the held-out vLLM 0.15.1 runs of the BLIS study the engine profiles
cut median |ITL error| per family (Llama-3.1-8B 4.3 → 5.7 %, Mixtral-8x7B 44.7 → 5.5 %, Qwen3-14B 10.6 → 5.5 %),
but on a 438-row sample of the public closed-loop rows (large fp8/fp4 MoE models, H100/H200/B200) median |TPOT
error| goes 15.6 → 13.9 % (vLLM 10.6 → 10.3 %, SGLang 18.8 → 16.9 %) but TTFT 29.9 → 36.3 % (2026-12-03; their
fused-MoE prefill rates are below what the deployments reach): they do not generalise yet (docs/accuracy.md §15).
"""

from __future__ import annotations

import functools
from pathlib import Path

from roofline.engine.config import EngineConfig
from roofline.profile import CalibrationProfile, default_profile, load_profile

ENGINE_PROFILE_DIR = Path(__file__).resolve().parents[1] / "data" / "engine_profiles"
DEFAULT_ENGINE_NAME = "vllm"
ProfileArg = CalibrationProfile | str | Path | None
#: Whether entry points without ``calibration`` use the engine-kernel profiles (module docstring: off, measured).
BY_DEFAULT = False


def engine_profile_path(hardware: str, engine: str) -> Path:
    """Where the shipped profile of (``hardware``, ``engine``) lies (whether or not it exists)."""
    return ENGINE_PROFILE_DIR / f"{hardware}_{engine}.yaml"


@functools.lru_cache(maxsize=64)
def shipped_engine_profile(hardware: str, engine: str) -> CalibrationProfile | None:
    """The shipped profile fitted to ``engine``'s kernels on ``hardware``; None when the tables do not cover it."""
    path = engine_profile_path(hardware, engine)
    return load_profile(path) if path.is_file() else None


def shipped_engine_profiles() -> list[tuple[str, str]]:
    """(hardware, engine) of every shipped engine profile, sorted."""
    pairs = (p.stem.rsplit("_", 1) for p in sorted(ENGINE_PROFILE_DIR.glob("*_*.yaml")))
    return [(hw, eng) for hw, eng in pairs]


def engine_name(engine: EngineConfig | str | None) -> str:
    """The preset name of an engine argument (None: the default engine)."""
    if isinstance(engine, EngineConfig):
        return engine.name
    if not isinstance(engine, str):  # None, or a wrong type the engine resolver refuses by name later
        return DEFAULT_ENGINE_NAME
    from roofline.engine.presets import preset_key

    return preset_key(engine or DEFAULT_ENGINE_NAME)


def select_profile(
    calibration: ProfileArg, hardware: str, engine: EngineConfig | str | None, *, engine_kernels: bool = BY_DEFAULT
) -> CalibrationProfile:
    """``calibration`` when given; else (with ``engine_kernels``) the shipped (hardware, engine) profile; else the
    shipped default."""
    if calibration is not None:
        return load_profile(calibration)
    found = shipped_engine_profile(hardware, engine_name(engine)) if engine_kernels else None
    return found or default_profile()
