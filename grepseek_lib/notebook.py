"""The first call of every notebook, so one notebook runs alike under papermill and in JupyterLab.

Papermill starts the kernel in the repo root, JupyterLab in notebooks/: paths are resolved against the
repo root here (config.repo_path), never against the kernel's working directory. Under `grepseek pipeline`
(env GREPSEEK_PROGRESS=text) progress bars are drawn as plain text, the only kind papermill can stream to
the terminal; in JupyterLab they stay widgets.
"""

from __future__ import annotations

import os
from pathlib import Path

from grepseek_lib import config

#: Set by the pipeline for the kernels it starts; "text" switches bars to plain text.
PROGRESS_ENV = "GREPSEEK_PROGRESS"


def start(run_dir: str | Path | None = None, data_dir: str | Path | None = None) -> tuple[Path, Path]:
    """(run folder, mini-wiki folder) as absolute paths: None -> runs/default and data/miniwiki."""
    if os.environ.get(PROGRESS_ENV) == "text":
        use_text_progress()
    return config.repo_path(run_dir, config.default_run_dir()), config.repo_path(data_dir, config.miniwiki_dir())


def use_text_progress() -> None:
    """Make tqdm.auto and the transformers Trainer draw text bars on stderr instead of notebook widgets.

    Must run before transformers' trainer module is imported: it picks its progress callback at import.
    """
    import tqdm.auto
    import tqdm.autonotebook
    import tqdm.std
    import transformers.utils

    for module in (tqdm.auto, tqdm.autonotebook):
        module.tqdm, module.trange = tqdm.std.tqdm, tqdm.std.trange
    transformers.utils.is_in_notebook = lambda: False


def cli_options(**options: object) -> list[str]:
    """Command-line flags for the options that are set: cli_options(base_url=None, model="m") -> ["--model", "m"],
    so a notebook passes optional parameters (a teacher server, say) to a command without branching."""
    flags: list[str] = []
    for name, value in options.items():
        if value is not None and value != "":
            flags += [f"--{name.replace('_', '-')}", str(value)]
    return flags
