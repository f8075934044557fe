"""The commands: one module per family, each a register(app) adding module-level command functions."""
