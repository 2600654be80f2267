"""What a job mapper is and the registry the mappers join; the package and each mapper module import it."""

from __future__ import annotations

from typing import Protocol


class JobMapper(Protocol):
    name: str

    def job_of(self, pid: int) -> str | None: ...


MAPPERS: dict[str, type] = {}


def register(cls: type) -> type:
    MAPPERS[cls.name] = cls
    return cls
