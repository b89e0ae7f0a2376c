"""The PostgreSQL store: the storage ports on a PostgreSQL server (ADR-0029)."""
