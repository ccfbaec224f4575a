"""Notebook paths resolve the same way whatever the kernel's working directory (papermill: the repo root,
JupyterLab: notebooks/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grepseek_lib import config, notebook


@pytest.mark.parametrize("cwd", [config.REPO_ROOT, config.REPO_ROOT / "notebooks", Path("/")])
def test_relative_paths_start_at_the_repo_root_from_any_cwd(cwd, monkeypatch, tmp_path):
    monkeypatch.chdir(cwd)
    assert config.repo_path("runs/x", tmp_path) == config.REPO_ROOT / "runs" / "x"
    assert config.repo_path("../shared/data/raw", tmp_path) == (config.REPO_ROOT.parent / "shared/data/raw").resolve()
    assert config.repo_path(None, tmp_path / "d") == tmp_path / "d"
    assert config.repo_path(str(tmp_path / "abs"), Path("unused")) == tmp_path / "abs"
    assert config.repo_path("~/r", tmp_path) == Path.home() / "r"


def test_start_defaults_to_the_default_run_and_the_miniwiki(monkeypatch, tmp_path):
    monkeypatch.setenv("GREPSEEK_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("GREPSEEK_DATA", str(tmp_path / "data"))
    monkeypatch.chdir(config.REPO_ROOT / "notebooks")
    assert notebook.start() == (tmp_path / "runs" / "default", tmp_path / "data" / "miniwiki")
    assert notebook.start("runs/other", "data/x") == (config.REPO_ROOT / "runs/other", config.REPO_ROOT / "data/x")
