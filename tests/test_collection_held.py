"""`collection_held`: the garbage collector off while a command starts, on again once it serves or
the block ends however it ends, and left alone where collection was off already."""

from __future__ import annotations

import gc

import pytest

from reviewer import collection_held


def test_collection_is_off_inside_and_on_after_with_what_start_up_made_frozen() -> None:
    frozen_before = gc.get_freeze_count()
    with collection_held():
        assert not gc.isenabled()
        made_at_start_up = [[] for _ in range(100)]  # lists: objects the collector tracks
    assert gc.isenabled()
    assert gc.get_freeze_count() - frozen_before >= len(made_at_start_up)


def test_the_hold_ends_when_the_command_starts_serving_and_stays_ended() -> None:
    with collection_held() as serving:
        serving()
        assert gc.isenabled(), "serving resumes collection inside the block"
        serving()
    assert gc.isenabled()


def test_a_start_up_that_fails_leaves_collection_on() -> None:
    with pytest.raises(RuntimeError), collection_held():
        raise RuntimeError("refused before serving")
    assert gc.isenabled()


def test_where_collection_was_off_already_it_stays_off() -> None:
    gc.disable()
    try:
        with collection_held() as serving:
            serving()
        assert not gc.isenabled()
    finally:
        gc.enable()
