"""Benchmarks, one module per area, each with `run(out)`: ingest (and chargeback), collectors, costs, pages.

`python -m benchmarks [--only AREA]` (what `make bench` runs) prints one `name: value` line per figure,
against PostgreSQL, on a throwaway database (harness.py).
"""
