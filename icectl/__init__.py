"""icectl: administration of Apache Iceberg tables.

The core library works without the CLI; start with :func:`icectl.table.load_table`.
"""

__version__ = "0.1.0"
