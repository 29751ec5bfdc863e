"""Benchmarks: vfl's protocol against the textbook ``phe`` implementation (``python -m benchmarks``)."""
