"""``roofline simulate --spec``: the speculative-decoding simulator behind the simulate command.

Heavy libraries are imported inside the function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def simulate_spec(spec: str) -> Callable[..., Any]:
    """A ``simulate``-compatible callable that runs :func:`simulate_speculative` with ``spec``."""
    from roofline.serving.sim.speculative import simulate_speculative
    from roofline.specs.speculative import SpeculativeConfig

    cfg = SpeculativeConfig.parse(spec)

    def run(model: Any, hardware: Any, **kw: Any) -> Any:
        for k in ("pp", "ep", "prefix_share", "progress"):
            kw.pop(k, None)
        if kw.pop("replicas", 1) != 1:
            from roofline.cli.options import OptionError

            raise OptionError("--replicas is not available with --spec yet; drop one of them")
        return simulate_speculative(model, hardware, cfg, **kw)

    return run
