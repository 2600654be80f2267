"""What a job mapper is and the registry the mappers join; the package and each mapper module import it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar


class JobMapper(Protocol):
    name: str

    def job_of(self, pid: int) -> str | None: ...


MAPPERS: dict[str, Callable[..., JobMapper]] = {}
M = TypeVar("M", bound=JobMapper)


def register(cls: type[M]) -> type[M]:
    MAPPERS[cls.name] = cls
    return cls
