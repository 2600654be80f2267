from benchmarks import collectors as bench


def test_the_bench_reports_the_agent_cost_beside_the_nvml_calls_alone(monkeypatch):
    monkeypatch.setattr(bench, "ROUNDS", 5)
    figures = {}

    bench.run(lambda name, value: figures.update({name: value}))

    assert set(figures) == {"collector_us_per_gpu_sample", "collector_nvml_calls_us_per_gpu_sample"}
    assert figures["collector_us_per_gpu_sample"] > figures["collector_nvml_calls_us_per_gpu_sample"] > 0
