"""The profiles a closed-loop validation predicts with: the ideal roofline of a device, a profile's own curve for
one dtype, and the device a measured profile describes."""

from __future__ import annotations

from roofline.errors import CalibrationError
from roofline.profile import CalibrationProfile, Curve, datasheet_profile
from roofline.specs.hardware import HardwareSpec


def ideal_profile(prof: CalibrationProfile) -> CalibrationProfile:
    """The pure roofline of ``prof``'s device: efficiency 1 against its peaks, no curves, no overheads.

    Peaks are the datasheet's on a bundled GPU and, on a device without one (a CPU), the best
    rates measured in the calibration run (the embedded HardwareSpec). Every op reaching them
    is a lower bound on time, so predicted ≤ measured is a one-sided check needing no fit
    (caches faster than the measured memory peak aside).
    """
    return datasheet_profile(prof, keep_hardware=True)


def profile_for_dtype(prof: CalibrationProfile, dtype: str) -> CalibrationProfile:
    """``prof`` with its GEMM-M curve for ``dtype`` when the profile records one per dtype.

    A profile carries one ``gemm_m_efficiency`` (calibration takes the median over the dtypes it
    measured); the fit also keeps each dtype's own curve under
    ``residuals.gemm_m_efficiency_by_dtype``. The model runs in one dtype, so its curve is the
    one to predict with (see calibrate/NOTES_validate.md). Otherwise ``prof`` is returned as is.
    """
    if dtype in prof.gemm_m_efficiency_by_dtype:  # the evaluator already picks it per format
        return prof
    curves = prof.residuals.get("gemm_m_efficiency_by_dtype")
    curve = curves.get(dtype) if isinstance(curves, dict) else None
    if not isinstance(curve, dict) or "x" not in curve or "y" not in curve:
        return prof
    own = Curve(x=tuple(curve["x"]), y=tuple(curve["y"]), sources=(f"{dtype} curve of {prof.name}",))
    return prof.model_copy(update={"gemm_m_efficiency": own})


def profile_hardware(prof: CalibrationProfile, hardware: str | HardwareSpec | None = None) -> HardwareSpec:
    """The device a measured profile describes: ``hardware`` if given, else its embedded spec, else its slug."""
    import roofline

    if isinstance(hardware, HardwareSpec):
        return hardware
    if hardware is not None:
        embedded = prof.hardware
        return embedded if embedded is not None and embedded.name == hardware else roofline.hardware(hardware)
    if prof.hardware is not None:
        return prof.hardware
    if prof.device is not None:
        return roofline.hardware(prof.device)
    raise CalibrationError(
        f"profile '{prof.name}' names no device; validate against a measured profile (`roofline calibrate`) "
        "or pass --hardware"
    )
