"""slurmrestd as the source of job records: the real slurmrestd JSON served by a local HTTP server."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from collectors import slurm
from tests.collectors.test_slurm import SACCT, SQUEUE, read

TOKEN = "eyJhbGciOiJIUzI1NiJ9.test"


class Slurmrestd:
    """Serves GET /slurm/v0.0.43/job/{id} and /slurmdb/v0.0.43/job/{id}; records the headers it was sent."""

    def __init__(self, pages: dict[str, str]) -> None:
        self.pages, self.seen = pages, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.seen.append(
                    (self.path, self.headers.get("X-SLURM-USER-TOKEN"), self.headers.get("X-SLURM-USER-NAME"))
                )
                if self.headers.get("X-SLURM-USER-TOKEN") != TOKEN:
                    self.send_response(401)
                    self.end_headers()
                    return
                body = outer.pages.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(
                    (body or json.dumps({"jobs": [], "errors": [{"description": "Invalid job id"}]})).encode()
                )

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def slurmrestd():
    server = Slurmrestd({"/slurm/v0.0.43/job/4746": read(SQUEUE), "/slurmdb/v0.0.43/job/4746": read(SACCT)})
    yield server
    server.close()


def test_jobs_come_from_slurmrestd_with_the_token_and_user_from_the_environment(slurmrestd):
    rest = slurm.SlurmRest(slurmrestd.url, environ={"SLURM_JWT": TOKEN, "SLURM_USER_NAME": "gpu-collector"})

    (job,) = rest.jobs_read(["4746"])

    assert (job.cluster, job.job_id, job.project, job.gpus, job.state) == ("hpc", "4746", "biology", 8, "running")
    assert slurmrestd.seen == [
        ("/slurm/v0.0.43/job/4746", TOKEN, "gpu-collector"),
        ("/slurmdb/v0.0.43/job/4746", TOKEN, "gpu-collector"),
    ]


def test_a_job_slurmctld_no_longer_holds_comes_from_slurmdbd_with_its_count_unknown(slurmrestd):
    del slurmrestd.pages["/slurm/v0.0.43/job/4746"]
    rest = slurm.SlurmRest(slurmrestd.url, environ={"SLURM_JWT": TOKEN, "USER": "root"})

    (job,) = rest.jobs_read(["4746"])

    assert (job.job_id, job.gpus) == ("4746", None)
    assert slurmrestd.seen[0][2] == "root"


def test_a_refused_token_is_an_error_the_round_waits_on_not_an_empty_answer(slurmrestd):
    rest = slurm.SlurmRest(slurmrestd.url, environ={"SLURM_JWT": "wrong"})

    with pytest.raises(slurm.SlurmError, match="SLURM_JWT"):
        rest.jobs_read(["4746"])
