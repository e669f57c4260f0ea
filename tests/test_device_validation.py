"""Every device says which public measurements roofline is validated against on it, and a device none covers says
that (issue #29 item 4: vendors treated alike, the evidence each rests on disclosed)."""

from __future__ import annotations

import roofline
from roofline.profile import default_profile
from roofline.provenance import VALIDATION_PATH, device_evidence, device_validation, validation_sentence
from roofline.published.device_coverage import coverage, render


def test_the_shipped_counts_are_the_validation_sets_counts() -> None:
    assert VALIDATION_PATH.read_text(encoding="utf-8") == render(coverage())
    cov = device_validation()
    assert cov["h100-sxm"]["static end-to-end rows (published.csv)"] == 12
    assert set(cov) == {"a100-80gb-sxm", "b200", "h100-sxm", "h200-sxm", "l40s"}


def test_an_unmeasured_device_says_it_is_unvalidated_and_a_measured_one_counts_its_rows() -> None:
    for hw in ("mi300x", "tpu-v5p", "gaudi3", "rtx-4090"):
        text = validation_sentence(hw)
        assert "no public measurement of this device" in text and "unvalidated" in text, text
    assert validation_sentence("h200-sxm").startswith("validated on h200-sxm: 482 public measurements")
    lines = device_evidence(default_profile(), roofline.hardware("mi300x"))
    assert any("no public measurement of this device" in line for line in lines)
    shown = roofline.predict("llama-3.1-8b", "mi300x").evidence
    assert any("unvalidated here" in line for line in shown)
