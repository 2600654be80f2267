"""`manage.py bench`: one `name: value` line per figure, on a throwaway PostgreSQL database.

The bench database is DATABASE_URL's name + `_bench`, created with the test-database machinery
(migrated from scratch) and dropped at the end, so a bench never touches real data. Ingest and
chargeback (governance/usage/bench.py) come first; then every `governance/<app>/bench.py` and
`collectors/bench.py` that exists, each on an emptied database, each given `run(out)`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
import traceback

from django.apps import apps
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

FIRST = "governance.usage.bench"


def bench_modules() -> list[str]:
    names = [f"{config.name}.bench" for config in apps.get_app_configs() if config.name.startswith("governance.")]
    names.append("collectors.bench")
    found = [name for name in names if importlib.util.find_spec(name) is not None]
    return sorted(found, key=lambda name: (name != FIRST, name))


class Command(BaseCommand):
    help = "Benchmarks against PostgreSQL on a throwaway database; prints `name: value` lines."

    def add_arguments(self, parser):
        parser.add_argument("--only", action="append", default=[], help="run only modules containing this text")
        parser.add_argument("--keep-db", action="store_true", help="keep the bench database afterwards")

    def handle(self, *args, only: list[str], keep_db: bool, **options):
        if connection.vendor != "postgresql":
            raise CommandError("bench runs against PostgreSQL: set DATABASE_URL=postgres://...")
        modules = [name for name in bench_modules() if not only or any(part in name for part in only)]
        connection.settings_dict.setdefault("TEST", {})["NAME"] = f"{connection.settings_dict['NAME']}_bench"
        original = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        failures = 0
        try:
            for name in modules:
                call_command("flush", interactive=False, verbosity=0)
                started = time.perf_counter()
                try:
                    importlib.import_module(name).run(self._out)
                except Exception:
                    failures += 1
                    self.stderr.write(f"# {name} failed:\n{traceback.format_exc()}")
                self.stderr.write(f"# {name}: {time.perf_counter() - started:.1f} s")
        finally:
            if not keep_db:
                connection.creation.destroy_test_db(original, verbosity=0)
        if failures:
            raise CommandError(f"{failures} bench module(s) failed")

    def _out(self, name: str, value: object) -> None:
        self.stdout.write(f"{name}: {value}")
        sys.stdout.flush()
