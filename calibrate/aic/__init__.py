"""AIConfigurator's collected kernel tables (``pip install -e ".[aic]"``) read as per-op evidence.

``calibrate.aic.tables`` finds and loads the parquet tables of ``aiconfigurator-core`` with SI
columns; ``calibrate.aic.compare`` times the equivalent roofline op for every row and summarises
predicted / measured. Only the data is read; nothing imports AIConfigurator's code, and importing
this package imports neither pyarrow nor aiconfigurator.
"""
