"""The bench harness: which areas run and in what order, where it refuses to run, and what it prints."""

import io
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from benchmarks import harness

ROOT = Path(__file__).resolve().parents[2]


def test_it_runs_the_ingest_bench_first_then_every_other_area():
    assert harness.areas_selected() == ["ingest", "collectors", "costs", "pricing", "pages", "storage", "fleet"]


def test_only_runs_the_areas_it_names_by_module_or_by_app():
    assert harness.areas_selected(["costs"]) == ["costs"]
    assert harness.areas_selected(["usage"]) == ["ingest"]
    assert harness.areas_selected(["dashboard", "collectors"]) == ["collectors", "pages"]
    assert harness.areas_selected(["scaling"]) == ["storage"]
    assert harness.areas_selected(["nothing-by-that-name"]) == []


def test_every_area_is_a_module_with_a_run_function():
    import importlib

    for area in harness.areas_selected():
        assert callable(importlib.import_module(f"benchmarks.{area}").run), area


def test_figures_are_printed_one_name_value_line_each():
    stream = io.StringIO()
    out = harness.printer(stream)

    out("csv_rows", 1000)
    out("csv_vs_copy", 0.93)

    assert stream.getvalue() == "csv_rows: 1000\ncsv_vs_copy: 0.93\n"


def test_a_ratio_is_rounded_and_a_zero_denominator_gives_zero():
    assert harness.ratio(1, 3) == 0.33
    assert harness.ratio(1, 3, 3) == 0.333
    assert harness.ratio(5, 0) == 0.0


def test_median_ms_times_each_function_in_turn():
    calls = []

    timings = harness.median_ms(lambda: calls.append("a"), lambda: calls.append("b"), repeats=3)

    assert calls == ["a", "b"] * 3
    assert len(timings) == 2 and all(ms >= 0 for ms in timings)


@pytest.mark.skipif(connection.vendor == "postgresql", reason="checks the refusal on SQLite")
def test_it_refuses_to_run_on_sqlite():
    with pytest.raises(harness.BenchError, match="PostgreSQL"):
        harness.run()


def test_python_m_benchmarks_explains_its_options():
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--help"], cwd=ROOT, capture_output=True, text=True, check=False
    )

    assert result.returncode == 0
    assert "--only" in result.stdout
