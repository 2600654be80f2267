import msgspec
import pytest

from collectors.sources import SourceConfig
from collectors.sources.nvml import NvmlSource
from collectors.testing import FakeNvml, h200
from governance.usage.models import JobGpuHour
from tests.factories import at, ingest


@pytest.mark.django_db
def test_a_job_whose_cpus_sit_on_another_numa_node_than_its_gpu_is_seen_as_such(fake_host):
    fake_host.gpu("00000000:83:00.0", numa_node=0)
    for pid in (10291, 10293, 10309):
        fake_host.process(pid, env={"SLURM_JOB_ID": "4746"}, cpus="24-47")
    config = SourceConfig(cluster="c1", node="gpu-017", mapping=fake_host.mapping(), host=fake_host.host)
    source = NvmlSource.open(config, nvml=FakeNvml([h200()]))

    samples = [s for minute in range(5) for s in source.read(at(f"2026-11-03T09:1{minute}:00Z"))]

    assert {(s.gpu_numa_node, tuple(s.job_cpu_numa_nodes)) for s in samples} == {(0, (1,))}
    ingest([msgspec.to_builtins(s) for s in samples])
    (hour,) = JobGpuHour.objects.all()
    assert (hour.samples, hour.numa_mismatch_samples) == (5, 5)
