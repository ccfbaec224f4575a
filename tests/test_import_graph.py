"""The house's floors, read from the code's own imports (inside functions too): a package imports only
packages on lower floors, and no two modules import each other."""

from __future__ import annotations

import ast
from pathlib import Path

import grepseek_lib

ROOT = Path(grepseek_lib.__file__).parent
#: Ground (0) to roof: shell and data at the bottom, then the agent, then what trains and scores it, then
#: what reads every stage's output, the notebook series and the command line. Equal floors may not import
#: each other either.
FLOORS = {"errors": -1, "config": 0, "checks": 0, "metrics": 0, "pagecache": 0, "progress": 0,
          "shell": 1, "data": 1, "agent": 2, "coldstart": 3, "train": 3, "eval": 3,
          "bench": 4, "inspector": 4, "runfolder": 4, "notebook": 4, "profiles": 4, "pipeline": 5, "cli": 6,
          "__main__": 7}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _edges(modules: dict[str, Path]) -> set[tuple[str, str]]:
    def resolve(name: str) -> str:
        name = name.removeprefix("grepseek_lib").removeprefix(".")
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    edges = set()
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("grepseek_lib"):
                targets = [resolve(f"{node.module}.{a.name}") or resolve(node.module) for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [resolve(a.name) for a in node.names if a.name.startswith("grepseek_lib")]
            else:
                continue
            edges |= {(module, t) for t in targets if t and t != module}
    return edges


def _package(module: str) -> str:
    return module.split(".")[0]


def test_every_package_has_a_floor():
    assert {_package(m) for m in _modules() if m} <= set(FLOORS)


def test_no_import_points_up_or_sideways():
    upward = {(a, b) for a, b in _edges(_modules())
              if _package(a) != _package(b) and FLOORS[_package(b)] >= FLOORS[_package(a)]}
    assert not upward, sorted(upward)


def test_no_two_modules_import_each_other():
    edges = _edges(_modules())
    cycles = {tuple(sorted(pair)) for pair in edges if pair[::-1] in edges}
    assert not cycles, sorted(cycles)
