"""Capacity planning on the simulator: the planner (``planner``) and its typed results (``result``), the
closed-form screening tier (``screening``), finalists sized on the simulator (``finalists``), and the
disaggregation and speculation planners (``disagg``, ``speculative``)."""
