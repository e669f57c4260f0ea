"""HTML reports and notebook views of roofline predictions and capacity plans.

    html = roofline.report.render("llama-3.1-70b", hardware="h100-sxm,h200-sxm", workload="chat")
    roofline.report.save("reports/llama-chat.html", "llama-3.1-70b", hardware="h100-sxm", workload="rag")
    rep = roofline.report.build("llama-3.1-70b", workload="chat"); rep.data.recommended; rep.save(path)

Heavy libraries (matplotlib, jinja2) load only when a report or chart is made.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "build": "roofline.report.api",
    "render": "roofline.report.api",
    "save": "roofline.report.api",
    "Report": "roofline.report.api",
    "WorkloadPreset": "roofline.serving.workload.presets",
    "PRESETS": "roofline.serving.workload.presets",
    "resolve_workload": "roofline.serving.workload.presets",
    "roofline_figure": "roofline.report.charts",
    "prediction_html": "roofline.report.notebook",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'roofline.report' has no attribute {name!r}")
