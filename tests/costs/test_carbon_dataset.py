"""Where a cluster's grid intensity comes from when the admin names only its country: the per-country dataset that
the `carbon` extra (codecarbon) ships, found where the package is installed, never fetched."""

import importlib.util
import json
import sys
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from governance.costs.carbon import NO_DATASET
from governance.costs.services import grid_intensity_set
from tests.factories import at

pytestmark = pytest.mark.django_db


def installed_codecarbon(root, monkeypatch, *, with_dataset: bool) -> None:
    """A codecarbon package on the import path, as `pip install 'gpu-governance[carbon]'` leaves it."""
    package = root / "codecarbon"
    (package / "data" / "private_infra").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    if with_dataset:
        (package / "data" / "private_infra" / "global_energy_mix.json").write_text(json.dumps({
            "DEU": {"country_name": "Germany", "carbon_intensity": 380.95, "year": 2023},
        }))  # fmt: skip
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delitem(sys.modules, "codecarbon", raising=False)
    importlib.invalidate_caches()


def test_a_country_takes_its_grid_intensity_from_the_installed_dataset(cluster, tmp_path, monkeypatch):
    installed_codecarbon(tmp_path, monkeypatch, with_dataset=True)

    term = grid_intensity_set(cluster="c1", location="deu", valid_from=at("2026-12-01T00:00:00Z"))

    assert (term.location, term.kg_co2e_per_kwh) == ("DEU", Decimal("0.38095"))
    assert term.source == "codecarbon global_energy_mix (Germany, 2023)"


def test_an_installed_package_without_the_dataset_gives_the_install_hint(cluster, tmp_path, monkeypatch):
    installed_codecarbon(tmp_path, monkeypatch, with_dataset=False)

    with pytest.raises(ValidationError) as refused:
        grid_intensity_set(cluster="c1", location="DEU", valid_from=at("2026-12-01T00:00:00Z"))

    assert refused.value.messages == [NO_DATASET]


@pytest.mark.skipif(importlib.util.find_spec("codecarbon") is not None, reason="the carbon extra is installed")
def test_without_the_carbon_extra_a_country_alone_is_refused_with_the_install_hint(cluster):
    with pytest.raises(ValidationError) as refused:
        grid_intensity_set(cluster="c1", location="DEU", valid_from=at("2026-12-01T00:00:00Z"))

    assert "pip install 'gpu-governance[carbon]'" in refused.value.messages[0]
