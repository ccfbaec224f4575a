"""runs/NAME/trajectories.html: every episode of a run in one self-contained page that needs no kernel.

One collapsible block per episode and per turn (inspector.render), a search box and filters by system,
benchmark and outcome. The page's script reads its filter index from a <script type="application/json">
block whose `<`, `>` and `&` are written as \\u escapes, and only toggles `hidden`: no corpus text
ever reaches innerHTML or a script.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from grepseek_lib.inspector.load import load_run
from grepseek_lib.inspector.render import episode_html, esc
from grepseek_lib.inspector.rows import Episodes

REPORT_FILE = "trajectories.html"
#: Columns offered as drop-down filters, in page order.
FILTERS = ("system", "benchmark", "outcome")

_STYLE = """
body{font:14px system-ui,sans-serif;margin:1.5em;max-width:1100px}
details{border:1px solid #ccc;border-radius:4px;margin:.3em 0;padding:.2em .6em}
details.turn{background:#fafafa} summary{cursor:pointer}
pre{white-space:pre-wrap;word-break:break-word;background:#f3f3f3;padding:.4em;margin:.2em 0;max-height:30em;overflow:auto}
pre.err{background:#fdecea} pre.cmd{background:#eef4ff}
table.answer th{text-align:left;vertical-align:top;padding-right:1em}
#bar{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #ddd}
"""

_SCRIPT = """
(function () {
  var index = JSON.parse(document.getElementById("index").textContent);
  var blocks = document.querySelectorAll("details.episode");
  var search = document.getElementById("search");
  var selects = document.querySelectorAll("select[data-filter]");
  function apply() {
    var query = search.value.toLowerCase(), shown = 0;
    blocks.forEach(function (block) {
      var row = index[Number(block.dataset.i)], ok = true;
      selects.forEach(function (s) { if (s.value && row[s.dataset.filter] !== s.value) { ok = false; } });
      if (ok && query) { ok = block.textContent.toLowerCase().indexOf(query) >= 0; }
      block.hidden = !ok;
      if (ok) { shown += 1; }
    });
    document.getElementById("shown").textContent = shown + " of " + blocks.length + " episodes";
  }
  search.addEventListener("input", apply);
  selects.forEach(function (s) { s.addEventListener("change", apply); });
  apply();
})();
"""


def safe_json(value: object) -> str:
    """JSON that can sit inside a <script> element: no `<`, `>` or `&` survives as itself."""
    return (json.dumps(value, ensure_ascii=False)
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def filter_bar(episodes: pd.DataFrame) -> str:
    selects = []
    for column in FILTERS:
        values = sorted({str(v) for v in episodes.get(column, pd.Series(dtype=str)).dropna()})
        options = "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in values)
        selects.append(f'<label>{column} <select data-filter="{column}"><option value="">all</option>'
                       f"{options}</select></label>")
    return ('<div id="bar"><input id="search" type="search" placeholder="search questions, commands, outputs" '
            f'size="40"> {" ".join(selects)} <span id="shown"></span></div>')


def render_report(data: Episodes, title: str) -> str:
    """The whole page: filter bar, then one block per episode."""
    episodes = data.episodes.reset_index(drop=True)
    by_episode = dict(tuple(data.turns.groupby("episode"))) if len(data.turns) else {}
    empty = data.turns.iloc[0:0]
    blocks = [episode_html(row, by_episode.get(row["episode"], empty).sort_values("turn"), index=i)
              for i, row in enumerate(episodes.to_dict("records"))]
    index = [{c: str(row.get(c, "")) for c in FILTERS} for row in episodes.to_dict("records")]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{esc(title)}</h1>{filter_bar(episodes)}"
            f'<script type="application/json" id="index">{safe_json(index)}</script>'
            f'<main>{"".join(blocks)}</main><script>{_SCRIPT}</script></body></html>\n')


def write_report(run_dir: str | Path, data: Episodes | None = None) -> Path:
    """Write run_dir/trajectories.html from everything the run folder holds (or from `data`)."""
    run_dir = Path(run_dir)
    data = data if data is not None else load_run(run_dir)
    path = run_dir / REPORT_FILE
    path.write_text(render_report(data, f"GrepSeek trajectories · {run_dir.name}"), encoding="utf-8")
    return path
