"""`icectl inspect`: one module per kind of view (metadata-only views in ``metadata``, the
manifest-reading views in ``views``, the v4 tree in ``tree``, their results in ``result``)."""
