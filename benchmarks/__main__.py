"""`python -m benchmarks [--only AREA ...] [--keep-db]`: see benchmarks/harness.py."""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--only", action="append", default=[], help="run only areas whose name contains this text")
    parser.add_argument("--keep-db", action="store_true", help="keep the bench database afterwards")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
    import django

    django.setup()
    from benchmarks.harness import BenchError, run

    try:
        failures = run(args.only, keep_db=args.keep_db)
    except BenchError as exc:
        print(exc, file=sys.stderr)
        return 2
    if failures:
        print(f"{failures} bench area(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
