"""One module per source: a Dataset node and its iterator (DESIGN.md)."""
