"""calibrate: measure a device and fit a roofline CalibrationProfile.

Suites (``calibrate.suites``) time GEMMs, memory transfers, attention, fixed overheads and
collectives with torch; ``calibrate.fitting.fit`` (numpy only) turns the records into ceilings,
efficiency curves and overheads with the semantics of ``roofline.evaluate``; ``calibrate.fitting.build``
writes the versioned profile. Entry points: ``calibrate.cli.run_calibration`` /
``show_profile`` and ``python -m calibrate``. Importing this package never imports torch.
"""
