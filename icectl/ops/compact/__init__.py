"""Manifest compaction: planning per (spec, content) group, then one write / verify / commit loop."""
