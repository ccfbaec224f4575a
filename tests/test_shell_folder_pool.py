"""The index path's run folders are reused only when they hold what a fresh one holds, and never across a fork."""

from __future__ import annotations

import os

from grepseek_lib.shell import folder


def _write(made: folder.RunFolder, text: bytes) -> None:
    (made.work / "corpus.jsonl").write_bytes(text)


def test_an_emptied_folder_is_reused_without_the_callers_file():
    with folder.empty_run_folder() as first:
        _write(first, b"x\n")
    with folder.empty_run_folder() as second:
        assert second == first
        assert list(second.work.iterdir()) == [] and list(second.scratch.iterdir()) == []


def test_a_folder_with_leftovers_is_removed_not_reused():
    with folder.empty_run_folder() as first:
        _write(first, b"x\n")
        (first.scratch / "sortXYZ").write_bytes(b"spill of a killed sort")
    assert not first.root.exists()
    with folder.empty_run_folder() as second:
        assert second != first


def test_a_folder_whose_body_raised_is_removed():
    try:
        with folder.empty_run_folder() as first:
            raise RuntimeError("the run failed")
    except RuntimeError:
        pass
    assert not first.root.exists()


def test_a_folder_removed_behind_the_pools_back_is_replaced():
    with folder.empty_run_folder() as first:
        pass
    folder._release(first.root)
    with folder.empty_run_folder() as second:
        assert second.work.is_dir() and second != first


def test_a_forked_child_neither_shares_nor_removes_the_parents_folders():
    with folder.empty_run_folder() as pooled:
        pass
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its pool is empty, and its exit handler must leave the parent's folder
        try:
            with folder.empty_run_folder() as own:
                os.write(write, b"fresh" if own != pooled else b"shared")
            folder._remove_live()
        finally:
            os._exit(0)
    os.close(write)
    said = os.read(read, 16)
    os.close(read)
    os.waitpid(pid, 0)
    assert said == b"fresh"
    assert pooled.work.is_dir()
    with folder.empty_run_folder() as again:
        assert again == pooled
