"""Grid carbon intensity defaults per country from a maintained public dataset shipped by a package, never fetched.

codecarbon (MIT) ships `data/private_infra/global_energy_mix.json`: per ISO 3166 alpha-3 country, the grid's
carbon intensity in g CO2e/kWh and its year (Our World in Data / Ember). It is read as a data file: the package
is located, not imported (importing it pulls pandas and more). Install it with the `carbon` extra.
"""

from __future__ import annotations

import importlib.util
import json
from decimal import Decimal
from pathlib import Path

DATASET = ("data", "private_infra", "global_energy_mix.json")
NO_DATASET = (
    "kg_co2e_per_kwh: no value given and no dataset to default from (pip install 'gpu-governance[carbon]' ships"
    " codecarbon's per-country grid intensities)."
)
UNKNOWN_LOCATION = "location: {location!r} is not an ISO 3166 alpha-3 country of {source}."


def dataset_path() -> Path | None:
    spec = importlib.util.find_spec("codecarbon")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*DATASET)
    return path if path.exists() else None


def country_intensity(location: str, path: Path | None = None) -> tuple[Decimal, str]:
    """(kg CO2e per kWh, source) of a country's grid from the dataset; ValueError if it is missing or unknown."""
    path = path or dataset_path()
    if path is None:
        raise ValueError(NO_DATASET)
    data = json.loads(path.read_text())
    entry = data.get(location.strip().upper())
    source = "codecarbon global_energy_mix"
    if not entry or entry.get("carbon_intensity") is None:
        raise ValueError(UNKNOWN_LOCATION.format(location=location, source=source))
    grams = Decimal(str(entry["carbon_intensity"]))
    return grams / 1000, f"{source} ({entry.get('country_name', location)}, {entry.get('year', '?')})"
