"""The engine simulation: event loop (``engine``), scheduler policies (``policy``), paged KV pool
(``kvpool``), request lifecycle (``lifecycle``), batch formation (``admission``), decode stretches in closed
form (``decoding``, ``stretch``), the compiled step model (``steptime``, its numpy paths in ``meanstep``), latency
statistics (``metrics``, ``runstats``), the one result type (``result``) and the speculative and disaggregated
variants beside it (``speculative``, ``disagg``)."""
