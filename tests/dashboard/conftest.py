import pytest

from tests.factories import at, ingest, job_record, rate, series


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def usage(cast):
    small_cluster_usage()


def small_cluster_usage() -> None:
    """Two teams on cluster c1 on 3 Nov 2026: NLP busy on GPU 0 (alice) and idle on GPU 1 (bob);
    Vision idle for its first hour then busy on GPU 2; GPU 3 never allocated."""
    rate(price="2.00")
    start = at("2026-11-03T10:00:00Z")
    ingest(
        [
            job_record(job_id="1", user="alice", gpus=1, submit_time="2026-11-03T09:30:00Z",
                       start_time="2026-11-03T10:00:00Z", end_time="2026-11-03T14:00:00Z", state="completed"),
            job_record(job_id="2", user="bob", gpus=1, submit_time="2026-11-03T09:00:00Z",
                       start_time="2026-11-03T10:00:00Z", end_time="2026-11-03T14:00:00Z", state="completed"),
            job_record(job_id="3", user="dave", project="detector", team="vision", gpus=1,
                       submit_time="2026-11-03T07:00:00Z", start_time="2026-11-03T10:00:00Z",
                       end_time="2026-11-03T14:00:00Z", state="completed"),
            *series(start=start, minutes=240, every_s=600, job_id="1", sm_util=90.0),
            *series(start=start, minutes=240, every_s=600, job_id="2", gpu_uuid="GPU-1", gpu_index=1, sm_util=0.0),
            *series(start=start, minutes=240, every_s=600, job_id="3", gpu_uuid="GPU-2", gpu_index=2,
                    sm_util=lambda s: 0.0 if s < 3600 else 60.0),
            *series(start=start, minutes=240, every_s=600, job_id=None, gpu_uuid="GPU-3", gpu_index=3, sm_util=0.0),
        ]
    )  # fmt: skip
