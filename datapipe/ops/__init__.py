"""One module per transformation: a Dataset node and its iterator (DESIGN.md)."""
