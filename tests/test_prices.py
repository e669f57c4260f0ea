"""Bundled on-demand prices: every price block is positive, dated, cited and matches its own arithmetic.

A price is USD per GPU-hour (per chip-hour for TPUs): a provider's on-demand instance price divided
by the accelerators in the instance. Each ``source`` names the provider, says "on-demand", gives an
address, and states the per-GPU figure ("$X per GPU-hour"); when the figure is derived it also states
the instance price and count ("$P per hour for N GPUs"), and the test re-derives X = P / N.
Devices with no public on-demand list price carry none and say how to supply one (``--price``).
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from roofline.specs.hardware import HardwareSpec
from roofline.specs.library import load_spec_file

HW_DIR = Path(__file__).resolve().parents[1] / "hardware_specs"
SPEC_FILES = sorted(HW_DIR.glob("*.yaml"))

# Providers whose public on-demand price lists the bundled prices come from.
PROVIDERS = ("Lambda", "Crusoe", "CoreWeave", "Microsoft Azure", "AWS", "Google Cloud", "RunPod")

# No public on-demand list price was found for these (see the comment at the end of each YAML).
UNPRICED = {"b300", "gaudi3", "gb300", "h20", "mi325x"}

# Expected per-accelerator prices, by hand from the cited instance prices (USD per GPU- or chip-hour).
EXPECTED_USD_PER_GPU_HOUR = {
    "a100-40gb-sxm": 1.99,  # Lambda, listed per GPU-hour
    "a100-80gb-sxm": 2.79,  # Lambda, listed per GPU-hour
    "a100-80gb-pcie": 2.00,  # Crusoe, listed per GPU-hour
    "b200": 6.69,  # Lambda 8x B200, listed per GPU-hour
    "gb200": 42.00 / 4,  # CoreWeave GB200 NVL72 instance: $42.00/h for 4 GPUs
    "h100-nvl": 6.98 / 1,  # Azure Standard_NC40ads_H100_v5: $6.98/h, 1 H100 NVL
    "h100-pcie": 3.29,  # Lambda 1x H100 PCIe
    "h100-sxm": 3.99,  # Lambda 8x H100 SXM, listed per GPU-hour
    "h200-sxm": 4.29,  # Crusoe H200 HGX, listed per GPU-hour
    "l4": 0.8048 / 1,  # AWS g6.xlarge: $0.8048/h, 1 L4
    "l40s": 1.50,  # Crusoe, listed per GPU-hour
    "mi300x": 3.45,  # Crusoe, listed per GPU-hour
    "rtx-4090": 5.52 / 8,  # RunPod 8x_RTX4090_SECURE: $5.52/h for 8 GPUs
    "tpu-v5e": 76.80 / 64,  # Google Cloud tpu-v5litepod-64: $76.80/h for 64 chips
    "tpu-v5p": 16.80 / 4,  # Google Cloud tpu-v5p-8 (4 chips): $16.80/h
}

PER_UNIT = re.compile(r"\$([\d,]+(?:\.\d+)?) per (?:GPU|chip)-hour")
PER_INSTANCE = re.compile(r"\$([\d,]+(?:\.\d+)?) per hour for (\d+) (?:GPUs?|chips?)")


def _usd(text: str) -> float:
    return float(text.replace(",", ""))


def _spec(path: Path) -> HardwareSpec:
    return load_spec_file(HardwareSpec, path)


def test_every_bundled_device_is_priced_or_listed_unpriced() -> None:
    """Adding or removing a price must update this list, so the report's unpriced set stays deliberate."""
    names = {_spec(p).name for p in SPEC_FILES}
    priced = {_spec(p).name for p in SPEC_FILES if _spec(p).price is not None}
    assert names - priced == UNPRICED
    assert priced == set(EXPECTED_USD_PER_GPU_HOUR)


#: The latest date a bundled price may carry (raise it when adding a newer price): a fixed bound, not the clock.
LATEST_PRICE_DATE = dt.date(2026, 12, 31)


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_price_block_is_positive_dated_and_cited(path: Path) -> None:
    spec = _spec(path)
    if spec.price is None:
        assert spec.name in UNPRICED
        return
    price = spec.price
    assert price.usd_per_gpu_hour > 0
    assert dt.date(2024, 1, 1) <= price.date <= LATEST_PRICE_DATE  # a date outside the collection window is a typo
    raw = path.read_text(encoding="utf-8")
    assert re.search(r"^\s+date: \d{4}-\d{2}-\d{2}$", raw, re.M), "price date must be ISO YYYY-MM-DD"
    src = price.source
    assert [p for p in PROVIDERS if p in src], f"{spec.name}: source names no provider: {src}"
    assert "on-demand" in src and "https://" in src


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_price_matches_its_source_arithmetic(path: Path) -> None:
    """The stored value equals the "$X per GPU-hour" the source states, and X = P / N when derived."""
    spec = _spec(path)
    if spec.price is None:
        return
    usd = spec.price.usd_per_gpu_hour
    stated = [_usd(m) for m in PER_UNIT.findall(spec.price.source)]
    assert any(abs(x - usd) < 1e-9 for x in stated), f"{spec.name}: source states {stated}, spec has {usd}"
    for total, count in PER_INSTANCE.findall(spec.price.source):
        assert _usd(total) / int(count) == pytest.approx(usd, abs=0.005)
    assert usd == pytest.approx(EXPECTED_USD_PER_GPU_HOUR[spec.name], rel=1e-12)


@pytest.mark.parametrize("name", sorted(UNPRICED))
def test_unpriced_devices_say_how_to_supply_a_price(name: str) -> None:
    raw = (HW_DIR / f"{name}.yaml").read_text(encoding="utf-8")
    assert f"--price {name}=USD" in raw


def test_capacity_is_rented_in_whole_instances_by_hand() -> None:
    """A replica stays in its instances: k = floor(instance / replica) share one; a replica larger than an
    instance takes ceil(replica / instance) of them (issue #29 item 5: price what a buyer pays)."""
    from roofline.serving.plan.result import rented_gpus

    assert rented_gpus(3, 4, 8) == 16  # 3 x tp4 on 8-GPU nodes: 2 per node, 2 nodes
    assert rented_gpus(2, 4, 8) == 8
    assert rented_gpus(3, 1, 8) == 8
    assert rented_gpus(5, 3, 8) == 24  # tp3: 2 per 8-GPU node (2 GPUs idle each), 3 nodes
    assert rented_gpus(2, 16, 8) == 32  # tp16 across two 8-GPU nodes each
    assert rented_gpus(7, 2, 1) == 14  # single-GPU rentals: exactly what is used
    assert rented_gpus(0, 8, 8) == 0


def test_each_price_states_the_instance_its_source_rents() -> None:
    """The instance size is the one the price's source names (8x instances, a 4-GPU GB200 slice, single GPUs)."""
    import roofline

    want = {"h100-sxm": 8, "h200-sxm": 8, "b200": 8, "gb200": 4, "h100-pcie": 1, "l4": 1, "tpu-v5p": 4}
    for name, n in want.items():
        price = roofline.hardware(name).price
        assert price is not None and price.gpus_per_instance == n, name
        assert (
            f"{n}x" in price.source
            or f"{n} GPUs" in price.source
            or f"{n} chips" in price.source
            or f"{n}-GPU" in price.source
            or f"for {n} GPU" in price.source
        ), name
