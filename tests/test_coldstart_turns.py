"""Cold-start turns the policy can reproduce: quotes read from cut lines, one quote a turn, and a per-turn
cap checked against the longest turn."""

from __future__ import annotations

import random

from grepseek_lib.coldstart.export import turn_cap_warning, turn_tokens
from grepseek_lib.coldstart.offline import QUOTE_CHARS, best_sentence, quote_line, sentence_with
from grepseek_lib.coldstart.verify import output_passages


def test_a_cut_corpus_line_keeps_its_id_and_title():
    cut = '{"id": "4232", "contents": "\\"Chiang Kai-shek rifle\\"\\nThe Type Zhongzheng rifle was a Chinese-made co'
    [passage] = output_passages(cut)
    assert passage == {"id": "4232", "contents": '"Chiang Kai-shek rifle"\nThe Type Zhongzheng rifle was a Chinese-made co'}


def test_whole_lines_and_counts_read_as_before():
    whole = '{"id": "7", "contents": "\\"A\\"\\nB \\u00e9."}'
    assert output_passages(f"{whole}\n12\n") == [{"id": "7", "contents": '"A"\nB é.'}, {"id": "", "contents": "12"}]


def test_quotes_stay_short_and_a_turn_quotes_once():
    text = "Alpha " * 80 + "held Bravo Charlie here. Next one."
    assert len(sentence_with(text, "Bravo Charlie")) <= QUOTE_CHARS
    assert "Bravo Charlie" in sentence_with(text, "Bravo Charlie")
    assert len(best_sentence(text, "Who is Alpha?")) <= QUOTE_CHARS + 4
    line = quote_line("Some Title", "a quote", random.Random(0))
    assert line.count('"') == 2 and "Some Title" in line
    assert quote_line("", "a quote", random.Random(0)) == 'The output says "a quote"'


class _WordTokenizer:
    def __call__(self, text: str) -> dict:
        return {"input_ids": text.split()}


def test_the_longest_turn_is_measured_and_a_smaller_cap_is_named():
    records = [{"accepted": True, "messages": [{"role": "system", "content": "x " * 500},
                                               {"role": "assistant", "content": "a b c"},
                                               {"role": "assistant", "content": "a " * 9}]},
               {"accepted": False}]
    sizes = turn_tokens(records, _WordTokenizer())
    assert sizes == {"median": 9, "p99": 9, "max": 9}
    report = {"all": {"assistant_turn_tokens": sizes}}
    assert turn_cap_warning(report, 9) is None
    warning = turn_cap_warning(report, 8)
    assert "max_new_tokens 8" in warning and "9 tokens" in warning and "raise max_new_tokens" in warning
    assert turn_cap_warning({"all": {}}, 1) is None
