"""Benchmarks: `python -m bench` (see BENCHMARKS.md). Never imported by the product apps."""
