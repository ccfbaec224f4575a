"""Look at what users see, in a real browser: JupyterLab (served headless) running 07_trajectories, and the
static trajectories.html report, both in headless Chromium driven by playwright. Writes PNG screenshots and
a findings.json into the output folder; exits 1 when a check fails.

Run it through scripts/browser_check.sh (or `make browser-check`), which starts JupyterLab and finds Chromium.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from grepseek_lib.agent.actions import Action
from grepseek_lib.agent.trajectory import Trajectory, Turn
from grepseek_lib.inspector import load, report
from grepseek_lib.inspector.rows import Episodes

HOSTILE = '</details></pre><script>window.__pwned = 1; alert("xss")</script><img src=x onerror="window.__pwned=2">'


def hostile_page(folder: Path) -> Path:
    """A report over one episode whose every field is hostile: nothing of it may run in the browser."""
    payload = {"command": "rg x corpus.jsonl", "stdout": HOSTILE, "stderr": HOSTILE, "exit_code": 0}
    turn = Turn(text=HOSTILE, action=Action("tool", command=f"rg '{HOSTILE}' corpus.jsonl", think=HOSTILE),
                observation=payload, observation_text=HOSTILE)
    traj = Trajectory(question=HOSTILE, id="evil", golds=[HOSTILE], turns=[turn], answer=HOSTILE,
                      stop_reason="answer", meta={"benchmark": HOSTILE})
    rows = load.from_trajectories([traj], {"run": "hostile", "system": HOSTILE, "source": "eval"})
    data: Episodes = load.to_episodes([rows])
    path = folder / "hostile.html"
    path.write_text(report.render_report(data, HOSTILE), encoding="utf-8")
    return path


def check_report(page, path: Path, out: Path, findings: dict) -> None:
    """Open the report, search, filter, expand the first episode and its turns; screenshot each step."""
    page.goto(path.resolve().as_uri())
    total = page.locator("details.episode").count()
    page.screenshot(path=str(out / "report.png"), full_page=False)
    first = page.locator("details.episode").first
    first.locator("summary").first.click()
    for summary in first.locator("details.turn > summary").all()[:2]:
        summary.click()
    page.screenshot(path=str(out / "report_open.png"), full_page=False)
    question = first.locator("table.answer td").first.inner_text()[:12]
    page.fill("#search", question)
    shown = page.locator("details.episode:not([hidden])").count()
    page.fill("#search", "")
    page.select_option("select[data-filter=outcome]", index=1)
    filtered = page.locator("details.episode:not([hidden])").count()
    findings["report"] = {"episodes": total, "search": question, "shown_after_search": shown,
                          "shown_after_outcome_filter": filtered, "status": page.inner_text("#shown")}
    page.screenshot(path=str(out / "report_filtered.png"), full_page=False)
    assert total > 0 and 0 < shown <= total and filtered <= total, findings["report"]


def check_hostile(page, out: Path, findings: dict) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(hostile_page(out).resolve().as_uri())
    page.locator("details.episode > summary").click()
    page.locator("details.turn > summary").click()
    page.screenshot(path=str(out / "hostile.png"), full_page=True)
    findings["hostile"] = {"dialogs": dialogs, "pwned": page.evaluate("window.__pwned || 0"),
                           "img_elements": page.locator("main img").count(),
                           "turn_blocks": page.locator("details.turn").count()}
    assert not dialogs and not findings["hostile"]["pwned"] and not findings["hostile"]["img_elements"], findings
    assert findings["hostile"]["turn_blocks"] == 1, findings


def check_lab(page, url: str, out: Path, findings: dict, timeout_s: float) -> None:
    """Open 07_trajectories in JupyterLab, run every cell, wait for the widget browser, screenshot it."""
    page.goto(url)
    page.wait_for_function("window.jupyterapp && document.querySelector('.jp-NotebookPanel')", timeout=90_000)
    page.wait_for_function("document.querySelector('.jp-Notebook-ExecutionIndicator') !== null", timeout=60_000)
    time.sleep(3)  # the kernel starts
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    deadline = time.time() + timeout_s
    while time.time() < deadline and page.locator(".widget-dropdown").count() < 4:
        time.sleep(2)
    time.sleep(3)
    errors = page.locator("[data-mime-type='application/vnd.jupyter.stderr'] :text('Traceback')").count()
    widget = page.locator(".jupyter-widgets.widget-vbox").first
    if widget.count():
        widget.scroll_into_view_if_needed()
        page.locator(".widget-dropdown select").first.select_option(index=1)
        time.sleep(2)
    page.screenshot(path=str(out / "lab_07_trajectories.png"), full_page=False)
    findings["lab"] = {"dropdowns": page.locator(".widget-dropdown").count(), "tracebacks": errors,
                       "error_outputs": page.locator(".jp-OutputArea-output[data-mime-type*='error']").count()}
    assert findings["lab"]["dropdowns"] >= 4 and not findings["lab"]["tracebacks"], findings["lab"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--lab-url", required=True, help="JupyterLab URL of notebooks/07_trajectories.ipynb")
    parser.add_argument("--chromium", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds for the notebook to run")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    path = report.write_report(args.run_dir)
    findings: dict = {"report_file": str(path)}
    failed = False
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
        for check in (lambda pg: check_report(pg, path, args.out, findings),
                      lambda pg: check_hostile(pg, args.out, findings),
                      lambda pg: check_lab(pg, args.lab_url, args.out, findings, args.timeout)):
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            try:
                check(page)
            except Exception as exc:  # report every check, then fail
                failed = True
                findings.setdefault("failures", []).append(repr(exc)[:500])
                page.screenshot(path=str(args.out / f"failure_{len(findings['failures'])}.png"))
            page.close()
        browser.close()
    (args.out / "findings.json").write_text(json.dumps(findings, indent=2))
    print(json.dumps(findings, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
