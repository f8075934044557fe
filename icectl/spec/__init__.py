"""Pure Iceberg spec model: no storage, no Avro, no CLI."""
