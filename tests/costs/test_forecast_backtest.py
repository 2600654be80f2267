"""The forecast method is chosen by backtest on real months: Helios Earth VCs in May 2020 (hourly allocated GPUs,
as team spend at a flat rate) and the Alibaba DLRM month (one-GPU inference instances per app). At each cut-off day
every team's month-end is forecast from the days up to it and scored against what the team really spent: MAPE of
the month-end, and how often the 80% interval held it. The chosen method must be no worse than the naive run-rate.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

from governance.costs.forecasts import method_for
from governance.lib.forecast import METHODS, NAIVE, month_forecast

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "traces"
HELIOS = DATA / "helios-2020" / "earth_vc_hourly_may2020.csv"
DLRM = DATA / "alibaba-dlrm-2025" / "dlrm_instances_sample.csv"
CUTOFFS = (3, 7, 10, 14, 21, 25)
DLRM_END_S = 2_677_541
DLRM_FIRST = date(2026, 10, 1)


def helios_months() -> dict[str, dict[date, float]]:
    if not HELIOS.exists():
        pytest.skip(f"needs the Helios trace at {HELIOS} (../shared/data, present in CI)")
    series: dict[str, dict[date, float]] = defaultdict(lambda: defaultdict(float))
    with HELIOS.open() as f:
        for row in csv.DictReader(f):
            day = datetime.fromisoformat(row["hour_start"]).date()
            series[row["vc"]][day] += float(row["running_gpu_num_mean"])  # GPU-hours of that hour
    return {vc: dict(days) for vc, days in series.items()}


def dlrm_months() -> dict[str, dict[date, float]]:
    if not DLRM.exists():
        pytest.skip(f"needs the DLRM trace sample at {DLRM} (../shared/data, present in CI)")
    series: dict[str, dict[date, float]] = defaultdict(lambda: defaultdict(float))
    with DLRM.open() as f:
        for row in csv.DictReader(f):
            if row["role"] != "HN" or float(row["gpu_request"] or 0) <= 0:
                continue
            start = float(row["scheduled_time"] or row["creation_time"] or 0)
            end = float(row["deletion_time"]) if row["deletion_time"] else DLRM_END_S
            gpus = float(row["gpu_request"])
            day = int(start // 86400)
            while day * 86400 < end and day < 31:
                lo, hi = max(start, day * 86400), min(end, (day + 1) * 86400)
                if hi > lo:
                    series[row["app_name"]][DLRM_FIRST + timedelta(days=day)] += gpus * (hi - lo) / 3600
                day += 1
    return {app: dict(days) for app, days in series.items()}


def score(months: dict[str, dict[date, float]], first: date, method: str, cutoff: int) -> tuple[float, float, int]:
    """MAPE (%) of the month-end and coverage (%) of the 80% interval over the teams that spent by the cut-off."""
    errors, inside = [], 0
    for daily in months.values():
        actual = sum(daily.values())
        as_of = first + timedelta(days=cutoff - 1)
        if actual <= 0 or sum(v for d, v in daily.items() if d <= as_of) <= 0:
            continue
        f = month_forecast(daily, first=first, as_of=as_of, method=method)
        errors.append(abs(f.forecast - actual) / actual)
        inside += f.low - 1e-9 <= actual <= f.high + 1e-9
    n = len(errors)
    return (100 * sum(errors) / n if n else math.nan, 100 * inside / n if n else math.nan, n)


def backtest() -> list[tuple[str, int, str, float, float, int]]:
    sets = [("helios-2020-05", helios_months(), date(2020, 5, 1)), ("dlrm", dlrm_months(), DLRM_FIRST)]
    rows = []
    for name, months, first in sets:
        for cutoff in CUTOFFS:
            for method in METHODS:
                rows.append((name, cutoff, method, *score(months, first, method, cutoff)))
    return rows


def pooled(rows: list, cutoff: int, method: str) -> tuple[float, float]:
    """MAPE and coverage over the teams of both traces (each trace weighted by its teams)."""
    picked = [(mape, cov, n) for _, c, m, mape, cov, n in rows if c == cutoff and m == method]
    teams = sum(n for *_, n in picked)
    return sum(m * n for m, _, n in picked) / teams, sum(c * n for _, c, n in picked) / teams


def test_the_chosen_method_is_no_worse_than_the_naive_run_rate_at_any_cut_off(capsys):
    traces = backtest()
    rows = traces + [("both", c, m, *pooled(traces, c, m), sum(r[-1] for r in traces if r[1:3] == (c, m)))
                     for c in CUTOFFS for m in METHODS]  # fmt: skip

    with capsys.disabled():
        print("\n| trace | cut-off day | method | teams | MAPE % | 80% interval coverage % |")
        print("|---|---|---|---|---|---|")
        for name, cutoff, method, mape, cov, n in rows:
            chosen = " (chosen)" if method == method_for(cutoff) else ""
            print(f"| {name} | {cutoff} | {method}{chosen} | {n} | {mape:.1f} | {cov:.0f} |")

    scores = {c: (pooled(traces, c, method_for(c))[0], pooled(traces, c, NAIVE)[0]) for c in CUTOFFS}
    assert {c: chosen <= naive + 1e-9 for c, (chosen, naive) in scores.items()} == dict.fromkeys(CUTOFFS, True)
