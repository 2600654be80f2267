"""The layout holds: short modules, no two modules importing each other, every arrow down the data path.

Imports are read with `ast`, so an import inside a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 400

GOVERNANCE_APPS = {
    "org", "fleet", "usage", "costs", "efficiency", "remediation", "api", "dashboard", "notify", "schedule",
}  # fmt: skip

# (importer, imported): arrows that point up the data path.
FORBIDDEN = {
    ("usage", "costs"),
    ("usage", "efficiency"),
    ("usage", "dashboard"),
    ("costs", "efficiency"),
    ("costs", "dashboard"),
    ("efficiency", "dashboard"),
    ("usage", "remediation"),
    ("costs", "remediation"),
    ("efficiency", "remediation"),
    ("remediation", "dashboard"),
    ("org", "usage"),
    ("org", "costs"),
    ("fleet", "usage"),
} | {("lib", app) for app in GOVERNANCE_APPS}


def _source_files() -> dict[str, Path]:
    """Every module of governance/ and collectors/ by dotted name, without migrations and generated protobuf code."""
    modules: dict[str, Path] = {}
    for top in ("governance", "collectors"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if "migrations" in rel.parts or rel.name.startswith("api_pb2"):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


MODULES = _source_files()


def _imports_of(name: str, path: Path) -> set[str]:
    """The project modules `name` imports, anywhere in its body; relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name
                while target and target not in MODULES:
                    target = target.rpartition(".")[0]
                if target:
                    found.add(target)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                if node.level > 1:
                    anchor = anchor[: -(node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    found.add(f"{base}.{alias.name}")
                elif base in MODULES:
                    found.add(base)
    found.discard(name)
    return found


IMPORTS = {name: _imports_of(name, path) for name, path in MODULES.items()}


def _area(module: str) -> str:
    """The app a module belongs to (`usage` for governance.usage.writer), `lib`, or the top package."""
    parts = module.split(".")
    if parts[0] == "governance" and len(parts) > 1:
        return parts[1]
    return parts[0]


def test_no_module_is_over_400_lines() -> None:
    too_long = []
    for path in MODULES.values():
        rel = str(path.relative_to(ROOT))
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            too_long.append(f"{rel}: {lines} lines")
    assert not too_long, f"split these modules (limit {MAX_LINES} lines): {too_long}"


def test_no_two_modules_import_each_other() -> None:
    mutual = sorted(
        f"{a} <-> {b}" for a, targets in IMPORTS.items() for b in targets if a < b and a in IMPORTS.get(b, ())
    )
    assert not mutual, f"modules importing each other: {mutual}"


def test_every_import_points_down_the_data_path() -> None:
    upward = sorted(
        f"{a} -> {b}" for a, targets in IMPORTS.items() for b in targets if (_area(a), _area(b)) in FORBIDDEN
    )
    assert not upward, f"imports against the data path: {upward}"


def test_the_walk_sees_imports_inside_functions_and_relative_ones(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text("from .selectors import x\n\ndef f():\n    from governance.costs import services\n")
    assert _imports_of("governance.usage.module", module) == {"governance.usage.selectors", "governance.costs.services"}
