"""Codecs: bytes in, bytes out (Avro manifests and lists, v4 root manifests, Puffin, Parquet footers).

Never storage: callers read and write the bytes through :mod:`icectl.storage`. The fastavro
plumbing every Avro codec shares (containers, schemas, field ids, values) is :mod:`icectl.codec.avro`.
"""
