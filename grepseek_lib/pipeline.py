"""`grepseek pipeline`: run the numbered notebook series with papermill into one run folder.

Each notebook writes a done marker as its last cell (see runfolder.py); a stage with a marker made
from the same parameters is skipped, so a rerun only redoes what changed (or everything with --force).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grepseek_lib import config, notebook, runfolder
from grepseek_lib.checks import writable_dir
from grepseek_lib.errors import UserError
from grepseek_lib.profiles import PROFILES

NOTEBOOKS_DIR = config.REPO_ROOT / "notebooks"
#: The series, in order; a stage's name is its notebook's file stem.
STAGES = ("00_data", "01_shard", "02_cold_start", "03_sft", "04_grpo", "05_eval", "06_latency")


class StageFailed(Exception):
    """A notebook raised; str() names the notebook, the cell and the error line."""


def resolve_params(profile: str, out: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    if profile not in PROFILES:
        raise UserError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    params = dict(PROFILES[profile])
    params.update(
        run_dir=str(out),
        raw_dir=str(config.raw_dir()),
        data_dir=str(config.miniwiki_dir()),
        models_dir=str(config.models_dir()),
    )
    unknown = sorted(set(overrides) - set(params))
    if unknown:
        raise UserError(f"unknown parameter(s) in --params: {', '.join(unknown)}; known: {', '.join(sorted(params))}")
    params.update(overrides)
    for key in ("run_dir", "raw_dir", "data_dir", "models_dir"):
        params[key] = str(Path(params[key]).expanduser().resolve())
    return params


def load_params_file(path: Path | None) -> dict[str, Any]:
    """--params FILE: a JSON or YAML mapping of parameter -> value, applied to every notebook."""
    if path is None:
        return {}
    if not path.is_file():
        raise UserError(f"--params file not found: {path}")
    text = path.read_text()
    try:
        if path.suffix.lower() in (".yml", ".yaml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:  # yaml and json raise different types; both are the user's file
        raise UserError(f"--params {path}: cannot parse ({exc})") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"--params {path}: expected a mapping of parameter names to values")
    return data


def select_stages(only: str | None) -> list[str]:
    """--only 05_eval,06 or eval,latency: names, full stems or number prefixes."""
    if not only:
        return list(STAGES)
    chosen = []
    for token in (t.strip() for t in only.split(",")):
        if not token:
            continue
        matches = [s for s in STAGES if token in (s, s[:2], s[3:])]
        if len(matches) != 1:
            raise UserError(f"--only: unknown stage {token!r}; stages: {', '.join(STAGES)}")
        chosen.append(matches[0])
    return [s for s in STAGES if s in chosen]


def ensure_kernel() -> str:
    """Name of a kernel spec that runs THIS interpreter (the venv's), installing one if needed."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    manager = KernelSpecManager()
    for name in ("grepseek", "python3"):
        try:
            argv0 = manager.get_kernel_spec(name).argv[0]
        except NoSuchKernel:
            continue
        # jupyter_client swaps a bare `python` for sys.executable when it launches the kernel
        if argv0 in ("python", "python3") or Path(argv0).resolve() == Path(sys.executable).resolve():
            return name
    from ipykernel.kernelspec import install

    install(kernel_name="grepseek", display_name="GrepSeek", prefix=sys.prefix)
    return "grepseek"


def params_digest(params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:12]


def notebook_params(notebook: Path, params: dict[str, Any]) -> dict[str, Any]:
    """The subset of `params` the notebook declares in its `parameters` cell."""
    import papermill

    declared = papermill.inspect_notebook(str(notebook))
    return {k: v for k, v in params.items() if k in declared}


def run_stage(
    stage: str,
    params: dict[str, Any],
    out: Path,
    kernel: str,
    *,
    notebooks_dir: Path = NOTEBOOKS_DIR,
    progress: bool = True,
) -> float:
    """Execute one notebook into the run folder; raise StageFailed naming the notebook and cell.

    With `progress`, what the cells print (the library's tqdm bars as text: notebook.start) streams to
    this terminal as it happens, instead of papermill's per-cell bar that froze during a long cell."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    source = notebooks_dir / f"{stage}.ipynb"
    if not source.is_file():
        raise UserError(f"notebook missing: {source}")
    target = out / f"{stage}.ipynb"
    began = time.perf_counter()
    stream = {"stdout_file": sys.stdout, "stderr_file": sys.stderr} if progress else {}
    try:
        with kernel_env(notebook.PROGRESS_ENV, "text" if progress else None):
            papermill.execute_notebook(
                str(source),
                str(target),
                parameters=params,
                kernel_name=kernel,
                cwd=str(config.REPO_ROOT),
                progress_bar=False,
                **stream,
            )
    except PapermillExecutionError as exc:
        first_line = next((ln.strip() for ln in str(exc.source).splitlines() if ln.strip()), "")
        error_line = str(exc.evalue).strip().splitlines()[0] if str(exc.evalue).strip() else ""
        raise StageFailed(
            f"stage {stage} failed: notebook {source}, cell {source_cell_index(target, exc.cell_index)} "
            f"({first_line[:80]!r}): {exc.ename}: {error_line} "
            f"[executed copy: {target}, In [{exc.exec_count}]]"
        ) from exc
    return time.perf_counter() - began


@contextlib.contextmanager
def kernel_env(name: str, value: str | None) -> Iterator[None]:
    """Set (or, with None, unset) one environment variable for the kernels started inside the block."""
    before = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def source_cell_index(executed: Path, index: int) -> int:
    """papermill inserts an `injected-parameters` cell; map an executed cell index back to the source's."""
    import nbformat

    try:
        cells = nbformat.read(executed, as_version=4).cells
    except (OSError, ValueError):
        return index
    injected = sum("injected-parameters" in c.metadata.get("tags", []) for c in cells[:index])
    return index - injected


def _show(value: Any) -> str:
    """Counts as counts, scores with four decimals."""
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.4f}"
    if isinstance(value, float):
        return str(int(value))
    return str(value)


def write_summary(out: Path, stages: list[str] | tuple[str, ...] = STAGES) -> Path | None:
    """summary.csv / summary.md: every finished stage's key figures, one row per (stage, figure)."""
    import pandas as pd

    rows = []
    for stage in stages:
        marker = runfolder.read_marker(out, stage)
        if marker is None:
            continue
        for key, value in marker.get("summary", {}).items():
            rows.append({"stage": stage, "figure": key, "value": value})
        if marker.get("seconds") is not None:
            rows.append({"stage": stage, "figure": "stage_seconds", "value": marker["seconds"]})
    if not rows:
        return None
    df = pd.DataFrame(rows)
    df.to_csv(out / "summary.csv", index=False)
    shown = df.assign(value=[_show(v) for v in df["value"]])
    (out / "summary.md").write_text("# Run summary\n\n" + runfolder.to_markdown(shown) + "\n")
    return out / "summary.md"


def invalidate_from(out: Path, stage: str) -> None:
    """Drop the done markers of `stage` and of every later one (stages are numbered, so later sorts after):
    their inputs are about to change, so a later run must not reuse them."""
    folder = out / "stages"
    if folder.is_dir():
        for marker in folder.glob("*.json"):
            if marker.stem >= stage:
                marker.unlink(missing_ok=True)


def run_pipeline(
    params: dict[str, Any],
    stages: list[str],
    *,
    force: bool = False,
    progress: bool = True,
    notebooks_dir: Path = NOTEBOOKS_DIR,
    log=print,
) -> Path:
    """Run `stages` in order; a stage whose marker matches its parameters is reused, and once one
    stage reruns every later stage reruns too (its inputs changed)."""
    out = Path(params["run_dir"])
    out.mkdir(parents=True, exist_ok=True)
    (out / "params.json").write_text(json.dumps(params, indent=2))
    kernel = ensure_kernel()
    rerun = force
    for stage in stages:
        source = notebooks_dir / f"{stage}.ipynb"
        if not source.is_file():
            raise UserError(f"notebook missing: {source}")
        nb_params = notebook_params(source, params)
        digest = params_digest(nb_params)
        marker = runfolder.read_marker(out, stage)
        if not rerun and marker and marker.get("params_digest") == digest and (out / f"{stage}.ipynb").is_file():
            log(f"[{stage}] reused (done marker {runfolder.marker_path(out, stage)})")
            continue
        rerun = True
        marker_file = runfolder.marker_path(out, stage)
        invalidate_from(out, stage)
        log(f"[{stage}] running {source} -> {out / (stage + '.ipynb')}")
        seconds = run_stage(stage, nb_params, out, kernel, notebooks_dir=notebooks_dir, progress=progress)
        marker = runfolder.read_marker(out, stage)
        if marker is None:
            raise StageFailed(f"stage {stage} failed: notebook {out / (stage + '.ipynb')} ran but wrote no done marker")
        marker["params_digest"] = digest
        marker["seconds"] = round(seconds, 1)
        marker_file.write_text(json.dumps(marker, indent=2, default=str))
        log(f"[{stage}] done in {seconds:.0f} s")
    write_summary(out, list(dict.fromkeys([*STAGES, *stages])))
    return out


def _command(args: argparse.Namespace) -> int:
    overrides = load_params_file(Path(args.params) if args.params else None)
    out = writable_dir(Path(args.out) if args.out else config.runs_dir() / args.profile)
    params = resolve_params(args.profile, out, overrides)
    stages = select_stages(args.only)
    try:
        run_pipeline(params, stages, force=args.force, progress=not args.no_progress)
    except StageFailed as exc:
        print(f"grepseek pipeline: {exc}", file=sys.stderr)
        return 1
    summary = Path(params["run_dir"]) / "summary.md"
    print(f"run folder: {params['run_dir']}" + (f" (summary: {summary})" if summary.is_file() else ""))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("pipeline", help="run the notebook series end to end (papermill) into a run folder")
    p.add_argument("--params", help="YAML/JSON file of parameter overrides for every notebook")
    p.add_argument("--out", help="run folder (default runs/<profile>)")
    p.add_argument("--profile", default="default", choices=sorted(PROFILES), help="parameter set (default: default)")
    p.add_argument("--force", action="store_true", help="rerun stages even if their done marker exists")
    p.add_argument("--only", help=f"comma-separated stages to run ({', '.join(STAGES)}; '05' or 'eval' work too)")
    p.add_argument("--no-progress", action="store_true",
                   help="do not stream the notebooks' output and progress bars to the terminal")
    p.set_defaults(func=_command)
