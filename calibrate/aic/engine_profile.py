"""One CalibrationProfile per (GPU, engine) fitted from that engine's own kernels: the profiles roofline ships.

The default profile is the base; each step below replaces only the parameters it fits, from the rows of the regime
the parameter describes, and subtracts what the earlier steps priced (formulas in each module):

1. ``overheads.per_kernel_graph_s``: latency-bound bf16 GEMM rows (:func:`calibrate.aic.latency.fit_per_kernel`);
2. ``attention.decode_fixed_s`` / ``prefill_fixed_s`` / ``mla_decode_fixed_s``: the decode / context attention /
   decode MLA calls that are one short pass (:func:`~calibrate.aic.latency.fit_attention_floor`), and the decode
   calls from an fp8 cache their own (``attention.decode_fixed_by_kv``: its dequantising kernel); then
   ``attention.decode_rate``: each decode kernel's share of the memory ceiling, per KV format and family, from the
   memory-bound calls past the floor (:func:`~calibrate.aic.latency.fit_decode_rates`);
3. ``comm.custom_allreduce_latency_s``: latency-bound custom all-reduce rows per GPU count
   (:func:`~calibrate.aic.latency.fit_custom_allreduce`); then ``comm.allreduce_efficiency``: the engine's
   all-reduce against message size per launch and GPU count from the bandwidth-bound rows of the same table
   (:func:`calibrate.aic.allreduce.fit_allreduce_efficiency`);
4. ``attention.prefill_compute_efficiency``: each head dim's prefill curve from the context-attention rows
   (:func:`calibrate.aic.attention.fit_prefill`), then ``attention.prefill_kv_rate``: each quantised KV format's rate
   relative to those curves from its own rows (:func:`~calibrate.aic.attention.fit_prefill_kv_rates`), and the MLA
   prefill kernel's own curve from the context-MLA table (:func:`~calibrate.aic.attention.fit_mla_prefill`);
5. the GEMM rates per format (large-GEMM efficiency and its curve against M, and each weight format's dispatched
   kernel): layer-shaped compute-bound GEMM rows (:mod:`calibrate.aic.fit`); then each quantised kernel's
   weight-streaming rate and per-call floor relative to the 16-bit GEMM (``gemm_memory_rate``, ``gemm_fixed_s``)
   from the decode-sized rows (:mod:`calibrate.aic.gemm_kernels`);
6. ``grouped_gemm``: memory- and compute-bound balanced MoE rows (:func:`calibrate.aic.moe.fit_grouped`), the 16-bit
   kernel's rates and each quantised kernel's own (``by_format``: fp8, 4-bit weight-only, NVFP4), each from the
   newest table that holds that format; and every layer shape the 16-bit rows measure as its own measured seconds
   (``layers``, :func:`calibrate.aic.moe.layer_curves`, :data:`LAYER_FITS`); then each activation-quantising
   kernel's per-call floor from its few-token rows (``by_format[...].fixed_s``, :mod:`calibrate.aic.moe_floor`).

Each (GPU, engine) uses the newest version of each table kind the engine has on that GPU (the version is recorded
per step). A step whose table is missing, or has too few rows in its regime, keeps the default's value and says so
in ``provenance.kept``. The profile is relative (``device`` None: efficiencies of the datasheet peaks), named
``<hardware>_<engine>``; ``provenance.hardware`` names the GPU it was measured on.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from calibrate.aic import allreduce, attention, latency
from calibrate.aic.compare import moe_format_key
from calibrate.aic.fit import fit_format, fit_record, fittable, with_efficiency
from calibrate.aic.gemm_kernels import fit_gemm_kernels, with_gemm_kernels
from calibrate.aic.moe import GroupedFit, fit_grouped, fit_rows
from calibrate.aic.moe_floor import with_call_floors
from calibrate.aic.tables import AIC_HARDWARE, AIC_VERSION, AicTable, load_table, tables_newest_first
from roofline.errors import CalibrationError
from roofline.ops.records import Phase
from roofline.profile import CalibrationProfile, Curve, default_profile
from roofline.specs.hardware import HardwareSpec
from roofline.specs.library import hardware

ENGINES = ("vllm", "sglang", "trtllm")
MIN_MOE_ROWS = 20  # balanced rows of a format a table must hold to be fitted from
SOURCE = f"aiconfigurator-core {AIC_VERSION}"


def newest_table(gpu: str, framework: str, kind: str, root: Path | None = None) -> AicTable | None:
    """The newest-version table of ``kind`` (gemm, moe, custom_allreduce, generation_attention) or None."""
    tables = tables_newest_first(gpu, framework, kind, root)
    return tables[0] if tables else None


def shippable(root: Path | None = None) -> list[tuple[str, str]]:
    """(AIC gpu, engine) pairs with a mapped roofline GPU and a GEMM table: the profiles roofline ships."""
    return [
        (gpu, eng)
        for gpu in sorted(AIC_HARDWARE)
        for eng in ENGINES
        if newest_table(gpu, eng, "gemm", root) is not None
    ]


def _latencies(
    gpu: str, eng: str, hw: HardwareSpec, prof: CalibrationProfile, root: Path | None, notes: dict[str, Any]
) -> CalibrationProfile:
    """Steps 1–3 (module docstring) on ``prof``; fits and kept parameters recorded in ``notes``."""
    t = newest_table(gpu, eng, "gemm", root)
    f = latency.fit_per_kernel(load_table(t), hw, prof, t.label) if t is not None else None
    if f is not None:
        src = f"per_kernel_graph_s: {SOURCE} {f.table}, median excess over {f.rows_used} latency-bound bf16 GEMMs"
        prof = latency.with_per_kernel(prof, f.value_s, src)
        notes["fits"]["per_kernel_graph_s"] = f.record()
    else:
        notes["kept"].append("overheads.per_kernel_graph_s (no latency-bound GEMM rows)")
    floors: tuple[tuple[Phase, str, bool, str], ...] = (  # phase, table, MLA, cache: fp8 calls have their own
        ("decode", "generation_attention", False, "bfloat16"),
        ("prefill", "context_attention", False, "bfloat16"),
        ("decode", "generation_mla", True, "bfloat16"),
        ("decode", "generation_attention", False, "fp8"),
    )
    for phase, kind, mla, kv in floors:
        t, name = newest_table(gpu, eng, kind, root), latency.floor_field(phase, mla, kv)
        fa = latency.fit_attention_floor(load_table(t), hw, prof, t.label, phase, mla, kv) if t is not None else None
        if fa is not None:
            src = f"{name}: {SOURCE} {fa.table}, median excess over {fa.rows_used} latency-bound {phase} calls"
            prof = latency.with_attention_floor(prof, fa.value_s, src, phase, mla, kv)
            notes["fits"][name] = fa.record()
        else:
            notes["kept"].append(
                f"attention.{name} (no latency-bound {kind} rows{'' if kv == 'bfloat16' else ' of ' + kv})"
            )
    prof = _decode_rates(gpu, eng, hw, prof, root, notes)
    t = newest_table(gpu, eng, "custom_allreduce", root)
    fc = latency.fit_custom_allreduce(load_table(t), hw, prof, t.label) if t is not None else {}
    if fc:
        table = next(iter(fc.values())).table
        src = f"custom_allreduce_latency_s: {SOURCE} {table}, median excess over latency-bound messages per GPU count"
        prof = latency.with_custom_allreduce(prof, {p: x.value_s for p, x in fc.items()}, src)
        notes["fits"]["custom_allreduce_latency_s"] = {str(p): x.record() for p, x in fc.items()}
    else:
        notes["kept"].append("comm latency (no custom all-reduce table): NCCL's base and per-hop latency")
    return _allreduce_curves(t, hw, prof, notes)


def _decode_rates(
    gpu: str, eng: str, hw: HardwareSpec, prof: CalibrationProfile, root: Path | None, notes: dict[str, Any]
) -> CalibrationProfile:
    """Step 2c: each decode kernel's share of the memory ceiling (``attention.decode_rate``) from the newest
    generation-attention and -MLA tables, after the floors."""
    found = [
        (newest_table(gpu, eng, kind, root), mla)
        for kind, mla in (("generation_attention", False), ("generation_mla", True))
    ]
    tables = [(t, mla) for t, mla in found if t is not None]
    fits = latency.fit_decode_rates([(load_table(t), mla) for t, mla in tables], hw, prof) if tables else {}
    if not fits:
        notes["kept"].append("attention.decode_rate (no memory-bound decode rows)")
        return prof
    labels = ", ".join(t.label for t, _ in tables)
    for key, f in fits.items():
        notes["fits"][f"decode_rate.{key}"] = replace(f, table=labels).record()
    att = prof.attention
    src = f"decode_rate: {SOURCE} {labels}, median share of the memory ceiling of memory-bound decode calls"
    update = {"decode_rate": {k: f.value_s for k, f in fits.items()}, "sources": (*att.sources, src)}
    return prof.model_copy(update={"attention": att.model_copy(update=update)})


def _allreduce_curves(
    t: AicTable | None, hw: HardwareSpec, prof: CalibrationProfile, notes: dict[str, Any]
) -> CalibrationProfile:
    """Step 3b: the engine's all-reduce efficiency against message size per launch and GPU count
    (:mod:`calibrate.aic.allreduce`) from the custom all-reduce table ``t``, after its latency."""
    fits = allreduce.fit_allreduce_efficiency(load_table(t), hw, prof, t.label) if t is not None else []
    if not fits:
        notes["kept"].append("comm.link_efficiency for all-reduces (no bandwidth-bound all-reduce rows)")
        return prof
    curves: dict[str, dict[int, Curve]] = {}
    for f in fits:
        curves.setdefault(f.launch, {})[f.gpus] = f.curve
    src = f"allreduce_efficiency: {SOURCE} {fits[0].table}, each bandwidth-bound message size per launch and GPU count"
    notes["fits"]["allreduce_efficiency"] = {f"{f.launch}:{f.gpus}": f.record() for f in fits}
    return allreduce.with_allreduce_efficiency(prof, curves, src)


def _prefill_attention(
    gpu: str, eng: str, hw: HardwareSpec, prof: CalibrationProfile, root: Path | None, notes: dict[str, Any]
) -> CalibrationProfile:
    """Step 4 (module docstring): each head dim's prefill curve from the context-attention table."""
    t = newest_table(gpu, eng, "context_attention", root)
    fits = attention.fit_prefill(load_table(t), hw, prof, t.label) if t is not None else []
    if not fits:
        notes["kept"].append("attention.prefill_compute_efficiency (no context-attention rows): the FA3 paper curve")
        return prof
    label = t.label if t is not None else ""
    for f in fits:
        notes["fits"][f"prefill_attention.d{f.head_dim}"] = {"table": label, **f.record()}
    dims = ", ".join(str(f.head_dim) for f in fits)
    src = f"prefill_compute_efficiency: {SOURCE} {label}, head dims {dims}"
    prof = attention.with_prefill(prof, {f.head_dim: f.curve for f in fits}, (src,))
    rates = attention.fit_prefill_kv_rates(load_table(t), hw, prof) if t is not None else []
    for r in rates:
        notes["fits"][f"prefill_kv_rate.{r.kv_format}"] = {"table": label, **r.record()}
    src = f"prefill_kv_rate: {SOURCE} {label}, median rate of each KV format's rows relative to the 16-bit-KV curve"
    prof = attention.with_kv_rates(prof, {r.kv_format: r.rate for r in rates}, (src,) if rates else ())
    return _mla_prefill(gpu, eng, hw, prof, root, notes)


def _mla_prefill(
    gpu: str, eng: str, hw: HardwareSpec, prof: CalibrationProfile, root: Path | None, notes: dict[str, Any]
) -> CalibrationProfile:
    """Step 4b: the MLA prefill kernel's own curve from the engine's context-MLA table, where it has one."""
    t = newest_table(gpu, eng, "context_mla", root)
    fit = attention.fit_mla_prefill(load_table(t), hw, prof, t.label) if t is not None else None
    if t is None or fit is None:
        notes["kept"].append("attention.mla_prefill_efficiency (no context-MLA rows): the head-dim curve")
        return prof
    notes["fits"]["mla_prefill_efficiency"] = {"table": t.label, **fit.record()}
    att = prof.attention
    src = f"mla_prefill_efficiency: {SOURCE} {t.label}, median achieved fraction of the bf16 peak per octave"
    update = {"mla_prefill_efficiency": fit.curve, "sources": (*att.sources, src)}
    prof = prof.model_copy(update={"attention": att.model_copy(update=update)})
    rates = attention.fit_prefill_kv_rates(load_table(t), hw, prof, mla=True)
    for r in rates:
        notes["fits"][f"prefill_kv_rate.{r.kv_format}"] = {"table": t.label, **r.record()}
    src = f"prefill_kv_rate: {SOURCE} {t.label}, median rate of each KV format's MLA rows relative to the MLA curve"
    return attention.with_kv_rates(prof, {r.kv_format: r.rate for r in rates}, (src,) if rates else ())


def _gemm_and_moe(
    gpu: str, eng: str, hw: HardwareSpec, prof: CalibrationProfile, root: Path | None, notes: dict[str, Any]
) -> CalibrationProfile:
    """Steps 5–6 (module docstring) on ``prof``."""
    t = newest_table(gpu, eng, "gemm", root)
    if t is not None:
        df = load_table(t)
        for dtype, rows in df.groupby("dtype", sort=True):
            f = fit_format(rows, str(dtype), hw, prof) if fittable(str(dtype)) else None
            if f is None:
                continue
            src = (f"{SOURCE} {t.label}: {f.rows_used} compute-bound {f.aic_dtype} rows",)
            prof = with_efficiency(prof, hw, f.compute, f.efficiency, src, f.weight_format, f.curve)
            notes["fits"][f.key] = {"table": t.label, **fit_record(f)}
        kernels = fit_gemm_kernels(df, hw, prof)
        for k in kernels:
            notes["fits"].update(k.records(t.label))
        prof = with_gemm_kernels(prof, kernels)
    return _moe(gpu, eng, hw, prof, root, notes)


#: The MoE kernel formats fitted, each a list of alternatives (the first with enough rows wins; formats of one
#: alternative are pooled): 16-bit; fp8 W8A8 (block scales, as the DeepSeek/Qwen3/GLM/MiniMax fp8 checkpoints,
#: else per-tensor); NVFP4 W4A4 (Blackwell). Not fitted on GPUs with fp4 tensor cores: the 4-bit weight-only
#: tables, because there roofline's 4-bit formats stand for the W4A4 / W4A8 kernels engines run for those
#: checkpoints: on a sample of the public closed-loop rows W4A16 rates made B200 gpt-oss and DeepSeek-FP4 TPOT 2.4x
#: the measured one. Where the GPU has no fp4 tensor cores W4A16 is what runs, fitted per kernel family
#: (:data:`WEIGHT_ONLY_FITS`); with them only the integer one (:data:`INTEGER_FITS`), MXFP4 the 16-bit rates.
MOE_FITS: tuple[tuple[tuple[str, ...], ...], ...] = (
    (("bfloat16",),),
    (("fp8_block",), ("fp8",)),
    (("nvfp4",),),
)
#: The 4-bit weight-only fits, one per kernel family (:data:`roofline.profile_moe.KERNEL_FAMILIES`): integer 4-bit
#: checkpoints run Marlin (the int4_wo rows: vLLM ``CompressedTensorsWNA16MarlinMoEMethod``, SGLang ``marlin_moe``),
#: MXFP4 checkpoints the engine's native MXFP4 kernel (the w4a16_mxfp4 rows of kernels other than Marlin,
#: :data:`NOT_NATIVE`). Pooled into one fit before 2026-12-02, the Marlin rows (compute 0.24-0.26 of the dense
#: ceiling at 64-256 rows per expert on H100/H200 vLLM) and the native ones (0.55-0.66) gave both 0.29-0.63.
WEIGHT_ONLY_FITS: tuple[tuple[tuple[str, ...], ...], ...] = ((("int4_wo",),), (("w4a16_mxfp4",),))
#: The weight-only fit on GPUs with fp4 tensor cores: Blackwell has no int4 MMA, so integer 4-bit checkpoints still
#: run W4A16 (Marlin) kernels there; MXFP4 / NVFP4 ones run W4A8 / W4A4. Unfitted there before 2026-12-03 (the 16-bit
#: kernel's rates), int4 priced its Blackwell tables at 0.27-0.50 of their rows.
INTEGER_FITS: tuple[tuple[tuple[str, ...], ...], ...] = ((("int4_wo",),),)
#: Per AIC ``moe_dtype``: the kernel-name fragment of rows that are not the checkpoint format's native kernel
#: (w4a16_mxfp4 rows timed through Marlin are the compressed-tensors MXFP4 path, not gpt-oss's ``quant_method:
#: mxfp4`` one), left out of that format's fit.
NOT_NATIVE: dict[str, str] = {"w4a16_mxfp4": "marlin"}
#: The fits whose measured layer shapes ship as ``grouped_gemm.layers`` (the shape's own kernel seconds): the
#: 16-bit fused kernel and Marlin (integer 4-bit). The other quantised MoE kernels change between engine versions
#: and launchers (vLLM's MXFP4 path, TensorRT-LLM's fp8-block backends), so one version's table of them is not what
#: a deployment of another runs: on the public closed-loop sample (436 rows, physics only, engine profiles, 2026-12-03)
#: every format's layers take TPOT from 13.8 to 15.2 % (TensorRT-LLM DeepSeek fp8 +13-17 -> +23-44 % signed, vLLM
#: MiniMax B200 fp8 0 -> +17 %, SGLang Qwen3-235B fp8 0 -> -8 %; Qwen3.5 fp8 -24 -> -20 % the other way). Marlin's
#: separable curves put its small-M rows at 1.3-1.7x the table (compute at the dense GEMM's M=1 tile padding x its
#: large-M rate; Kimi-K2.5's shape at moe_tp 8, 1-16 tokens: 69-210 us priced, 41-182 us measured); with its layers
#: Kimi-K2.5 int4 on H200 vLLM TPOT +19-25 -> +11-13 %, TTFT +81-86 -> +71-80 %, vLLM TPOT 10.3 % unchanged, all
#: 14.5 -> 13.8 %. The 16-bit layers: Mixtral on the BLIS vLLM 0.15.1 runs, ITL 24.2 -> 15.3 %.
LAYER_FITS: tuple[tuple[str, ...], ...] = (("bfloat16",), ("int4_wo",))


def _first_fit(
    tables: list[tuple[AicTable, pd.DataFrame]],
    alternatives: tuple[tuple[str, ...], ...],
    hw: HardwareSpec,
    prof: CalibrationProfile,
) -> tuple[AicTable, tuple[str, ...], GroupedFit] | None:
    """The fit of the first alternative that the newest table holding it supports (None: no table has it)."""
    for formats in alternatives:
        for t, all_rows in tables:
            other = NOT_NATIVE.get(formats[0])
            df = all_rows if other is None else all_rows[~all_rows["kernel"].astype(str).str.contains(other)]
            if len(fit_rows(df, formats)) < MIN_MOE_ROWS:
                continue
            try:
                return t, formats, fit_grouped(df, hw, prof, t.label, formats)
            except CalibrationError:  # rows that do not map on hw (no peak for the format)
                continue
    return None


def _moe(
    gpu: str, eng: str, hw: HardwareSpec, prof: CalibrationProfile, root: Path | None, notes: dict[str, Any]
) -> CalibrationProfile:
    """Step 6 (module docstring): the 16-bit grouped rates, and each quantised kernel's own (``by_format``)."""
    tables = [(t, load_table(t)) for t in tables_newest_first(gpu, eng, "moe", root)]
    wanted = (*MOE_FITS, *(INTEGER_FITS if hw.peak_flops_per_s("fp4") else WEIGHT_ONLY_FITS))
    fits = [f for alts in wanted if (f := _first_fit(tables, alts, hw, prof)) is not None]
    top = next((f for f in fits if f[1] == ("bfloat16",)), None)
    if top is None:
        notes["kept"].append("grouped_gemm (no bf16 balanced MoE rows in any table): the default's")
        return prof
    by_format = {}
    for t, formats, g in fits:
        key = moe_format_key(formats[0], hw)
        notes["fits"][f"grouped_gemm.{key}"] = {
            "table": t.label,
            "formats": "/".join(formats),
            "rows_used_memory": g.rows_used_memory,
            "rows_used_compute": g.rows_used_compute,
            "residual_ratio_p10": g.residual_p10,
            "residual_ratio_median": g.residual_median,
            "residual_ratio_p90": g.residual_p90,
        }
        if formats != ("bfloat16",):
            by_format[key] = g.grouped.own_rates(g.grouped.sources)
    if hw.peak_flops_per_s("fp4") and "bf16:0.5" in by_format:  # 4-bit floats keep the 16-bit rates, not Marlin's
        src = f"{SOURCE}: the 16-bit kernel's rates (4-bit float checkpoints run W4A8 / W4A4 kernels here)"
        by_format.update({f"bf16:0.5/{f}": top[2].grouped.own_rates((src,)) for f in ("mxfp4", "fp4")})
    layers = {k: v for _, formats, g in fits if formats in LAYER_FITS for k, v in g.grouped.layers.items()}
    grouped = top[2].grouped.model_copy(update={"by_format": by_format, "layers": layers})
    return with_call_floors(prof.model_copy(update={"grouped_gemm": grouped}), fits, dict(tables), hw, notes["fits"])


def fit_engine_profile(gpu: str, engine: str, root: Path | None = None) -> CalibrationProfile:
    """The profile of ``engine``'s kernels on AIC GPU ``gpu`` (module docstring), from the installed tables."""
    slug = AIC_HARDWARE.get(gpu)
    if slug is None:
        raise CalibrationError(f"AIC GPU {gpu!r} has no roofline hardware spec; mapped: {', '.join(AIC_HARDWARE)}")
    if newest_table(gpu, engine, "gemm", root) is None:
        raise CalibrationError(f"no AIConfigurator GEMM table for {gpu} and {engine}: nothing to fit a profile from")
    hw, base = hardware(slug), default_profile()
    notes: dict[str, Any] = {"fits": {}, "kept": []}
    prof = _latencies(gpu, engine, hw, base, root, notes)
    prof = _gemm_and_moe(gpu, engine, hw, _prefill_attention(gpu, engine, hw, prof, root, notes), root, notes)
    provenance = {
        "kind": "aiconfigurator",
        "source": SOURCE,
        "hardware": hw.name,
        "engine": engine,
        "method": "calibrate.aic.engine_profile.fit_engine_profile: each parameter from its own regime's rows",
        "base_profile": base.name,
        **notes,
    }
    name = f"{hw.name}_{engine}"
    update = {"name": name, "device": None, "created": dt.date.today().isoformat(), "provenance": provenance}
    return prof.model_copy(update=update)


def engine_versions(profile: CalibrationProfile) -> dict[str, str]:
    """Table label of each fitted parameter (``<gpu>/<op>/<engine>/<version>``) from a shipped profile."""
    fits = profile.provenance.get("fits", {})
    out = {}
    for key, rec in fits.items():
        if isinstance(rec, dict) and "table" in rec:
            out[key] = str(rec["table"])
        elif isinstance(rec, dict):
            out[key] = str(next(iter(rec.values()))["table"])
    return out


def ship_all(root: Path | None = None) -> list[Path]:
    """Fit and write every :func:`shippable` profile to its bundled path; returns the paths written."""
    from roofline.engine.profiles import ENGINE_PROFILE_DIR, engine_profile_path, shipped_engine_profile

    ENGINE_PROFILE_DIR.mkdir(parents=True, exist_ok=True)
    out = []
    for gpu, eng in shippable(root):
        out.append(fit_engine_profile(gpu, eng, root).save(engine_profile_path(AIC_HARDWARE[gpu], eng)))
    shipped_engine_profile.cache_clear()
    return out


def summary_lines(profile: CalibrationProfile) -> list[str]:
    """One line per fitted parameter of an engine profile (value, table, rows, residual) and per kept one."""
    fits = profile.provenance.get("fits", {})
    lines = []
    for key, rec in fits.items():
        recs = rec.items() if key in ("custom_allreduce_latency_s", "allreduce_efficiency") else [("", rec)]
        for sub, r in recs:
            name = f"{key}[{sub}]" if sub else key
            value = r.get("value_s", r.get("efficiency"))
            shown = f"{value * 1e6:.2f} us" if "value_s" in r else (f"{value:.4f}" if value is not None else "curve")
            rows = r.get("rows_used", r.get("rows_used_memory"))
            lines.append(
                f"{name}: {shown} from {rows} rows of {r['table']}; predicted/measured after the fit "
                f"{r['residual_ratio_median']:.3f} (p10 {r['residual_ratio_p10']:.3f}, "
                f"p90 {r['residual_ratio_p90']:.3f})"
            )
    lines += [f"kept from the default: {k}" for k in profile.provenance.get("kept", [])]
    return lines
