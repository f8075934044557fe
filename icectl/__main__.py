"""`python -m icectl` runs the CLI."""

from icectl.cli.launch import main

main()
