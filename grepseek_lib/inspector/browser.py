"""The notebook browser: pick an episode, step through it turn by turn, see another system on the same
question beside it, and run a recorded command again through the shell tool.

All text goes through inspector.render (escaped), the same blocks as the static report. ipywidgets is
imported when a browser is built, not when the module is.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from grepseek_lib.inspector.filters import select
from grepseek_lib.inspector.render import answer_html, esc, turn_html
from grepseek_lib.inspector.rerun import rerun, verdict
from grepseek_lib.inspector.rows import Episodes

ANY = "(all)"
#: Drop-down filters of the browser, in order.
FILTERS = ("system", "benchmark", "outcome", "stop_reason")


def label(row: dict[str, Any]) -> str:
    return f"[{row['system']}] {row['benchmark']}/{row['id']} · {row['outcome']} · {str(row['question'])[:70]}"


class Browser:
    """`Browser(data, tool).widget` is the whole UI; its methods are what the buttons call (and tests drive)."""

    def __init__(self, data: Episodes, tool: Any = None, *, episodes: pd.DataFrame | None = None):
        import ipywidgets as w

        self.data, self.tool = data, tool
        self.pool = (episodes if episodes is not None else data.episodes).reset_index(drop=True)
        self.filters = {c: w.Dropdown(description=c, options=[ANY, *sorted(self.pool[c].dropna().astype(str).unique())])
                        for c in FILTERS}
        self.picker = w.Dropdown(description="episode", layout=w.Layout(width="95%"))
        self.step = w.IntSlider(description="turn", min=1, max=1, value=1)
        self.other = w.Dropdown(description="beside it", options=["(none)", *sorted(self.pool["system"].unique())])
        self.again = w.Button(description="run this command again", icon="repeat")
        self.status = w.HTML()
        self.answer, self.turn, self.beside = w.HTML(), w.HTML(), w.HTML()
        for control in (*self.filters.values(), self.picker, self.step, self.other):
            control.observe(self._changed, names="value")
        self.again.on_click(lambda _: self.run_again())
        left = w.VBox([self.answer, w.HBox([self.step, self.again]), self.status, self.turn],
                      layout=w.Layout(width="50%"))
        self.widget = w.VBox([w.HBox(list(self.filters.values())), self.picker, self.other,
                              w.HBox([left, w.VBox([self.beside], layout=w.Layout(width="50%"))])])
        self.refilter()

    def shown(self) -> pd.DataFrame:
        """Episodes passing the drop-down filters."""
        chosen = {c: d.value for c, d in self.filters.items() if d.value != ANY}
        return select(self.pool, **chosen)

    def refilter(self) -> None:
        rows = self.shown().to_dict("records")
        self.picker.options = [(label(r), r["episode"]) for r in rows]
        self.picker.value = rows[0]["episode"] if rows else None
        self.show()

    def current(self) -> dict[str, Any] | None:
        match = self.pool[self.pool["episode"] == self.picker.value]
        return match.iloc[0].to_dict() if len(match) else None

    def show(self) -> None:
        """Redraw the answer, the chosen turn and the other system's episode on the same question."""
        episode = self.current()
        if episode is None:
            self.answer.value, self.turn.value, self.beside.value = "<i>no episode matches</i>", "", ""
            return
        turns = self.data.turns_of(episode["episode"]).to_dict("records")
        self.step.max = max(len(turns), 1)
        self.answer.value = answer_html(episode)
        self.turn.value = turn_html(turns[self.step.value - 1], open_=True) if turns else "<i>no turns recorded</i>"
        self.again.disabled = not (turns and turns[self.step.value - 1].get("kind") == "tool" and self.tool)
        self.beside.value = self.beside_html(episode)

    def beside_html(self, episode: dict[str, Any]) -> str:
        """The `other` system's episode on the same run, benchmark and question, every turn collapsible."""
        if self.other.value == "(none)":
            return ""
        same = self.data.episodes
        same = same[(same["system"] == self.other.value) & (same["run"] == episode["run"])
                    & (same["benchmark"] == episode["benchmark"]) & (same["id"] == episode["id"])]
        if not len(same):
            return f"<i>{esc(self.other.value)} has no episode on this question</i>"
        other = same.iloc[0].to_dict()
        turns = "".join(turn_html(t) for t in self.data.turns_of(other["episode"]).to_dict("records"))
        return f"<h4>{esc(other['system'])}</h4>{answer_html(other)}{turns}"

    def run_again(self) -> str:
        """Rerun the shown turn's command through the tool; the verdict lands in the status line."""
        episode = self.current()
        turns = self.data.turns_of(episode["episode"]).to_dict("records") if episode else []
        if not turns or self.tool is None:
            return ""
        result = rerun(turns[self.step.value - 1], self.tool)
        self.status.value = f"<b>{esc(verdict(result))}</b>"
        return verdict(result)

    def _changed(self, change: dict[str, Any]) -> None:
        if change["owner"] in self.filters.values():
            self.refilter()
        else:
            if change["owner"] is self.picker:
                self.step.value = 1
            self.show()
