"""A plain `roofline simulate` (no --requests-out / --timeline-out / --plot) never builds its tables: pandas is not
imported, and the header's request count comes from the columns (``SimulationResult.num_requests``)."""

from __future__ import annotations

import os
import subprocess
import sys

import roofline

PROBE = """
import sys
from roofline.cli import main
sys.argv = ["roofline", "simulate", "llama-3.1-8b", "h100-sxm", "--qps", "5", "-N", "40"]
try:
    main()
except SystemExit:
    pass
print("PANDAS" if "pandas" in sys.modules else "NO-PANDAS")
"""


def test_plain_simulate_cli_does_not_import_pandas() -> None:
    env = {**os.environ, "COLUMNS": "250"}
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, env=env).stdout
    assert "40 requests simulated" in out
    assert out.strip().endswith("NO-PANDAS")


def test_num_requests_is_the_table_length() -> None:
    s = roofline.simulate("llama-3.1-8b", "h100-sxm", qps=5.0, num_requests=30, seed=1)
    assert s.num_requests == 30 == len(s.requests)
