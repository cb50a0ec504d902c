"""Pure types and rules of the data plane: no I/O, no asyncpg, nothing above it."""
