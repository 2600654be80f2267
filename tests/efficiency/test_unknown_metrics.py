"""Rules on jobs whose metrics or GPU count are unknown: silence rather than a finding made of zeros."""

from dataclasses import replace
from datetime import timedelta

from governance.efficiency.summary import HourStat
from tests.efficiency.test_rules import MIB, T0, hour, job, rules


def unknown_sm(i: int, samples: int = 60) -> HourStat:
    return HourStat(T0 + timedelta(hours=i), samples, 0, 0.0, None, 0.0, 20480.0, MIB, sm_samples=0)


def test_a_job_whose_sm_no_sample_knew_gets_no_finding():
    assert rules(job(unknown_sm(0), unknown_sm(1), unknown_sm(2))) == {}


def test_hours_without_sm_do_not_pull_the_mean_towards_idle():
    summary = job(hour(0, 90), unknown_sm(1), unknown_sm(2))

    assert summary.sm_mean == 90.0 and "low_utilization" not in rules(summary)


def test_an_unknown_gpu_count_stands_for_the_gpus_seen():
    summary = replace(job(hour(0, 0), hour(1, 0)), gpus_requested=None)

    assert summary.gpu_count == 1 and "idle_gpu" in rules(summary)


def test_unknown_memory_fires_no_memory_rule():
    no_mem = HourStat(T0, 60, 60, 0.0, 0.0, 0.0, None, None)
    summary = job(no_mem, replace(no_mem, hour=T0 + timedelta(hours=1)))
    summary = replace(summary, gpus=(replace(summary.gpus[0], memory_total_mib=None),))

    found = rules(summary)

    assert "mig_fit" not in found and "memory_bound" not in found and "idle_gpu" in found
