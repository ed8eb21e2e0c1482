"""The owner's files and folders: a folder made 0700 (one of the reviewer's own tightened to it, one a
user named left as it is), and the lock beside a file that processes take in turn."""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

import pytest

from reviewer.private_files import locked, private_folder


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_missing_folder_is_made_for_its_owner_alone(tmp_path: Path) -> None:
    folder = private_folder(tmp_path / "a" / "b")
    assert folder.is_dir() and mode(folder) == 0o700


def test_a_folder_that_is_there_is_tightened_only_when_it_is_the_reviewers_own(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    private_folder(shared)
    assert mode(shared) == 0o755
    private_folder(shared, tighten=True)
    assert mode(shared) == 0o700


def test_the_lock_beside_a_file_is_held_for_the_block_and_let_go_after(tmp_path: Path) -> None:
    path = tmp_path / "memory" / "checkpoint.json"
    lock = path.with_suffix(".lock")
    with locked(path):
        assert mode(lock) == 0o600 and mode(path.parent) == 0o700
        other = os.open(lock, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    with pytest.raises(RuntimeError), locked(path):
        raise RuntimeError("the block failed")
    other = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(
            other, fcntl.LOCK_EX | fcntl.LOCK_NB
        )  # let go after a block that ended and one that failed
    finally:
        os.close(other)
