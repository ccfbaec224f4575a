"""Progress bars update in place on a terminal and at most every LOG_INTERVAL_S into a file or pipe."""

from __future__ import annotations

import io

from grepseek_lib.progress import LOG_INTERVAL_S, progress_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_into_a_file_is_throttled_and_one_on_a_terminal_is_not():
    log = io.StringIO()
    with progress_bar(range(1000), file=log, desc="x") as bar:
        assert bar.mininterval == LOG_INTERVAL_S
        for _ in bar:
            pass
    assert log.getvalue().count("\r") <= 3  # the first draw and the final one, not one per update
    with progress_bar(range(3), file=_Terminal(), mininterval=0.5) as bar:
        assert bar.mininterval == 0.5
    with progress_bar(range(3), file=io.StringIO(), mininterval=60) as bar:
        assert bar.mininterval == 60
