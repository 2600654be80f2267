"""Issue 31 item 7: every model reads right in the admin (no "Ingest batchs"), and the site has an icon."""

import pytest
from django.apps import apps
from django.contrib.staticfiles import finders

# Uncountable nouns keep their singular.
UNCOUNTABLE = {"declared capacity", "grid intensity"}
ACRONYMS = {"gpu": "GPU", "api": "API", "oidc": "OIDC", "mig": "MIG", "numa": "NUMA"}


def plural(noun: str) -> str:
    if noun in UNCOUNTABLE:
        return noun
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


MODELS = [m for m in apps.get_models() if m.__module__.startswith("governance.")]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m._meta.label)
def test_every_models_plural_is_english(model):
    meta = model._meta

    assert str(meta.verbose_name_plural) == plural(str(meta.verbose_name))
    words = f"{meta.verbose_name} {meta.verbose_name_plural}".replace("-", " ").split()
    for word in words:
        stem, s = (word[:-1], word[-1]) if word.lower().endswith("s") and word.lower()[:-1] in ACRONYMS else (word, "")
        if stem.lower() in ACRONYMS:
            assert word == ACRONYMS[stem.lower()] + s, f"{meta.label}: {word!r} is an acronym, in capitals"


def test_the_rule_catches_what_django_gets_wrong():
    assert plural("ingest batch") == "ingest batches" and plural("anomaly") == "anomalies"
    assert plural("audit entry") == "audit entries" and plural("key") == "keys"
    assert plural("gpu") == "gpus"  # and the acronym check refuses "gpu", which Django derives from `Gpu`


@pytest.mark.django_db
def test_the_favicon_is_served_from_static_files(client):
    response = client.get("/favicon.ico")

    assert response.status_code == 302
    icon = response["Location"]
    assert icon.endswith("favicon.svg")
    assert finders.find("favicon.svg") is not None
    assert client.get(icon).status_code == 200
