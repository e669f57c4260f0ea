"""CalibrationProfile: the fitted ceilings, efficiency curves and overheads that turn
datasheet peaks into achievable ones. Profiles are versioned YAML documents.

A ceiling is either *relative* (``efficiency`` × the datasheet peak of whatever device
is predicted) or *absolute* (``flops_per_s`` / ``bytes_per_s`` measured on the device
named by ``device``; used only when predicting that device). The default profile is
relative, derived from public microbenchmarks (see ``roofline.published.default_profile``).
"""

from __future__ import annotations

import datetime as dt
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import yaml
from numpy.typing import ArrayLike
from pydantic import Field, model_validator

from roofline.errors import CalibrationError
from roofline.profile_attention import Attention as Attention
from roofline.profile_curve import Curve as Curve
from roofline.profile_curve import WeightFormatGemm as WeightFormatGemm
from roofline.profile_curve import interp_log2 as interp_log2
from roofline.profile_moe import GroupedGemm as GroupedGemm
from roofline.profile_moe import GroupedRates as GroupedRates
from roofline.profile_moe import format_key
from roofline.specs._base import Frozen
from roofline.specs.hardware import ComputeDtype, HardwareSpec
from roofline.specs.topology import comm_path

if TYPE_CHECKING:
    from roofline.ops.records import Op

#: The op that opens a MoE call (its gated or plain up projection): the call's per-call floor is paid there once.
FIRST_GROUPED_GEMMS = frozenset({"moe.experts_gate_up", "moe.experts_up"})

SCHEMA_VERSION = 1


class Ceiling(Frozen):
    """An achievable rate: relative ``efficiency`` of the datasheet peak and/or absolute ``value``."""

    efficiency: float | None = Field(default=None, gt=0, le=1.5)
    value: float | None = Field(default=None, gt=0, description="absolute FLOP/s or bytes/s on `device`")
    spread: float | None = Field(default=None, ge=0, description="relative spread of repeats (IQR/median)")
    sources: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _one(self) -> Ceiling:
        if self.efficiency is None and self.value is None:
            raise ValueError("a ceiling needs an efficiency or an absolute value")
        return self


class GemmK(Frozen):
    """GEMM compute rate against the inner dimension K, on the devices it was measured for.

    Tensor parallelism shortens K of row-parallel GEMMs (attention output, FFN and expert down
    projections: K = width / tp); a short K leaves each output tile's prologue and epilogue a larger
    share of its time. On ``devices`` a GEMM of dtype d computes at ``curves[d](K)`` × its ceiling at
    its M (1 at the K the large-GEMM ceiling was measured at); dtypes without a curve and other
    devices get 1.
    """

    devices: tuple[str, ...] = ()
    measured_on: str | None = Field(default=None, description="the device the curves were measured on")
    curves: dict[ComputeDtype, Curve] = Field(default_factory=dict)
    sources: tuple[str, ...] = ()

    def factor(self, hardware: str, dtype: ComputeDtype, k: ArrayLike) -> float | np.ndarray:
        """Multiplier on the compute ceiling of a ``dtype`` GEMM with inner dimension ``k`` (1 when not measured)."""
        curve = self.curves.get(dtype) if hardware in self.devices else None
        return 1.0 if curve is None else curve(k)


class Overheads(Frozen):
    """Fixed costs: per kernel launch, per forward pass (scheduler, sampling, framework).

    ``per_kernel_s`` is paid by every eagerly launched kernel (prefill always; decode when the
    scenario has ``cuda_graphs=False``); ``per_kernel_graph_s`` by every kernel of a decode step
    replayed as a CUDA graph (the graph removes the host launch, leaving the GPU-side gap).
    ``graph_kernels`` says which kernel count ``per_kernel_graph_s`` was measured against, so it is paid on
    that count: ``per_op`` (one kernel per roofline op, as the default profile fitted it to whole decode steps,
    absorbing the kernels the op list does not hold) or ``engine`` (the engine's own kernels, as measured one
    by one in the engines' graph replays: the engine's kernel inventory, :mod:`roofline.engine.inventory`).
    Eager launches always pay ``per_kernel_s`` on the per-op count it was fitted against, combined with the
    GPU time as ``eager_launch`` says it was fitted: ``additive`` (op time = GPU time + kernels × ``per_kernel_s``:
    the launch never overlaps the GPU) or ``run_ahead`` (the host enqueues asynchronously and runs ahead of the
    GPU through a whole step, with no synchronisation inside a forward pass, so a step takes
    max(Σ GPU time, Σ kernels × ``per_kernel_s``) beyond its per-step cost, each kernel's GPU time carrying the
    graph-replay gap ``per_kernel_graph_s``: the host's launches are exposed only where the step's whole GPU work
    is shorter than them; :func:`roofline.costs.with_launch_floor`).
    """

    per_kernel_s: float = Field(default=0.0, ge=0)
    per_kernel_graph_s: float = Field(default=0.0, ge=0, description="fixed cost per kernel in a replayed CUDA graph")
    graph_kernels: Literal["per_op", "engine"] = "per_op"
    eager_launch: Literal["additive", "run_ahead"] = "additive"
    per_step_s: float = Field(default=0.0, ge=0)
    sources: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _per_op_overlap_retired(cls, data: Any) -> Any:
        """Refuse ``eager_launch: overlapped`` (each eager op max(GPU, host) on its own), which ``run_ahead``
        replaced: its ``per_kernel_s`` was fitted in that form and would be misread in the new one."""
        if isinstance(data, dict) and data.get("eager_launch") == "overlapped":
            raise ValueError(
                "overheads.eager_launch 'overlapped' (per-op overlap) was replaced by 'run_ahead' (the host runs "
                "ahead through a whole step); per_kernel_s fitted per op does not carry over: re-fit the profile "
                "(`roofline calibrate ...`, or `python -m roofline.published.default_profile`) or set 'additive'"
            )
        return data


class BoardPower(Frozen):
    """Board power (W) NVML read during a calibration: ``idle_watts`` with the CUDA context up and no kernel
    running (before the suites), ``busy_watts`` the mean over the samples taken while the GEMM suite ran (the
    compute-bound upper end); used for energy per token (:func:`roofline.serving.plan.procurement.board_power_w`)."""

    idle_watts: float = Field(gt=0, le=5000)
    busy_watts: float = Field(gt=0, le=5000)
    samples: int = Field(default=0, ge=0)
    source: str = "NVML nvmlDeviceGetPowerUsage during roofline calibrate"


class Comm(Frozen):
    """Collectives: fraction of the path bandwidth reached, and latency.

    Latency of one collective = ``latency_s`` (base, per collective) + hops × ``hop_latency_s``
    of the slowest link kind on its path (nvlink, xgmi, pcie, ici, ethernet, network); a link
    kind not listed costs no per-hop latency.
    """

    link_efficiency: float = Field(default=1.0, gt=0, le=1.5)
    latency_s: float = Field(default=0.0, ge=0)
    hop_latency_s: dict[str, float] = Field(default_factory=dict, description="per-hop latency by link kind (s)")
    custom_allreduce_latency_s: dict[int, float] = Field(
        default_factory=dict,
        description="GPU count -> latency (s) of one engine custom (one-/two-shot) all-reduce kernel, replacing "
        "latency_s + hops x hop latency for those ops; the nearest listed count is used; empty: not measured",
    )
    allreduce_efficiency: dict[str, dict[int, Curve]] = Field(
        default_factory=dict,
        description="launch ('graph', 'eager') -> GPU count -> fraction of the path bandwidth the engine's own "
        "all-reduce reaches against the message size (bytes), on the wire roofline plans for it (one-shot, "
        "two-shot or ring); the nearest listed count is used, 'graph' where a launch is not listed; replaces "
        "link_efficiency for all-reduces inside one node; empty: not measured",
    )
    sources: tuple[str, ...] = ()

    def allreduce_curve(self, launch: str, gpus: int) -> Curve | None:
        """The measured all-reduce efficiency curve for ``launch`` over ``gpus`` GPUs (nearest measured count; the
        graph curves where ``launch`` has none), None when not measured."""
        curves = self.allreduce_efficiency.get(launch) or self.allreduce_efficiency.get("graph")
        if not curves:
            return None
        return curves[min(curves, key=lambda p: (abs(p - gpus), p))]

    def hop_latency(self, link: str) -> float:
        """Per-hop latency (s) of ``link``; 0 when the profile does not list it."""
        return self.hop_latency_s.get(link, 0.0)

    def custom_latency(self, gpus: int) -> float | None:
        """Latency (s) of a custom all-reduce over ``gpus`` GPUs (nearest measured count), None when not measured."""
        if not self.custom_allreduce_latency_s:
            return None
        key = min(self.custom_allreduce_latency_s, key=lambda p: (abs(p - gpus), p))
        return self.custom_allreduce_latency_s[key]


class CalibrationProfile(Frozen):
    """Versioned calibration document consumed by :func:`roofline.evaluate.op_times`."""

    schema_version: Literal[1] = 1
    name: str
    device: str | None = Field(default=None, description="hardware slug measured on; None = relative profile")
    created: str = Field(default_factory=lambda: dt.date.today().isoformat())
    provenance: dict[str, Any] = Field(default_factory=dict)
    hardware: HardwareSpec | None = Field(default=None, description="spec of the measured device when not bundled")
    compute: dict[ComputeDtype, Ceiling]
    vendor_compute_efficiency: dict[str, dict[ComputeDtype, float]] = Field(default_factory=dict)
    gemm_m_efficiency: Curve
    gemm_m_efficiency_by_dtype: dict[ComputeDtype, Curve] = Field(
        default_factory=dict, description="per-format curves; formats not listed use gemm_m_efficiency"
    )
    compute_by_weight_format: dict[str, WeightFormatGemm] = Field(
        default_factory=dict,
        description="dense GEMMs whose weights are stored in this format (Precision value, e.g. fp8-block) run "
        "the kernel the engine dispatches for it: efficiency of the compute dtype's peak; formats not listed use "
        "`compute`",
    )
    gemm_memory_rate: dict[str, float] = Field(
        default_factory=dict,
        description="dense GEMMs whose weights are stored in this format (Precision value, e.g. nvfp4) stream at "
        "this share of the memory ceiling, relative to the 16-bit kernel's (formats not listed: 1)",
    )
    gemm_fixed_s: dict[str, float] = Field(
        default_factory=dict,
        description="dense GEMMs whose weights are stored in this format pay these seconds per call beyond their "
        "launches, relative to the 16-bit kernel (formats not listed: 0)",
    )
    memory: Ceiling
    memory_size_efficiency: Curve | None = None
    gemm_k: GemmK = GemmK()
    attention: Attention = Attention()
    grouped_gemm: GroupedGemm = GroupedGemm()
    overheads: Overheads = Overheads()
    comm: Comm = Comm()
    power: BoardPower | None = None
    residuals: dict[str, Any] = Field(default_factory=dict)

    # ---- ceilings -------------------------------------------------------------------
    def floor_s(self, op: Op, hardware: str = "") -> float:
        """Per-call seconds of ``op``'s kernel beyond its launches and its roofline work: an attention kernel's
        floor (:meth:`Attention.floor_s`), a dense GEMM's ``gemm_fixed_s`` of its weight format, a MoE call's
        quantised-kernel floor on its first grouped GEMM (:meth:`GroupedGemm.call_floor_s`, on ``hardware`` only
        where measured there); 0 otherwise."""
        if op.kind == "attention":
            return self.attention.floor_s(op)
        if op.kind != "gemm" or not op.weight_format:
            return 0.0
        if not op.grouped:
            return self.gemm_fixed_s.get(op.weight_format, 0.0)
        if op.name in FIRST_GROUPED_GEMMS and self.grouped_gemm.by_format:
            fmt = format_key(op.dtype, op.weight_element_bytes, op.weight_format)
            return self.grouped_gemm.call_floor_s(hardware, fmt)
        return 0.0

    def gemm_curve(self, dtype: ComputeDtype, weight_format: str = "") -> Curve:
        """GEMM efficiency against M for ``dtype``: the weight format's kernel's curve where measured
        (``compute_by_weight_format``), else the dtype's own curve when measured, else the shared one."""
        fmt = self.compute_by_weight_format.get(weight_format) if weight_format else None
        if fmt is not None and fmt.m_efficiency is not None:
            return fmt.m_efficiency
        return self.gemm_m_efficiency_by_dtype.get(dtype, self.gemm_m_efficiency)

    def gemm_compute_ceiling(self, hw: HardwareSpec, dtype: ComputeDtype, weight_format: str) -> float:
        """Large-GEMM FLOP/s of a dense GEMM in ``dtype`` whose weights are stored in ``weight_format``:
        ``compute_by_weight_format[weight_format].efficiency`` × the ``dtype`` peak where the profile measured
        that format's kernel, else :meth:`compute_ceiling`."""
        fmt = self.compute_by_weight_format.get(weight_format) if weight_format else None
        peak = hw.peak_flops_per_s(dtype)
        if fmt is None or peak is None:
            return self.compute_ceiling(hw, dtype)
        return fmt.efficiency * peak

    def _absolute(self, hw: HardwareSpec) -> bool:
        return self.device is not None and self.device == hw.name

    def compute_ceiling(self, hw: HardwareSpec, dtype: ComputeDtype) -> float:
        """Achievable large-GEMM FLOP/s for ``dtype`` on ``hw``."""
        peak = hw.peak_flops_per_s(dtype)
        c = self.compute.get(dtype) or self.compute.get("bf16")
        if c is not None and c.value is not None and self._absolute(hw) and dtype in self.compute:
            return c.value
        if peak is None:
            raise CalibrationError(f"{hw.name} has no {dtype} peak; choose a format it supports")
        eff = self.vendor_compute_efficiency.get(hw.vendor, {}).get(dtype)
        if eff is None:
            eff = c.efficiency if c is not None and c.efficiency is not None else None
        if eff is None and c is not None and c.value is not None:
            dev_peak = self.hardware.peak_flops_per_s(dtype) if self.hardware is not None else None
            eff = c.value / dev_peak if dev_peak else None
        if eff is None:
            raise CalibrationError(f"profile '{self.name}' has no usable {dtype} ceiling for {hw.name}")
        return eff * peak

    def memory_ceiling(self, hw: HardwareSpec) -> float:
        """Achievable HBM bytes/s on ``hw``."""
        m = self.memory
        if m.value is not None and self._absolute(hw):
            return m.value
        eff = m.efficiency
        if eff is None and m.value is not None and self.hardware is not None:
            eff = m.value / self.hardware.memory.bandwidth_bytes_per_s
        if eff is None:
            raise CalibrationError(f"profile '{self.name}' has no relative memory efficiency usable on {hw.name}")
        return eff * hw.memory.bandwidth_bytes_per_s

    def link_bytes_per_s(self, hw: HardwareSpec, group: int = 2) -> float:
        """Achievable per-direction bandwidth of a collective over ``group`` GPUs (its path × link efficiency)."""
        return comm_path(hw, group).bandwidth_bytes_per_s * self.comm.link_efficiency

    # ---- I/O ------------------------------------------------------------------------
    def to_yaml(self) -> str:
        """Serialise to YAML (SI floats, by field name)."""
        data = self.model_dump(mode="json", exclude_none=True)
        if self.hardware is not None:
            from roofline.specs.hardware_yaml import hardware_to_yaml_dict

            data["hardware"] = hardware_to_yaml_dict(self.hardware)
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)

    def save(self, path: str | Path, *, force: bool = True) -> Path:
        """Write atomically through :func:`roofline.boundary.outputs.write_output` and return the path.

        ``force`` False refuses to replace an existing file; non-regular targets are never replaced.
        """
        from roofline.boundary.outputs import write_output

        text = f"# roofline calibration profile, schema v{SCHEMA_VERSION}\n" + self.to_yaml()
        return write_output(path, text, force=force)


def load_profile(path_or_profile: str | Path | CalibrationProfile | None) -> CalibrationProfile:
    """A profile from a YAML path; None gives the default profile; a profile passes through."""
    if path_or_profile is None:
        return default_profile()
    if isinstance(path_or_profile, CalibrationProfile):
        return path_or_profile
    from roofline.specs.library import read_yaml, validate_spec

    if not isinstance(path_or_profile, str | Path):
        raise CalibrationError(
            f"a calibration profile is a YAML path or a CalibrationProfile, got {type(path_or_profile).__name__}"
        )
    path = Path(path_or_profile)
    try:
        exists = path.exists()
    except (OSError, ValueError):
        exists = False
    if not exists:
        raise CalibrationError(
            f"calibration profile {path} does not exist; create one with `roofline calibrate -o {path}` "
            "or omit --calibration to use the default profile"
        )
    data = read_yaml(path, CalibrationError, "calibration profile")
    return validate_spec(CalibrationProfile, data, str(path), CalibrationError)


DEFAULT_PROFILE_PATH = Path(__file__).resolve().parent / "data" / "default_profile.yaml"


@functools.lru_cache(maxsize=1)
def default_profile() -> CalibrationProfile:
    """The shipped default: datasheet × efficiencies derived from public microbenchmarks."""
    return load_profile(DEFAULT_PROFILE_PATH)


def datasheet_profile(base: CalibrationProfile | None = None, *, keep_hardware: bool = False) -> CalibrationProfile:
    """The pure roofline: peaks reached exactly, no curves, no overheads (a lower bound on time).

    The one builder of it. Without ``base``: the datasheet peaks of any bundled device. With
    ``base``: its formats and its GQA K/V re-read semantics (a property of the kernel, not an
    efficiency) are kept; ``keep_hardware`` also keeps its embedded device, whose "peaks" are
    the best measured rates (a CPU), as closed-loop validation needs.
    """
    if base is None:
        return _datasheet()
    one = Ceiling(efficiency=1.0, sources=("datasheet",))
    return base.model_copy(
        update={
            "name": f"{base.name}-datasheet" if keep_hardware else "datasheet",
            "device": None,
            "hardware": base.hardware if keep_hardware else None,
            "compute": dict.fromkeys(base.compute, one),
            "vendor_compute_efficiency": {},
            "gemm_m_efficiency": Curve(x=(1.0,), y=(1.0,)),
            "gemm_m_efficiency_by_dtype": {},
            "memory": one,
            "memory_size_efficiency": None,
            "attention": Attention(gqa_kv_reuse=base.attention.gqa_kv_reuse),
            "grouped_gemm": GroupedGemm(),
            "gemm_k": GemmK(),
            "overheads": Overheads(),
            "comm": Comm(),
        }
    )


@functools.lru_cache(maxsize=1)
def _datasheet() -> CalibrationProfile:
    one = Ceiling(efficiency=1.0, sources=("datasheet",))
    return CalibrationProfile(
        name="datasheet",
        created="2026-11-29",
        provenance={"kind": "datasheet", "notes": "all efficiencies 1, no overheads: an optimistic lower bound"},
        compute={dt: one for dt in ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")},
        gemm_m_efficiency=Curve(x=(1.0,), y=(1.0,)),
        memory=one,
    )
