"""``python -m roofline`` runs the command line."""

from roofline.cli.app import main

main()
