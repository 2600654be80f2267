"""The fleet bench's node agents as they post: in processes of their own, as agents run on their own nodes, so
making the batches and watching the load (the bench's process) does not wait on them. Nothing here imports
Django: the processes are spawned afresh."""

from __future__ import annotations

import http.client
import urllib.parse

TIMEOUT_S = 120


class Agent:
    """One node agent's connection to the ingest API, kept alive between its POSTs (http.client opens a new one
    when the server closed it: gunicorn's sync workers close every connection after its answer)."""

    def __init__(self, url: str, token: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=TIMEOUT_S)
        self.headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}

    def post(self, body: bytes) -> None:
        """POST one batch; raises RuntimeError (picklable, unlike http.client's) unless it is accepted."""
        try:
            try:
                status, text = self._send(body)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # The server closed an idle kept-alive connection as this POST went out: once more, on a new one.
                self.connection.close()
                status, text = self._send(body)
        except OSError as error:
            self.connection.close()
            raise RuntimeError(f"ingest did not answer: {error}") from None
        if status != 202:
            raise RuntimeError(f"ingest answered {status}: {text!r}")

    def _send(self, body: bytes) -> tuple[int, bytes]:
        self.connection.request("POST", "/api/v1/ingest/", body=body, headers=self.headers)
        response = self.connection.getresponse()
        text = response.read()
        return response.status, text[:200]

    def close(self) -> None:
        self.connection.close()


def post_all(url: str, token: str, bodies: list[bytes]) -> None:
    """POST the batches one after another, as one agent after another would, over one kept-alive connection."""
    agent = Agent(url, token)
    try:
        for body in bodies:
            agent.post(body)
    finally:
        agent.close()
