"""Reading a :class:`~roofline.serving.workload.mix.WorkloadMix` from a CLI string or a YAML file.

``chat:0.6,rag:0.3,summarize:0.1``: presets (:data:`roofline.serving.workload.presets.PRESETS`) with shares; each
class takes the preset's fixed prompt and output lengths, SLOs and percentiles, and no prefix sharing.

A YAML file (``mix.yaml``; any text that names an existing file or ends in .yaml/.yml) holds ``classes``: a mapping
of class name to fields, or a list of field mappings each with ``name``; and optionally ``qps`` (total
requests/s). A class's fields:

* ``share`` (required): fraction of the requests, > 0 (the shares sum to 1, see :mod:`~roofline.serving.workload.mix`);
* ``preset``: start from a preset's lengths, SLOs and percentiles (the other fields override them);
* ``prompt`` / ``output``: tokens, fixed or a distribution as :func:`~roofline.serving.workload.arrivals.parse_length`
  reads it (``lognormal:1024:0.5``, ``{dist: uniform, low: 100, high: 900}``, ``file:PATH``);
* ``ttft_slo`` / ``tpot_slo``: durations with a unit (``500ms``, ``2s``), optionally with the percentile as
  ``p95=2s``; or ``ttft_slo_s`` / ``tpot_slo_s`` in seconds; ``ttft_pct`` / ``tpot_pct`` (default 99 and 90);
* ``prefix_share``: share of the class's mean prompt that is one common prefix of the class, in [0, 1].

Without a preset, ``prompt``, ``output`` and both SLOs are required. Every error is a one-paragraph ScenarioError
naming the class and field with a fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from roofline.errors import ScenarioError, suggest
from roofline.serving.workload.arrivals import LengthSpec, parse_length
from roofline.serving.workload.mix import RequestClass, WorkloadMix
from roofline.serving.workload.presets import PRESETS

FIELDS = (
    "share",
    "preset",
    "prompt",
    "output",
    "ttft_slo",
    "tpot_slo",
    "ttft_slo_s",
    "tpot_slo_s",
    "ttft_pct",
    "tpot_pct",
    "prefix_share",
    "name",
)


def parse_mix(spec: WorkloadMix | str | Path) -> WorkloadMix:
    """A WorkloadMix from itself, a preset string (``chat:0.6,rag:0.4``) or a YAML file path (module docstring)."""
    if isinstance(spec, WorkloadMix):
        return spec
    if isinstance(spec, Path) or (isinstance(spec, str) and _looks_like_file(spec)):
        return mix_from_file(Path(spec))
    if not isinstance(spec, str):
        raise ScenarioError(
            f"mix must be a WorkloadMix, a string such as 'chat:0.7,rag:0.3' or a YAML file path (got "
            f"{type(spec).__name__})"
        )
    return mix_from_presets(spec)


def _looks_like_file(text: str) -> bool:
    s = text.strip()
    return s.lower().endswith((".yaml", ".yml")) or ("," not in s and ":" not in s and Path(s).is_file())


def mix_from_presets(text: str) -> WorkloadMix:
    """``chat:0.6,rag:0.3,summarize:0.1`` → a mix of those presets with those shares."""
    classes = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, share = part.partition(":")
        key = name.strip().lower()
        if not sep:
            raise ScenarioError(
                f"--mix: {part!r} has no share; write NAME:SHARE for each class, e.g. chat:0.7,rag:0.3, or give "
                "a mix YAML file"
            )
        if key not in PRESETS:
            raise ScenarioError(
                f"--mix: unknown preset {name.strip()!r}{suggest(key, PRESETS)} Known presets: {', '.join(PRESETS)}; "
                "a class of your own goes in a mix YAML file (docs/usage.md, 'Workload mixes')"
            )
        classes.append(_from_preset(key, key, _share(share, key)))
    if not classes:
        raise ScenarioError("--mix is empty; write NAME:SHARE for each class, e.g. chat:0.7,rag:0.3")
    return WorkloadMix(tuple(classes), None, text.strip())


def _share(text: object, name: str) -> float:
    try:
        return float(str(text).strip().rstrip("%")) / (100 if str(text).strip().endswith("%") else 1)
    except ValueError:
        raise ScenarioError(
            f"mix class {name!r}: share {text!r} is not a number; give a fraction such as 0.3 (or 30%)"
        ) from None


def _from_preset(preset: str, name: str, share: float) -> RequestClass:
    p = PRESETS[preset]
    return RequestClass(
        name,
        share,
        LengthSpec("fixed", float(p.prompt_len)),
        LengthSpec("fixed", float(p.output_len)),
        p.ttft_slo_s,
        p.tpot_slo_s,
        p.ttft_pct,
        p.tpot_pct,
    )


def mix_from_file(path: Path) -> WorkloadMix:
    """A mix from a YAML file (module docstring), read through the bounded safe loader."""
    from roofline.boundary.inputs import parse_yaml, read_text

    doc = parse_yaml(read_text(path, "mix file", error=ScenarioError), f"mix file {path}", ScenarioError)
    if not isinstance(doc, Mapping) or "classes" not in doc:
        raise ScenarioError(
            f"mix file {path}: expected a mapping with 'classes' (and optionally 'qps'), e.g. classes: "
            "{chat: {preset: chat, share: 0.7}, rag: {preset: rag, share: 0.3}}"
        )
    unknown = sorted(str(k) for k in doc if k not in ("classes", "qps"))
    if unknown:
        raise ScenarioError(f"mix file {path}: unknown key(s) {', '.join(unknown)}; the keys are classes and qps")
    raw = doc["classes"]
    if isinstance(raw, Mapping):
        items = [(str(k), v) for k, v in raw.items()]
    elif isinstance(raw, list) and all(isinstance(v, Mapping) and "name" in v for v in raw):
        items = [(str(v["name"]), v) for v in raw]
    else:
        raise ScenarioError(
            f"mix file {path}: 'classes' must map class names to their fields, or list mappings that each have a name"
        )
    classes = tuple(class_from_fields(name, fields) for name, fields in items)
    qps = doc.get("qps")
    if qps is not None and (isinstance(qps, bool) or not isinstance(qps, int | float)):
        raise ScenarioError(f"mix file {path}: qps must be a number of requests/s (got {qps!r}), e.g. qps: 10")
    return WorkloadMix(classes, None if qps is None else float(qps), str(path))


def class_from_fields(name: str, fields: Any) -> RequestClass:
    """One class from its YAML fields (module docstring)."""
    if not isinstance(fields, Mapping):
        raise ScenarioError(f"mix class {name!r}: expected its fields as a mapping, e.g. {{share: 0.3, preset: rag}}")
    f = dict(fields)
    unknown = sorted(str(k) for k in f if k not in FIELDS)
    if unknown:
        hint = "".join(suggest(str(k), FIELDS) for k in unknown[:1])
        raise ScenarioError(
            f"mix class {name!r}: unknown field(s) {', '.join(unknown)}{hint} Fields: {', '.join(FIELDS)}"
        )
    if "share" not in f:
        raise ScenarioError(f"mix class {name!r}: share is missing; give the fraction of requests, e.g. share: 0.3")
    share = _share(f["share"], name)
    preset = f.get("preset")
    if preset is not None:
        key = str(preset).strip().lower()
        if key not in PRESETS:
            raise ScenarioError(
                f"mix class {name!r}: unknown preset {preset!r}{suggest(key, PRESETS)} Known: {', '.join(PRESETS)}"
            )
        base = _from_preset(key, name, share)
    else:
        missing = [k for k in ("prompt", "output") if k not in f]
        missing += [k for k in ("ttft_slo", "tpot_slo") if k not in f and f"{k}_s" not in f]
        if missing:
            raise ScenarioError(
                f"mix class {name!r}: missing {', '.join(missing)}; give them (e.g. prompt: 32768, output: 512, "
                "ttft_slo: 10s, tpot_slo: 80ms) or start from a preset (preset: rag)"
            )
        base = RequestClass(name, share, LengthSpec("fixed", 1.0), LengthSpec("fixed", 1.0), 1.0, 1.0)
    over: dict[str, Any] = {}
    for key in ("prompt", "output"):
        if key in f:
            over[key] = parse_length(f[key], f"mix class {name!r}: {key}")
    for fig in ("ttft", "tpot"):
        over |= _slo(name, fig, f)
    if "prefix_share" in f:
        over["prefix_share"] = f["prefix_share"]
    return replace(base, **over)


def _slo(name: str, fig: str, f: Mapping[str, Any]) -> dict[str, Any]:
    """``{fig}_slo_s`` and ``{fig}_pct`` from ``{fig}_slo`` ('500ms', 'p95=2s'), ``{fig}_slo_s`` and ``{fig}_pct``."""
    from roofline.units import UnitError, parse_duration

    out: dict[str, Any] = {}
    if f"{fig}_slo" in f and f"{fig}_slo_s" in f:
        raise ScenarioError(f"mix class {name!r}: give {fig}_slo or {fig}_slo_s, not both")
    if f"{fig}_slo" in f:
        text = str(f[f"{fig}_slo"]).strip()
        head, sep, tail = text.partition("=")
        if sep:
            if not head.strip().lower().startswith("p"):
                raise ScenarioError(f"mix class {name!r}: {fig}_slo {text!r}: write e.g. p99=500ms or 500ms")
            out[f"{fig}_pct"] = _number(name, f"{fig}_slo percentile", head.strip()[1:])
            text = tail.strip()
        try:
            float(text)
        except ValueError:
            pass
        else:
            raise ScenarioError(f"mix class {name!r}: {fig}_slo {text!r} has no unit; write {text}ms or {text}s")
        try:
            out[f"{fig}_slo_s"] = parse_duration(text)
        except (UnitError, ValueError):
            raise ScenarioError(
                f"mix class {name!r}: {fig}_slo {text!r} is not a duration; write e.g. 500ms or 2s"
            ) from None
    if f"{fig}_slo_s" in f:
        out[f"{fig}_slo_s"] = f[f"{fig}_slo_s"]
    if f"{fig}_pct" in f:
        out[f"{fig}_pct"] = f[f"{fig}_pct"]
    return out


def _number(name: str, what: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ScenarioError(f"mix class {name!r}: {what} {text!r} is not a number; write e.g. p99=500ms") from None


def mean_request(
    mix: WorkloadMix | str | object | None,
    prompt_len: int | None,
    output_len: int | None,
    ttft_slo_s: float | None,
    tpot_slo_s: float | None,
) -> tuple[WorkloadMix | None, int, int, float, float]:
    """(mix, P, O, TTFT SLO, TPOT SLO) the mean-value planner sizes: without a mix the arguments as given; with
    one, P = max(1, round(P̄)), O = max(2, round(Ō)) (the mix's mean lengths) and the strictest SLOs over the
    classes (min TTFT SLO, min TPOT SLO); a length or SLO also given beside a mix is refused."""
    if mix is None:
        return None, prompt_len, output_len, ttft_slo_s, tpot_slo_s  # type: ignore[return-value]
    m = parse_mix(mix)  # type: ignore[arg-type]
    fields = {"prompt_len": prompt_len, "output_len": output_len, "ttft_slo_s": ttft_slo_s, "tpot_slo_s": tpot_slo_s}
    given = [k for k, v in fields.items() if v is not None]
    if given:
        raise ScenarioError(
            f"a workload mix gives each class its own lengths and SLOs: drop {', '.join(given)} (or put them in "
            "the mix's classes)"
        )
    t, u = m.strictest
    return m, max(1, round(m.prompt_mean)), max(2, round(m.output_mean)), t.ttft_slo_s, u.tpot_slo_s
