"""Bundled hardware specs: every YAML loads, and its datasheet numbers match the reference table.

``REFERENCE`` below is transcribed from ``shared/reference/hardware.csv`` (decimal TB/s, dense
TFLOPS / TOPS; ``fp32`` is the non-tensor peak). When that csv is reachable,
``test_reference_transcription_matches_csv`` checks the transcription cell by cell, so the two
cannot drift apart; the spec tests themselves run without it.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import pytest

import roofline
from roofline.errors import UnknownNameError
from roofline.specs.hardware import COMPUTE_DTYPES, HardwareSpec
from roofline.specs.library import load_spec_file

REPO = Path(__file__).resolve().parents[1]
HW_DIR = REPO / "hardware_specs"
SPEC_FILES = sorted(HW_DIR.glob("*.yaml"))
REL = 1e-9

# csv column of each PeakDense field (all dense; fp32 is the CUDA-core / vector peak).
PEAK_COLUMNS = {
    "fp32": "fp32_tflops",
    "tf32": "tf32_tflops_dense",
    "bf16": "bf16_tflops_dense",
    "fp16": "fp16_tflops_dense",
    "fp8": "fp8_tflops_dense",
    "int8": "int8_tops_dense",
    "fp4": "fp4_tflops_dense",
}

# csv name -> (slug, memory_gb as labelled, memory_bw_tb_s, {dtype: dense TFLOPS or TOPS}).
# A dtype missing here has an empty csv cell and must be None in the spec.
# A10G is left out on purpose: the csv has no tensor peaks for it, so it has no spec.
REFERENCE: dict[str, tuple[str, float, float, dict[str, float]]] = {
    "A100 40GB SXM": ("a100-40gb-sxm", 40, 1.555, {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312, "int8": 624}),
    "A100 80GB SXM": ("a100-80gb-sxm", 80, 2.039, {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312, "int8": 624}),
    "A100 80GB PCIe": ("a100-80gb-pcie", 80, 1.935, {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312, "int8": 624}),
    "H100 SXM": (
        "h100-sxm",
        80,
        3.35,
        {"fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979, "int8": 1979},
    ),
    "H100 PCIe": (
        "h100-pcie",
        80,
        2.0,
        {"fp32": 51, "tf32": 378, "bf16": 756.5, "fp16": 756.5, "fp8": 1513, "int8": 1513},
    ),
    "H100 NVL": (
        "h100-nvl",
        94,
        3.9,
        {"fp32": 60, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5, "int8": 1670.5},
    ),
    "H200 SXM": (
        "h200-sxm",
        141,
        4.8,
        {"fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979, "int8": 1979},
    ),
    "H20": ("h20", 96, 4.0, {"fp32": 44, "tf32": 74, "bf16": 148, "fp16": 148, "fp8": 296, "int8": 296}),
    "L40S": ("l40s", 48, 0.864, {"fp32": 91.6, "tf32": 183, "bf16": 362.05, "fp16": 362.05, "fp8": 733, "int8": 733}),
    "L4": ("l4", 24, 0.3, {"fp32": 30.29, "tf32": 60, "bf16": 121, "fp16": 121, "fp8": 242.5, "int8": 242.5}),
    "B200": (
        "b200",
        180,
        7.7,
        {"fp32": 75, "tf32": 1100, "bf16": 2250, "fp16": 2250, "fp8": 4500, "int8": 4500, "fp4": 9000},
    ),
    "GB200 (per GPU)": (
        "gb200",
        186,
        8.0,
        {"fp32": 80, "tf32": 1250, "bf16": 2500, "fp16": 2500, "fp8": 5000, "int8": 5000, "fp4": 10000},
    ),
    "MI300X": (
        "mi300x",
        192,
        5.3,
        {"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "int8": 2614.9},
    ),
    "MI325X": (
        "mi325x",
        256,
        6.0,
        {"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "int8": 2614.9},
    ),
    "Gaudi 3 (HL-325L OAM)": ("gaudi3", 128, 3.67, {"bf16": 1835, "fp8": 1835}),
    "TPU v5e": ("tpu-v5e", 16, 0.819, {"bf16": 197, "int8": 393}),
    "TPU v5p": ("tpu-v5p", 95, 2.765, {"bf16": 459, "fp8": 459, "int8": 918}),
    "GeForce RTX 4090": (
        "rtx-4090",
        24,
        1.008,
        {"fp32": 82.58, "tf32": 82.58, "bf16": 165.15, "fp16": 165.15, "fp8": 330.3, "int8": 660.6},
    ),
}

# Specs hardware.csv has no row for, transcribed from the NVIDIA-authored AIConfigurator system file
# each one cites (ai-dynamo/aiconfigurator @ 095f58a, aic-core/src/aiconfigurator_core/systems/<file>):
# slug -> (AIC file, memory as labelled in GiB, device-reported MiB, memory_bw_tb_s, {dtype: dense TFLOPS or TOPS}).
# AIC lists bfloat16 only (no separate fp16 row), so fp16 / tf32 / fp32 must stay None.
AIC_ONLY: dict[str, tuple[str, float, int, float, dict[str, float]]] = {
    "b300": ("b300_sxm.yaml", 288, 275040, 7.75, {"bf16": 2250, "fp8": 4500, "int8": 153.5, "fp4": 14000}),
    "gb300": ("gb300.yaml", 288, 284208, 8.0, {"bf16": 2500, "fp8": 5000, "int8": 165, "fp4": 15000}),
}

# Per-direction scale-up bandwidth in GB/s, derived from the csv's interconnect_bw_gb_s and its
# direction note: NVIDIA NVLink, TPU ICI and Intel RoCE totals are bidirectional (halved); AMD's
# 896 GB/s is the bidirectional aggregate of 7 links x 64 GB/s per direction. None = no figure.
PER_DIRECTION_GB_S: dict[str, float | None] = {
    "a100-40gb-sxm": 300,
    "a100-80gb-sxm": 300,
    "a100-80gb-pcie": 300,
    "h100-sxm": 450,
    "h100-pcie": 300,
    "h100-nvl": 300,
    "h200-sxm": 450,
    "h20": 450,
    "l40s": None,  # no NVLink: PCIe Gen4 x16 (64 GB/s bidirectional) is its fallback path
    "l4": None,
    "b200": 900,
    "gb200": 900,
    "b300": 900,
    "gb300": 900,
    "mi300x": 448,
    "mi325x": 448,
    "gaudi3": 600,
    "tpu-v5e": 200,
    "tpu-v5p": 600,
    "rtx-4090": None,
}


def _load_all() -> dict[str, HardwareSpec]:
    specs = {}
    for path in SPEC_FILES:
        spec = load_spec_file(HardwareSpec, path)
        specs[spec.name] = spec
    return specs


SPECS = _load_all()


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=0.0)


def _reference_csv() -> Path:
    """shared/reference/hardware.csv (under $ROOFLINE_REFERENCE_DIR, in the checkout or beside it),
    else the copy shipped in tests/fixtures/reference/."""
    candidates = [
        REPO / "shared" / "reference",
        REPO.parent / "shared" / "reference",
        REPO / "tests" / "fixtures" / "reference",
    ]
    if os.environ.get("ROOFLINE_REFERENCE_DIR"):
        candidates.insert(0, Path(os.environ["ROOFLINE_REFERENCE_DIR"]))
    for d in candidates:
        if (d / "hardware.csv").is_file():
            return d / "hardware.csv"
    raise FileNotFoundError("tests/fixtures/reference/hardware.csv is missing from the checkout")


@pytest.fixture(autouse=True)
def _bundled_specs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """User spec directories would shadow the bundled files; test the bundled ones only."""
    monkeypatch.delenv("ROOFLINE_SPECS_PATH", raising=False)


def test_at_least_eighteen_bundled_specs() -> None:
    assert len(SPEC_FILES) >= 18
    assert len(SPECS) == len(SPEC_FILES), "two files share a name"


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_file_name_is_the_slug_and_spec_cites_sources(path: Path) -> None:
    spec = load_spec_file(HardwareSpec, path)
    assert spec.name == path.stem
    assert len(spec.sources) >= 1
    assert all(s.fields.strip() and s.ref.strip() for s in spec.sources)


@pytest.mark.parametrize("csv_name", sorted(REFERENCE))
def test_datasheet_numbers_match_reference(csv_name: str) -> None:
    slug, memory_gb, bw_tb_s, peaks = REFERENCE[csv_name]
    spec = SPECS[slug]

    # GIVEN the csv in decimal TB/s and TFLOPS, THEN the spec holds the same value in B/s and FLOP/s.
    assert _close(spec.memory.bandwidth_bytes_per_s, bw_tb_s * 1e12)
    for dtype in COMPUTE_DTYPES:
        got = spec.peak_flops_per_s(dtype)
        if dtype in peaks:
            assert got is not None, f"{slug}: {dtype} is in the csv but missing from the spec"
            assert _close(got, peaks[dtype] * 1e12), f"{slug}: {dtype} {got} != {peaks[dtype]}e12"
        else:
            assert got is None, f"{slug}: {dtype} is empty in the csv but set in the spec"

    # The vendor's capacity label is kept; the spec only chooses decimal GB or binary GiB.
    cap = spec.memory.capacity_bytes
    assert cap in (memory_gb * 1e9, memory_gb * 2**30), f"{slug}: {cap} B is neither {memory_gb} GB nor GiB"


@pytest.mark.parametrize("slug", sorted(PER_DIRECTION_GB_S))
def test_interconnect_is_per_direction(slug: str) -> None:
    spec = SPECS[slug]
    want = PER_DIRECTION_GB_S[slug]
    if want is None:
        assert spec.interconnect is None
    else:
        assert spec.interconnect is not None
        assert _close(spec.interconnect.bandwidth_per_direction_bytes_per_s, want * 1e9)


@pytest.mark.parametrize("slug", sorted(AIC_ONLY))
def test_aic_only_specs_match_their_system_file(slug: str) -> None:
    """B300 / GB300: no hardware.csv row; the numbers are the AIC file's, and the spec cites that file."""
    aic_file, label_gib, reported_mib, bw_tb_s, peaks = AIC_ONLY[slug]
    spec = SPECS[slug]
    assert _close(spec.memory.bandwidth_bytes_per_s, bw_tb_s * 1e12)
    for dtype in COMPUTE_DTYPES:
        got = spec.peak_flops_per_s(dtype)
        if dtype in peaks:
            assert got is not None and _close(got, peaks[dtype] * 1e12), f"{slug}: {dtype} {got} != {peaks[dtype]}e12"
        else:
            assert got is None, f"{slug}: {dtype} is not in {aic_file} but set in the spec"
    # Label kept as GiB; every memory decision uses the nvidia-smi figure AIC records.
    assert spec.memory.capacity_bytes == label_gib * 2**30
    assert spec.memory.visible_capacity_bytes == reported_mib * 2**20
    assert spec.memory.usable_capacity_bytes == reported_mib * 2**20
    assert spec.scale_out_bandwidth_per_direction_bytes_per_s == pytest.approx(100e9)  # CX8 800 Gb/s per GPU
    refs = " ".join(s.ref for s in spec.sources)
    assert f"095f58a51c4ca8e61b66ec108d86f223f8d559ce/aic-core/src/aiconfigurator_core/systems/{aic_file}" in refs


def test_reference_covers_every_spec() -> None:
    assert {slug for slug, *_ in REFERENCE.values()} | set(AIC_ONLY) == set(SPECS)
    assert not {slug for slug, *_ in REFERENCE.values()} & set(AIC_ONLY)
    assert set(PER_DIRECTION_GB_S) == set(SPECS)


def test_reference_transcription_matches_csv() -> None:
    path = _reference_csv()
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    with_tensor_peaks = {
        r["name"]: r for r in rows if any(r[PEAK_COLUMNS[d]].strip() for d in COMPUTE_DTYPES if d != "fp32")
    }
    # Every csv row with a tensor peak has a spec (A10G has none and is the only row without one).
    assert set(with_tensor_peaks) == set(REFERENCE)
    assert {r["name"] for r in rows} - set(with_tensor_peaks) == {"A10G"}
    for name, row in with_tensor_peaks.items():
        _, memory_gb, bw_tb_s, peaks = REFERENCE[name]
        assert float(row["memory_gb"]) == memory_gb, name
        assert float(row["memory_bw_tb_s"]) == bw_tb_s, name
        csv_peaks = {d: float(row[c]) for d, c in PEAK_COLUMNS.items() if row[c].strip()}
        assert csv_peaks == peaks, name


def test_library_lists_every_slug() -> None:
    listed = set(roofline.list_hardware())
    assert set(SPECS) <= listed


ALIASES = sorted((alias, spec.name) for spec in SPECS.values() for alias in spec.aliases)


def test_aliases_are_unique_and_never_shadow_a_slug() -> None:
    names = [a.lower() for a, _ in ALIASES]
    assert len(names) == len(set(names)), "an alias is claimed by two specs"
    assert not set(names) & set(SPECS), "an alias equals another spec's slug"


@pytest.mark.parametrize(("alias", "slug"), ALIASES)
def test_every_alias_resolves_to_its_spec(alias: str, slug: str) -> None:
    assert roofline.hardware(alias) == SPECS[slug]
    assert roofline.hardware(alias.upper()).name == slug  # exact match, case-insensitive


@pytest.mark.parametrize("slug", sorted(SPECS))
def test_every_slug_resolves_to_its_spec(slug: str) -> None:
    assert roofline.hardware(slug) == SPECS[slug]


def test_bare_h100_is_ambiguous_and_not_an_alias() -> None:
    # SXM, PCIe and NVL differ in bandwidth and peaks by up to 1.7x; the user must pick one.
    with pytest.raises(UnknownNameError):
        roofline.hardware("h100")
