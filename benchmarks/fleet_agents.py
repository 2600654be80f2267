"""The fleet bench's node agents as they post: in processes of their own, as agents run on their own nodes, so
making the batches and watching the load (the bench's process) does not wait on them. Nothing here imports
Django: the processes are spawned afresh."""

from __future__ import annotations

import urllib.error
import urllib.request


def post(url: str, token: str, body: bytes) -> None:
    """POST one batch to the ingest API; raises RuntimeError (picklable, unlike urllib's) unless it is accepted."""
    request = urllib.request.Request(  # noqa: S310 - loopback
        f"{url}/api/v1/ingest/",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310
            status, text = response.status, response.read(200)
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read(200)
    except OSError as error:
        raise RuntimeError(f"ingest did not answer: {error}") from None
    if status != 202:
        raise RuntimeError(f"ingest answered {status}: {text!r}")


def post_all(url: str, token: str, bodies: list[bytes]) -> None:
    """POST the batches one after another, as one agent after another would."""
    for body in bodies:
        post(url, token, body)
