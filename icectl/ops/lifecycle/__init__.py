"""A table's life in its catalog and format: ``register`` (an existing metadata file as a catalog
entry), ``upgrade`` (to a newer format version) and ``drop`` (the entry, and with ``--purge`` its
files), each its own module. ``create`` is its own family (:mod:`icectl.ops.create`)."""
