"""The store core every SQL dialect shares: codec, log rows, transaction, projections, audit."""
