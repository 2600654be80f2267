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
        self.plain_404 = False  # slurmrestd's own answer to a path it does not serve: text, not Slurm's JSON
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
                if body is None and outer.plain_404:
                    self.send_response(404)
                    self.end_headers()
                    self.wfile.write(b"Unable find requested URL. Please view /openapi/v3 for API reference.")
                    return
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


def test_a_slurm_error_other_than_job_unknown_is_an_error_not_an_empty_answer(slurmrestd):
    # What a real slurmrestd 22.05 answers a forged JWT with: slurmdbd's 200 with an authentication error.
    slurmrestd.pages["/slurmdb/v0.0.43/job/4746"] = json.dumps(
        {"jobs": [], "errors": [{"error_number": 1007, "error": "Protocol authentication error"}]}
    )
    rest = slurm.SlurmRest(slurmrestd.url, environ={"SLURM_JWT": TOKEN})

    with pytest.raises(slurm.SlurmError, match="Protocol authentication error"):
        rest.jobs_read(["4746"])


def test_a_path_slurmrestd_does_not_serve_names_the_version_instead_of_reading_as_no_job():
    server = Slurmrestd({})
    try:
        server.plain_404 = True
        rest = slurm.SlurmRest(server.url, version="v0.0.99", environ={"SLURM_JWT": TOKEN})
        with pytest.raises(slurm.SlurmError, match=r"v0\.0\.99"):
            rest.jobs_read(["4746"])
    finally:
        server.close()
