"""Operations on a table's data files as they are: ``add-files`` (register existing Parquet files)
and ``remove-files`` (v4: mark data files removed), each its own module."""
