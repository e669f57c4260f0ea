"""``roofline hardware …``, ``roofline model …`` and ``roofline schema``: browse and extend the spec library."""

from __future__ import annotations

import enum
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from roofline.cli.options import console, dumps

if TYPE_CHECKING:
    from rich.table import Table

    from roofline.specs.hardware import HardwareSpec
    from roofline.specs.model import ModelSpec

hardware_app = typer.Typer(help="List and inspect hardware specs.", no_args_is_help=True)
model_app = typer.Typer(help="List, inspect and import model specs.", no_args_is_help=True)
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


class SpecKind(enum.StrEnum):
    """Spec kinds with a JSON Schema."""

    hardware = "hardware"
    model = "model"
    profile = "profile"


def _warn_broken(kind: str) -> None:
    """One stderr line per spec file that could not be read (it is left out of the list)."""
    from roofline.specs.library import broken_specs

    for path, why in sorted(broken_specs("hardware" if kind == "hardware" else "model").items()):
        typer.echo(f"warning: skipped {path}: {why}", err=True)


def _tflops(x: float | None) -> str:
    return "" if x is None else f"{x / 1e12:,.0f}"


@hardware_app.command("list")
def hardware_list(json: Json = False) -> None:
    """Every known device: memory, bandwidth, dense peaks and price."""
    from rich.table import Table

    from roofline.specs.library import hardware, list_hardware
    from roofline.units import fmt_bytes

    specs = [hardware(n) for n in list_hardware()]
    _warn_broken("hardware")
    if json:
        typer.echo(dumps([s.model_dump(mode="json") for s in specs]))
        return
    t = Table(title="hardware (memory in GiB and GB; peaks dense, TFLOPS)", title_justify="left")
    for h in ("name", "device", "memory", "bandwidth", "bf16", "fp8", "fp4", "$/GPU-h"):
        t.add_column(h, justify="left" if h in ("name", "device") else "right")
    for s in specs:
        mem = s.memory.capacity_bytes
        pk = s.peak_dense
        t.add_row(
            s.name,
            s.display_name,
            f"{fmt_bytes(mem, True)} ({fmt_bytes(mem, False)})",
            f"{s.memory.bandwidth_bytes_per_s / 1e12:.2f} TB/s",
            _tflops(pk.bf16),
            _tflops(pk.fp8),
            _tflops(pk.fp4),
            f"{s.price.usd_per_gpu_hour:.2f}" if s.price else "",
        )
    console().print(t)


@hardware_app.command("show")
def hardware_show(
    name: Annotated[str, typer.Argument(help="Hardware slug, alias or YAML path.")], json: Json = False
) -> None:
    """All datasheet fields of one device, with their sources."""
    from roofline.specs.library import hardware

    spec = hardware(name)
    if json:
        typer.echo(dumps(spec.model_dump(mode="json")))
        return
    console().print(_hardware_table(spec))


def _hardware_table(s: HardwareSpec) -> Table:
    from rich.table import Table

    from roofline.units import fmt_bytes, fmt_rate, fmt_seconds

    t = Table(title=f"{s.display_name} ({s.name})", title_justify="left", show_header=False)
    t.add_column("field", style="bold")
    t.add_column("value", overflow="fold")
    rows: list[tuple[str, str]] = [("aliases", ", ".join(s.aliases) or "-"), ("vendor", f"{s.vendor}, {s.form_factor}")]
    m = s.memory
    rows.append(
        ("memory", f"{fmt_bytes(m.capacity_bytes, True)} = {fmt_bytes(m.capacity_bytes, False)} {m.type or ''}")
    )
    if m.visible_capacity_bytes is not None:
        rows.append(("visible memory", f"{fmt_bytes(m.visible_capacity_bytes, True)} (used for every memory decision)"))
    rows.append(("bandwidth", fmt_rate(m.bandwidth_bytes_per_s, "B/s")))
    for dt in s.peak_dense.supported():
        rows.append((f"peak {dt} (dense)", fmt_rate(s.peak_dense.get(dt) or 0.0, "OP/s" if dt == "int8" else "FLOP/s")))
    if s.l2_cache_bytes:
        rows.append(("L2 cache", fmt_bytes(s.l2_cache_bytes, True)))
    if s.interconnect:
        ic = s.interconnect
        lat = f", latency {fmt_seconds(ic.latency_s)}" if ic.latency_s is not None else ""
        rows.append(
            ("interconnect", f"{ic.kind}: {fmt_rate(ic.bandwidth_per_direction_bytes_per_s, 'B/s')} per direction{lat}")
        )
        peer = ic.per_peer_bandwidth_per_direction_bytes_per_s
        per_peer = f", {fmt_rate(peer, 'B/s')} per peer" if peer else ""
        rows.append(("scale-up domain", f"{ic.domain_size} GPUs, {ic.topology} ({ic.link}){per_peer}"))
    if s.fallback:
        fb = fmt_rate(s.fallback.bandwidth_per_direction_bytes_per_s, "B/s")
        rows.append(("fallback path", f"{s.fallback.kind}: {fb} per direction, {s.host_size} GPUs per host"))
    if s.scale_out_bandwidth_per_direction_bytes_per_s:
        rows.append(("scale-out", f"{fmt_rate(s.scale_out_bandwidth_per_direction_bytes_per_s, 'B/s')} per direction"))
    if s.tdp_watts:
        rows.append(("TDP", f"{s.tdp_watts:.0f} W"))
    if s.price:
        rows.append(("price", f"${s.price.usd_per_gpu_hour:.2f} per GPU-hour ({s.price.date}, {s.price.source})"))
    rows += [(f"source: {src.fields}", src.ref) for src in s.sources]
    if s.notes:
        rows.append(("notes", s.notes))
    for k, v in rows:
        t.add_row(k, v)
    return t


@model_app.command("list")
def model_list(json: Json = False) -> None:
    """Every known model: parameters, layers, attention and KV bytes per token (bf16)."""
    from rich.table import Table

    from roofline.cli.render import num
    from roofline.memory import kv_bytes_per_token
    from roofline.specs.library import list_models, model
    from roofline.units import fmt_bytes

    specs = [model(n) for n in list_models()]
    _warn_broken("model")
    if json:
        typer.echo(dumps([_model_facts(s) for s in specs]))
        return
    t = Table(title="models (params in billions; KV per token for the whole model in bf16)", title_justify="left")
    for h in ("name", "params", "active", "layers", "hidden", "attention", "KV/token", "moe"):
        t.add_column(h, justify="left" if h in ("name", "attention", "moe") else "right")
    for s in specs:
        a = s.attention
        moe = f"{s.moe.num_experts} experts, top {s.moe.top_k}" if s.moe else ""
        t.add_row(
            s.name,
            num(s.param_count() / 1e9),
            num(s.active_param_count() / 1e9),
            str(s.num_layers),
            str(s.hidden_size),
            f"{a.kind} {a.num_heads}/{a.num_kv_heads}×{a.head_dim}",
            fmt_bytes(kv_bytes_per_token(s, 2.0)),
            moe,
        )
    console().print(t)


def _model_facts(s: ModelSpec) -> dict[str, Any]:
    """Derived facts of a model spec, units in the names."""
    from roofline.memory import kv_bytes_per_token

    return {
        "name": s.name,
        "display_name": s.display_name,
        "param_count": s.param_count(),
        "active_param_count": s.active_param_count(),
        "num_layers": s.num_layers,
        "kv_bytes_per_token_bf16": kv_bytes_per_token(s, 2.0),
        "kv_bytes_per_token_fp8": kv_bytes_per_token(s, 1.0),
        "layer_pattern": layer_pattern(s),
        "spec": s.model_dump(mode="json", by_alias=True, exclude_none=True),
    }


def layer_pattern(s: ModelSpec) -> str:
    """'32 × global' or '21 × (local, global)' or a count per mixer kind, plus the FFN split."""
    if s.layers is not None:  # per-layer structure: count each mixer kind and FFN kind
        mixers = Counter(layer.mixer for layer in s.resolved_layers())
        text = " + ".join(f"{n} × {k}" for k, n in mixers.most_common())
        caps = {
            "local": ("window", s.attention.sliding_window),
            "chunked": ("chunk", s.attention.chunk_size),
            "sparse": ("top-k", s.sparse_attention.top_k if s.sparse_attention else None),
        }
        text += "".join(f" ({k} {label} {v})" for k, (label, v) in caps.items() if k in mixers and v)
        ffns = Counter(layer.ffn for layer in s.resolved_layers())
        return text + "; " + " + ".join(f"{n} {k}" for k, n in ffns.most_common()) + " FFN layers"
    kinds = s.layer_kinds()
    p = s.attention.layer_pattern
    if p and len(kinds) % len(p) == 0 and len(set(p)) > 1:
        text = f"{len(kinds) // len(p)} × ({', '.join(p)})"
    else:
        runs: list[list[Any]] = []
        for k in kinds:
            if runs and runs[-1][0] == k:
                runs[-1][1] += 1
            else:
                runs.append([k, 1])
        text = " + ".join(f"{n} × {k}" for k, n in runs)
    if s.attention.sliding_window:
        text += f" (local window {s.attention.sliding_window})"
    if s.moe:
        text += f"; {s.num_dense_layers} dense + {s.num_moe_layers} MoE layers"
    return text


@model_app.command("show")
def model_show(
    name: Annotated[str, typer.Argument(help="Model slug, alias, YAML or config.json path.")], json: Json = False
) -> None:
    """Parameters (total and active), KV per token, layer pattern and architecture of one model."""
    from rich.table import Table

    from roofline.cli.render import num
    from roofline.specs.library import model
    from roofline.units import fmt_bytes

    s = model(name)
    facts = _model_facts(s)
    if json:
        typer.echo(dumps(facts))
        return
    a = s.attention
    t = Table(title=f"{s.display_name} ({s.name})", title_justify="left", show_header=False)
    t.add_column("field", style="bold")
    t.add_column("value", overflow="fold")
    att = f"{a.kind}: {a.num_heads} heads, {a.num_kv_heads} KV heads, head_dim {a.head_dim}"
    if a.mla:
        att += f"; MLA kv_lora_rank {a.mla.kv_lora_rank}, rope dim {a.mla.qk_rope_head_dim}"
    rows = [
        ("parameters", f"{facts['param_count']:,} ({num(facts['param_count'] / 1e9)} B)"),
        ("active parameters", f"{facts['active_param_count']:,} ({num(facts['active_param_count'] / 1e9)} B)"),
        (
            "KV per token",
            f"{fmt_bytes(facts['kv_bytes_per_token_bf16'])} bf16 · "
            f"{fmt_bytes(facts['kv_bytes_per_token_fp8'])} fp8 (whole model)",
        ),
        ("layers", f"{s.num_layers}: {facts['layer_pattern']}"),
        ("hidden / vocab", f"{s.hidden_size} / {s.vocab_size:,}" + (" (tied)" if s.tie_word_embeddings else "")),
        ("attention", att),
        ("ffn", f"{s.ffn.kind} {s.ffn.activation}, intermediate {s.ffn.intermediate_size}"),
    ]
    if s.linear_attention:
        la = s.linear_attention
        from roofline.memory import state_bytes_per_sequence_per_layer

        rows.append(
            (
                "linear attention",
                f"{la.kind}: {la.num_heads} heads × {la.head_k_dim}×{la.head_v_dim} state "
                f"({la.state_dtype}), {fmt_bytes(state_bytes_per_sequence_per_layer(s))} per sequence per layer",
            )
        )
    if s.sparse_attention:
        sp = s.sparse_attention
        rows.append(("sparse attention", f"indexer {sp.index_heads} heads × {sp.index_head_dim}, top-k {sp.top_k}"))
    if s.mtp_layers:
        rows.append(("MTP layers", f"{s.mtp_layers} ({s.mtp_param_count():,} parameters, not in the total)"))
    if s.moe:
        mo = s.moe
        rows.append(
            (
                "moe",
                f"{mo.num_experts} experts × {mo.expert_intermediate_size}, top {mo.top_k}, "
                f"{mo.num_shared_experts} shared",
            )
        )
    rows += [("context", str(s.max_position_embeddings or "-")), ("architecture", s.architecture)]
    rows += [(f"source: {src.fields}", src.ref) for src in s.sources]
    for k, v in rows:
        t.add_row(k, v)
    console().print(t)


@model_app.command("import")
def model_import(
    config: Annotated[Path, typer.Argument(help="A Hugging Face config.json.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the YAML spec here (default: stdout).")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Slug for the spec (default from the config).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Convert a config.json into a model spec YAML with the strict importer (unknown architectures fail)."""
    from roofline.boundary.outputs import check_output, write_output
    from roofline.specs.hf_import import model_from_hf_config, spec_to_yaml

    target = check_output(out, force=force, what="YAML model spec") if out is not None else None
    spec = model_from_hf_config(config, name=name)
    text = spec_to_yaml(spec)
    if target is None:
        typer.echo(text, nl=False)
        return
    write_output(target, text)
    console(stderr=True).print(
        f"wrote {out}: {spec.name}, {spec.param_count():,} parameters. Use it as `roofline predict {out} HARDWARE` "
        "or put it in a folder listed in ROOFLINE_SPECS_PATH."
    )


def schema_cmd(kind: Annotated[SpecKind, typer.Argument(help="hardware, model or profile")]) -> None:
    """JSON Schema of a spec kind (by YAML key), for editor validation of spec and calibration profile files."""
    if kind is SpecKind.profile:
        from roofline.profile import CalibrationProfile

        typer.echo(dumps(CalibrationProfile.model_json_schema(by_alias=True)))
        return
    from roofline.specs.library import json_schema

    typer.echo(dumps(json_schema("hardware" if kind is SpecKind.hardware else "model")))
