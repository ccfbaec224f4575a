"""Progress bars that stay readable in a log file.

A bar on a terminal (or in Jupyter) redraws in place; written to a file or pipe (`nohup`, CI, `tee`)
every redraw becomes a new line, and a long run leaves thousands of them. There a bar here updates at
most once every LOG_INTERVAL_S seconds.
"""

from __future__ import annotations

import sys
from typing import Any

#: Seconds between two updates of a bar whose output is a file or a pipe.
LOG_INTERVAL_S = 30.0


def _redraws_in_place(stream: Any) -> bool:
    if type(stream).__module__.startswith("ipykernel"):  # Jupyter's stderr: the frontend handles \r
        return True
    return bool(getattr(stream, "isatty", lambda: False)())


def progress_bar(iterable: Any = None, **kwargs: Any) -> Any:
    """`tqdm.auto.tqdm(iterable, **kwargs)`, throttled to LOG_INTERVAL_S when stderr is a file or pipe.
    The class is looked up at each call, so notebook.start's switch to text bars applies."""
    import tqdm.auto

    if not _redraws_in_place(kwargs.get("file") or sys.stderr):
        kwargs["mininterval"] = max(float(kwargs.get("mininterval", 0.1)), LOG_INTERVAL_S)
    kwargs.setdefault("dynamic_ncols", True)
    return tqdm.auto.tqdm(iterable, **kwargs)
