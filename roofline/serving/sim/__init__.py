"""The engine simulation: event loop (``engine``), scheduler policies (``policy``), paged KV pool
(``kvpool``), request lifecycle (``lifecycle``), decode stretches in closed form (``stretch``), the
compiled step model (``steptime``), latency statistics (``metrics``, ``runstats``), the one result
type (``result``) and the speculative and disaggregated variants beside it (``speculative``, ``disagg``)."""
