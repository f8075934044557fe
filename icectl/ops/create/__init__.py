"""Creating tables: new table metadata (Java's newTableMetadata), DDL and schema files, the commit."""
