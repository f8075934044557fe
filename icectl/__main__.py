"""`python -m icectl` runs the CLI."""

from icectl.cli.app import main

main()
