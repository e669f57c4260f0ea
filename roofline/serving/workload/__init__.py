"""What the simulator serves: arrival processes and length distributions (``arrivals``), trace replay
(``trace``) and named workload presets with their SLOs (``presets``)."""
