"""Benchmarks: each module measures flower against a baseline taken in the same run.

Run all with `python -m bench` (or `make bench`), one with `python -m bench.<name>`. Figures
are printed as ratios against the baseline; targets are checked here, never in unit tests.
"""
