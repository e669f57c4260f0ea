"""Typed specs: hardware, model, scenario."""

from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec

__all__ = ["HardwareSpec", "ModelSpec"]
