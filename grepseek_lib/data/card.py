"""The data card (data/README.md) and the build summary, both made from the build's own figures.

No timings or absolute paths go in the card, so rebuilding from the same raw folder gives the same
file and the committed card never drifts from what `grepseek data build` makes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grepseek_lib.data.support import MAX_ANSWER_PASSAGES, MAX_DF_LINK, MAX_DF_SINGLE_WORD_TITLE

#: Which raw question file each benchmark is drawn from (for the card).
QUESTION_ORIGINS = {
    "hotpotqa_train": "HotpotQA train, HippoRAG 100-question sample (`hipporag/hotpotqa_train.json`)",
    "musique_train": "MuSiQue train, HippoRAG 100-question sample (`hipporag/musique_train.json`)",
    "nq": "NQ-open dev = FlashRAG nq/test (`nq_open/NQ-open.dev.jsonl`)",
    "triviaqa": "TriviaQA test with aliases (`anserini_tools/topics.dpr.trivia.test.txt`)",
    "popqa": "HippoRAG-2 PopQA subset, reserved rows excluded (`hipporag/popqa.json`)",
    "hotpotqa": "HotpotQA dev (`react/hotpot_dev_v1_simplified.json`)",
    "2wiki": "2WikiMultihopQA dev (`agentic_rag/…`, `r1_searcher_eval_set/2wiki_500.jsonl`, `kag/2wiki_qa_sub.json`)",
    "musique": "MuSiQue-ans dev (`agentic_rag/…`, `r1_searcher_eval_set/musique_500.jsonl`)",
    "bamboogle": "Bamboogle, all of it (`r1_searcher_eval_set/bamboogle.jsonl`)",
}


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def summary_table(stats: dict[str, Any]) -> str:
    """Plain-text figures printed at the end of a build."""
    lines = [f"corpus: {stats['passages']:,} passages, {stats['corpus_bytes'] / 1e6:.1f} MB"]
    width = max(len(s["name"]) for s in stats["sources"])
    lines.append(f"  {'source':<{width}}  {'read':>6}  {'kept':>6}")
    for s in stats["sources"]:
        lines.append(f"  {s['name']:<{width}}  {s['read']:>6,}  {s['kept']:>6,}")
    lines.append(f"  {'questions':<16} {'role':<5}  {'cands':>6}  {'kept':>5}  {'answer in corpus':>16}")
    for name, b in stats["benchmarks"].items():
        lines.append(f"  {name:<16} {b['role']:<5}  {b['candidates']:>6,}  {b['kept']:>5,}  "
                     f"{_pct(b['coverage']):>16}")
    return "\n".join(lines)


def _markdown_tables(text: str) -> list[list[str]]:
    """The markdown tables of a document, each as its list of lines."""
    tables, current = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    return tables


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def licence_section(raw: Path) -> list[str]:
    """Carry SOURCES.md's licence tables: the datasets', and each file's origin and repo licence."""
    sources = raw / "SOURCES.md"
    if not sources.is_file():
        return ["(SOURCES.md was not found in the raw folder; every passage is Wikipedia text, CC BY-SA.)"]
    tables = _markdown_tables(sources.read_text(encoding="utf-8"))
    out = ["Every passage is Wikipedia text (CC BY-SA 3.0/4.0). The question sets keep their own "
           "licences (from `SOURCES.md` of the raw folder):", ""]
    dataset = next((t for t in tables if _cells(t[0])[:2] == ["dataset", "licence"]), None)
    if dataset:
        out += dataset + [""]
    files = next((t for t in tables if _cells(t[0])[:1] == ["file"]), None)
    if files:
        out.append("Raw files used, where they came from, and the licence of that repository:")
        out.append("")
        header = _cells(files[0])[:3]
        out += _table(header, [_cells(line)[:3] for line in files[2:]])
    return out


FILTER_TEXT = f"""\
Only questions the corpus can support are kept (eval and train sets alike):

- **Gold passages** (hotpotqa_train, musique_train, popqa): the source names the paragraphs that hold
  the evidence, and all of them are in the corpus; a question is kept when a gold answer occurs in the
  paragraph that states it (HotpotQA train: any supporting paragraph; MuSiQue: the last hop's; PopQA:
  the subject's article, not the object's, which merely names the answer). Yes/no answers are kept.
- **Title + answer** (nq, triviaqa, hotpotqa, 2wiki, musique, no gold passages available): all text is
  compared after SQuAD normalisation (the metric's, with possessive 's dropped), as whole-token phrases. T = passages whose title is
  named in the question (a multi-word title with a capitalised later word, or a one-word title found
  in at most {MAX_DF_SINGLE_WORD_TITLE} passages and capitalised in the question when the question is
  in normal case); A = passages containing a gold answer. Kept when 1-hop: a passage is in T and A; or
  2-hop: a T passage and an A passage share a link entity (its title, a title it mentions, or a
  capitalised multi-word name, each found in at most {MAX_DF_LINK} passages); MuSiQue may also go
  through one intermediate passage (3 hops). Answers found in more than {MAX_ANSWER_PASSAGES} passages
  only count by the 1-hop rule. When the answer appears in the question (comparisons) or is yes/no,
  the question must name two titles of the corpus instead.
- **Bamboogle** is kept whole (125) and marked `metadata.out_of_corpus = true`: its questions were
  written to be absent from Wikipedia dumps.
- A question that is in any training split is never in an evaluation benchmark (normalised question
  text); duplicates within a benchmark are dropped.

"Answer in corpus" is the share of kept questions with a gold answer (normalised, whole tokens)
somewhere in the corpus text. For yes/no answers that says little, which is why it is under 100% on
hotpotqa and 2wiki."""

REAL_DATA_TEXT = """\
To run on the real 21M-passage wiki-18 and the FlashRAG benchmark files instead of the mini-wiki,
point `GREPSEEK_DATA` at a roomy folder (every default path follows it) and import them:

```bash
export GREPSEEK_DATA=/big/disk/grepseek
grepseek data build --corpus-from /path/to/wiki18_100w.jsonl --benchmarks-from /path/to/flashrag_datasets
# or the DPR file: --corpus-from /path/to/psgs_w100.tsv  (converted, streaming, to wiki-18 jsonl)
```

This writes `$GREPSEEK_DATA/miniwiki/corpus.jsonl` (a wiki-18 jsonl is linked, not copied, after its
first lines are checked; the DPR tsv `id<TAB>text<TAB>title` is converted line by line) and
`$GREPSEEK_DATA/miniwiki/benchmarks/<name>.jsonl` copied unfiltered from the FlashRAG folder
(`nq/test.jsonl`, `triviaqa/test.jsonl`, `popqa/test.jsonl`, `hotpotqa/dev.jsonl`,
`2wikimultihopqa/dev.jsonl`, `musique/dev.jsonl`, `bamboogle/test.jsonl`; a missing one is skipped).
`--out DIR` puts them elsewhere; `GREPSEEK_CORPUS=FILE` alone redirects only the corpus the shell
tool searches by default, and any benchmark can also be given by path."""


def render_card(stats: dict[str, Any], raw: Path) -> str:
    lines = [
        "# data/",
        "",
        "Everything in `data/` is built by the pipeline and ignored by git, except this card, which "
        "`grepseek data build` regenerates from the build's own figures (also in "
        "`data/miniwiki/stats.json`).",
        "",
        "| path | what |",
        "|---|---|",
        "| `miniwiki/corpus.jsonl` | the mini-wiki corpus, wiki-18 / FlashRAG format |",
        "| `miniwiki/benchmarks/<name>.jsonl` | questions, FlashRAG dataset format |",
        "| `miniwiki/stats.json` | the figures below, machine-readable |",
        "| `miniwiki/shards/` | line-aligned shards for the parallel engine (`grepseek shard`) |",
        "| `models/` | model folders made by the model factory |",
        "",
        "## The mini-wiki corpus",
        "",
        f"{stats['passages']:,} passages, {stats['corpus_bytes']:,} bytes, sha256 "
        f"`{stats['corpus_sha256']}`. One passage a line, exactly as wiki-18 writes it: "
        '`{"id": "1", "contents": "\\"Title\\"\\ntext"}`, default `json.dumps` (non-ASCII as `\\uXXXX`), '
        "ids `1`..`N`. Passages are deduplicated on (title, text) and the sources are interleaved by "
        f"one shuffle with seed {stats['seed']}, so a grep hit says nothing about where it came from. "
        "Whole articles (KILT, Vital-Article summaries) are cut into disjoint 100-word passages, as "
        "DPR cut Wikipedia for psgs_w100; paragraph sources keep one paragraph a passage. The gensim "
        "XML fragments are not used (raw wikitext that overlaps the KILT sample).",
        "",
    ]
    rows = [[f"`{s['name']}`", s["description"], ", ".join(f"`{f}`" for f in s["files"]),
             f"{s['read']:,}", f"{s['kept']:,}"] for s in stats["sources"]]
    lines += _table(["source", "what", "raw files", "passages read", "kept (new)"], rows)
    lines += ["", "A passage counts for the first source (in this order) that has it.", "",
              "## Benchmarks and training splits", ""]
    rows = [[f"`{name}`", b["role"], QUESTION_ORIGINS.get(name, ""), f"{b['candidates']:,}",
             f"{b['kept']:,}", _pct(b["coverage"]), b["filter"]] for name, b in stats["benchmarks"].items()]
    lines += _table(["name", "role", "questions from", "candidates", "kept", "answer in corpus", "filter"], rows)
    lines += [
        "",
        "Format: `{\"id\", \"question\", \"golden_answers\": [...], \"metadata\": {...}}`, one a line. "
        "Every `metadata` has `source` and `dataset_split`. hotpotqa_train adds `type`, `level`, "
        "`supporting_facts`, `gold_titles`, `gold_passages` (`{title: id or [ids]}`); musique_train adds "
        "`question_decomposition`, `support_titles`, `answer_aliases`, `gold_passages`; popqa adds `subj`, "
        "`prop`, `obj`, `s_wiki_title`, `o_wiki_title`, `s_pop`, `gold_passages`; hotpotqa has `type`.",
        "",
        "## How questions are filtered",
        "",
        FILTER_TEXT,
        "",
        "## Using a real wiki-18 and FlashRAG download",
        "",
        REAL_DATA_TEXT,
        "",
        "## Licences",
        "",
        *licence_section(raw),
        "",
    ]
    return "\n".join(lines)


def write_card(stats: dict[str, Any], raw: Path, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_card(stats, raw), encoding="utf-8")
    return path
