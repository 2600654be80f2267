"""The /metrics gauges each app owns: an app registers a function that yields Prometheus metric families
(in its AppConfig.ready), and the view reads every registered one at scrape time. No app imports another's."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.core import Metric

Source = Callable[[], Iterable[Metric]]
_sources: dict[str, Source] = {}


def metrics_register(name: str, source: Source) -> None:
    _sources[name] = source


def metrics_sources() -> list[Source]:
    return [_sources[name] for name in sorted(_sources)]
