"""Rich table of a :class:`~roofline.speculation.decode.SpeculativeDecode` (renders only, computes nothing)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from rich.table import Table

from roofline.cli.render import num

if TYPE_CHECKING:
    from roofline.speculation.decode import SpeculativeDecode


def speculative_table(sd: SpeculativeDecode) -> Table:
    """Method, k, τ, verify and draft milliseconds per step, and the speedup over plain decoding."""
    c = sd.config
    title = f"speculative decoding: {c.label()}"
    t = Table(title=title, title_justify="left", min_width=len(title))
    t.add_column("field")
    t.add_column("value", justify="right")
    t.add_row("method", c.method + (f" ({c.draft_model})" if c.draft_model else ""))
    t.add_row("speculated tokens k", str(c.k))
    t.add_row("tokens verified per sequence", str(c.verify_tokens))
    t.add_row("tokens per step τ", num(sd.tokens_per_step))
    t.add_row("verify ms/step (mean)", num(float(np.mean(sd.verify_s)) * 1e3))
    t.add_row("draft ms/step (mean, k passes)", num(float(np.mean(sd.draft_s)) * 1e3))
    t.add_row("speedup vs plain decode", f"{num(sd.speedup)}×")
    return t
