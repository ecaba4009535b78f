"""Side-by-side workloads W1-W4 for ``benchmarks/run.py`` (datapipe vs tf.data vs torch)."""
