"""Command-line interface: ``app`` registers the commands, one module per command group.

The modules here only parse options and render results; every number comes from the core,
``roofline.serving`` or ``roofline.report``.
"""

from __future__ import annotations


def main() -> None:
    """Entry point of the ``roofline`` console script."""
    from roofline.cli.app import main as _main

    _main()
