"""One module per transformation: a Dataset node and its iterator (docs/architecture.md,
"Rules that keep it simple")."""
