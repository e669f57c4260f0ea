"""``python -m roofline`` runs the command line."""

from roofline.cli import main

main()
