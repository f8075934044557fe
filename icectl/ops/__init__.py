"""Operations: one module (or package) per command; each returns a typed result and never prints."""
