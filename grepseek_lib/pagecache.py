"""How corpus files are written and settled in the page cache, so every search maps them cheaply.

Large writes leave large page-cache folios, which make every later scan of the file cheaper; the engine
benchmark settles the corpus and its shards alike before timing. Measurements: docs/PERFORMANCE.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

#: Buffer for files that are searched afterwards (corpus, scaled corpus, shards): large writes give
#: large page-cache folios, which make every later mmap / read of the file cheaper.
WRITE_BUFFER = 8 << 20
_READ_BLOCK = 8 << 20


def settle(paths: Iterable[str | Path]) -> None:
    """Drop each file from the page cache and read it back sequentially (as after a reboot).

    The readahead layout then depends only on the file's size, not on how it happened to be written,
    so timings of different files compare like with like. Needs no privileges (posix_fadvise).
    """
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)  # dirty pages cannot be dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            while os.read(fd, _READ_BLOCK):
                pass
        finally:
            os.close(fd)
