"""The command-line layer: parses arguments, calls icectl's core, renders the result."""
