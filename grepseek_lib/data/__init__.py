"""Corpus formats (wiki-18 jsonl, DPR tsv), FlashRAG benchmark loading, and the mini-wiki builder."""

from grepseek_lib.data.formats import (
    corpus_line,
    iter_corpus,
    load_benchmark,
    make_contents,
    passage_title_text,
)

__all__ = ["corpus_line", "iter_corpus", "load_benchmark", "make_contents", "passage_title_text"]
