"""Evidence and reproduction: calibration provenance, % of datasheet reached, accuracy, hashes.

Everything here is stated plainly so a reader can tell measured numbers from assumed ones
and regenerate the exact report.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import platform
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.engine.profiles import BY_DEFAULT
from roofline.errors import RooflineError
from roofline.profile import DEFAULT_PROFILE_PATH, CalibrationProfile
from roofline.serving.plan.procurement import Procurement, procurement_flags
from roofline.specs.hardware import ComputeDtype, HardwareSpec

if TYPE_CHECKING:
    import pandas as pd

    from roofline.engine.presets import EngineArg
    from roofline.report.content import ReportInputs
    from roofline.specs.model import ModelSpec


@dataclass(frozen=True)
class CeilingRow:
    """Achievable vs datasheet ceilings of one device under the report's profile."""

    hardware: HardwareSpec
    dtype: str
    peak_flops_per_s: float
    flops_per_s: float
    peak_bytes_per_s: float
    bytes_per_s: float
    measured: bool
    evidence: tuple[str, ...] = ()

    @property
    def compute_fraction(self) -> float:
        """Achievable / datasheet compute."""
        return self.flops_per_s / self.peak_flops_per_s

    @property
    def memory_fraction(self) -> float:
        """Achievable / datasheet HBM bandwidth."""
        return self.bytes_per_s / self.peak_bytes_per_s


@dataclass(frozen=True)
class AccuracyRow:
    """Error statistics of one scope (fractions, not percent)."""

    scope: str
    n: int
    median_ape: float
    p90_ape: float
    median_error: float


@dataclass(frozen=True)
class ServingErrorRow:
    """The serving simulator's 80 % interval factors and held-out coverage on one engine's public rows."""

    engine: str
    n: int
    ttft_factors: tuple[float, float]
    tpot_factors: tuple[float, float]
    ttft_coverage: float
    tpot_coverage: float
    used: bool


@dataclass(frozen=True)
class Evidence:
    """Where the ceilings come from and how accurate roofline is known to be."""

    kind: str
    statement: str
    profile: CalibrationProfile
    provenance: tuple[tuple[str, str], ...]
    ceilings: tuple[CeilingRow, ...]
    accuracy: tuple[AccuracyRow, ...]
    accuracy_note: str
    serving: tuple[ServingErrorRow, ...] = ()


@dataclass(frozen=True)
class SpecFile:
    """One input file and its content hash."""

    kind: str
    name: str
    path: str
    sha256: str


@dataclass(frozen=True)
class Reproduce:
    """The exact command, versions and input hashes behind the report."""

    command: str
    python_call: str
    version: str
    python: str
    platform: str
    generated: str
    files: tuple[SpecFile, ...]


def evidence(inp: ReportInputs, dtype: ComputeDtype = "bf16") -> Evidence:
    """Provenance of ``inp.profile`` and its ceilings on every hardware of the report."""
    from roofline.provenance import device_evidence

    p: CalibrationProfile = inp.profile
    prov = tuple((str(k), _text(v)) for k, v in p.provenance.items())
    if p.device is not None:
        kind = "measured"
        statement = (
            f"Calibrated: ceilings measured on {p.device} (profile '{p.name}', created {p.created}). Devices other "
            f"than {p.device} use the measured fractions of their datasheet peaks."
        )
    elif p.name == "datasheet":
        kind, statement = "datasheet", "Datasheet defaults: every efficiency is 1 and there are no overheads."
    elif not inp.calibrated and BY_DEFAULT:
        kind = "engine"
        statement = (
            f"Engine-kernel profiles: each device is priced with the profile fitted to {inp.engine}'s own kernels "
            "measured on that GPU (AIConfigurator 0.12.0 tables: per-kernel cost, decode attention floor, custom "
            "all-reduce latency, GEMM and MoE rates), or with the default profile from public microbenchmarks where "
            "no tables exist; each device's line below says which. Nothing was measured on your machines."
        )
    else:
        kind = "default"
        statement = (
            f"Default profile from public microbenchmarks (profile '{p.name}', created {p.created}): datasheet peaks "
            "times efficiencies fitted to published GEMM and bandwidth measurements. Nothing was measured on your "
            "machines."
        )
    rows = []
    for hw in inp.hardware:
        d: ComputeDtype = dtype if hw.peak_flops_per_s(dtype) is not None else hw.peak_dense.supported()[-1]
        hp = inp.profile_for(hw)
        rows.append(
            CeilingRow(
                hw,
                d,
                float(hw.peak_flops_per_s(d) or math.nan),
                hp.compute_ceiling(hw, d),
                hw.memory.bandwidth_bytes_per_s,
                hp.memory_ceiling(hw),
                hp.device == hw.name,
                device_evidence(hp, hw, moe=inp.model.moe is not None),
            )
        )
    acc, note = accuracy(inp)
    return Evidence(kind, statement, p, prov, tuple(rows), acc, note, serving_error_rows(inp.engine))


def serving_error_rows(engine: EngineArg) -> tuple[ServingErrorRow, ...]:
    """Per engine pool: the 80 % TTFT and TPOT factors and their coverage with each model family held out
    (:func:`roofline.published.serving_error.serving_summary`); ``used`` marks the pool the SLO checks drew on."""
    from roofline.published.serving_error import engine_pool, serving_summary

    used = engine_pool(engine)
    out = []
    for r in serving_summary(0.8):
        t, u = r["figures"]["ttft"], r["figures"]["tpot"]
        out.append(
            ServingErrorRow(
                r["engine"],
                r["rows"],
                (t["low"], t["high"]),
                (u["low"], u["high"]),
                t["coverage"],
                u["coverage"],
                r["engine"] == used,
            )
        )
    return tuple(out)


def _text(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_text(x)}" for k, x in v.items())
    if isinstance(v, list | tuple):
        return ", ".join(_text(x) for x in v)
    return str(v)


def accuracy(inp: ReportInputs) -> tuple[tuple[AccuracyRow, ...], str]:
    """Median and p90 error of roofline against published measurements, or why it is unavailable."""
    try:
        from roofline.published.accuracy import ape_stats, evaluate_rows
    except ImportError:
        return (), "Unavailable: this installation has no roofline.published.accuracy.evaluate_rows."
    try:
        rep = evaluate_rows(profile=inp.profile)
    except RooflineError as exc:
        return (), f"Unavailable: the published rows could not be evaluated ({exc})."
    df = rep.rows
    if df.empty:
        return (), "Unavailable: no published measurement could be expressed as a roofline scenario."
    scopes: list[tuple[str, pd.DataFrame]] = [
        (f"all {k} rows", df[df["kind"] == k]) for k in sorted(df["kind"].unique())
    ]
    scopes += [(f"{h.display_name}", df[df["hardware"] == h.name]) for h in inp.hardware]
    scopes.append((f"{inp.model.display_name}", df[df["model"] == inp.model.name]))
    rows = []
    for label, sub in scopes:
        st = ape_stats(sub)
        rows.append(
            AccuracyRow(
                label, int(st["n"]), st["median_ape_pct"] / 100, st["p90_ape_pct"] / 100, st["median_error_pct"] / 100
            )
        )
    note = (
        f"Roofline with profile '{rep.profile}' against {len(df)} published measurements ({_display(Path(rep.data))}); "
        f"{len(rep.skipped)} other rows cannot be expressed yet. Absolute percentage error (APE); the signed error is "
        "positive when roofline predicts more than was measured. Scopes with no rows say so."
    )
    return tuple(rows), note


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


#: Where an installed wheel keeps the repository's spec and validation folders (pyproject's force-include).
BUNDLED_PREFIX = "roofline/_bundled/"


def _display(path: Path) -> str:
    """A spec file as the repository names it: relative to the checkout (or the working directory), with an
    installed wheel's ``roofline/_bundled/`` copy shown as the repository path it was built from."""
    root = DEFAULT_PROFILE_PATH.parents[2]
    for base in (root, Path.cwd()):
        try:
            rel = path.resolve().relative_to(base.resolve()).as_posix()
        except ValueError:
            continue
        return rel.removeprefix(BUNDLED_PREFIX)
    return str(path)


def _spec_file(kind: str, arg: str, spec: HardwareSpec | ModelSpec) -> SpecFile:
    from roofline.specs.library import hardware, model, spec_path

    p = Path(arg).expanduser()
    if p.suffix not in (".yaml", ".yml", ".json") or not p.exists():
        p = spec_path("hardware" if kind == "hardware" else "model", arg)
    loaded = hardware(p) if kind == "hardware" else model(p)
    if loaded != spec:
        return SpecFile(kind, spec.name, "(in-memory spec, no file)", _hash_text(spec.model_dump_json()))
    return SpecFile(kind, spec.name, _display(p), sha256(p))


def _hash_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def reproduce(inp: ReportInputs, out: str | Path | None) -> Reproduce:
    """Command, versions and SHA-256 of every spec and profile the report read."""
    import roofline

    files = [_spec_file("model", inp.model_arg, inp.model)]
    files += [_spec_file("hardware", a, h) for a, h in zip(inp.hardware_args, inp.hardware, strict=True)]
    if inp.calibration_path is not None:
        files.append(
            SpecFile("profile", inp.profile.name, _display(inp.calibration_path), sha256(inp.calibration_path))
        )
    elif inp.profile.name == "default" and inp.profile.device is None:
        files.append(SpecFile("profile", "default", _display(DEFAULT_PROFILE_PATH), sha256(DEFAULT_PROFILE_PATH)))
    else:
        files.append(SpecFile("profile", inp.profile.name, "(in-memory profile)", _hash_text(inp.profile.to_yaml())))
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    return Reproduce(
        cli_command(inp, out),
        python_call(inp, out),
        roofline.__version__,
        platform.python_version(),
        f"{platform.system()} {platform.machine()}",
        now.isoformat().replace("+00:00", "Z"),
        tuple(files),
    )


def _options(inp: ReportInputs) -> list[tuple[str, str]]:
    """(flag, value) pairs equivalent to the inputs; preset fields appear only when overridden."""
    wl = inp.workload
    load = ("--mix", inp.mix.source or "MIX.yaml") if inp.mix is not None else ("--workload", wl.name)
    opts = [("--hardware", ",".join(inp.hardware_args)), load]
    shown = (
        set(wl.overridden) if wl.name != "custom" else {"prompt_len", "output_len", "qps", "ttft_slo_s", "tpot_slo_s"}
    )
    for key, flag, text in (
        ("prompt_len", "--prompt", str(wl.prompt_len)),
        ("output_len", "--output", str(wl.output_len)),
        ("qps", "--qps", f"{wl.qps:g}"),
        ("ttft_slo_s", "--ttft-slo", f"{wl.ttft_slo_s * 1e3:g}ms"),
        ("tpot_slo_s", "--tpot-slo", f"{wl.tpot_slo_s * 1e3:g}ms"),
    ):
        if key in shown:
            opts.append((flag, text))
    if inp.precisions != ("checkpoint",):
        opts.append(("--precision", ",".join(inp.precisions)))
    if inp.tp_options:
        opts.append(("--tp", ",".join(map(str, inp.tp_options))))
    if inp.dp_options:
        opts.append(("--dp", ",".join(map(str, inp.dp_options))))
    if inp.kv_dtype:
        opts.append(("--kv-dtype", inp.kv_dtype))
    if inp.engine != "vllm":
        opts.append(("--engine", inp.engine))
    opts += [("--engine-set", f"{k}={v}") for k, v in inp.engine_overrides.items()]
    if inp.max_gpus:
        opts.append(("--max-gpus", str(inp.max_gpus)))
    opts += [("--price", f"{k}={v:g}") for k, v in sorted(inp.prices.items())]
    if inp.calibration_path is not None:
        opts.append(("--calibration", str(inp.calibration_path)))
    if inp.confidence != 0.8:
        opts.append(("--confidence", f"{inp.confidence:g}"))
    if inp.min_headroom is not None:
        opts.append(("--min-headroom", f"{inp.min_headroom:g}"))
    if inp.usd_per_kwh is not None:
        opts.append(("--electricity-price", f"{inp.usd_per_kwh:g}"))
    opts += procurement_flags(inp.procurement)
    if inp.seed:
        opts.append(("--seed", str(inp.seed)))
    return opts


def cli_command(inp: ReportInputs, out: str | Path | None) -> str:
    """The ``roofline report`` command line that regenerates this report."""
    parts = ["roofline", "report", inp.model_arg]
    for flag, value in _options(inp):
        parts += [flag, value]
    if out is not None:
        parts += ["-o", str(out)]
    return shlex.join(parts)


def python_call(inp: ReportInputs, out: str | Path | None) -> str:
    """The equivalent Python call."""
    wl = inp.workload
    load = f"mix={inp.mix.source or 'MIX.yaml'!r}" if inp.mix is not None else f"workload={wl.name!r}"
    args = [repr(inp.model_arg), f"hardware={','.join(inp.hardware_args)!r}", load]
    kw = {
        "prompt_len": wl.prompt_len,
        "output_len": wl.output_len,
        "qps": wl.qps,
        "ttft_slo_s": wl.ttft_slo_s,
        "tpot_slo_s": wl.tpot_slo_s,
    }
    shown = set(wl.overridden) if wl.name != "custom" else set(kw)
    args += [f"{k}={v!r}" for k, v in kw.items() if k in shown]
    if inp.precisions != ("checkpoint",):
        args.append(f"precision={','.join(inp.precisions)!r}")
    if inp.tp_options:
        args.append(f"tp_options={list(inp.tp_options)!r}")
    if inp.kv_dtype:
        args.append(f"kv_dtype={inp.kv_dtype!r}")
    if inp.engine != "vllm":
        args.append(f"engine={inp.engine!r}")
    if inp.engine_overrides:
        args.append(f"engine_overrides={dict(inp.engine_overrides)!r}")
    if inp.max_gpus:
        args.append(f"max_gpus={inp.max_gpus!r}")
    if inp.prices:
        args.append(f"prices={dict(inp.prices)!r}")
    if inp.calibration_path is not None:
        args.append(f"calibration={str(inp.calibration_path)!r}")
    args += [f"{k}={getattr(inp, k)!r}" for k in ("min_headroom", "usd_per_kwh") if getattr(inp, k) is not None]
    if inp.procurement != Procurement():
        args.append(f"procurement=roofline.{inp.procurement!r}")
    if inp.confidence != 0.8:
        args.append(f"confidence={inp.confidence!r}")
    if inp.seed:
        args.append(f"seed={inp.seed!r}")
    if out is None:
        return f"roofline.report.render({', '.join(args)})"
    return f"roofline.report.save({str(out)!r}, {', '.join(args)})"
