"""The screen's claims on the interpreter: the loader's completion and the garbage collector wait
while one is held, and never for long."""

from __future__ import annotations

import gc
import threading

import reviewer.tui.runtime as runtime


def test_the_checks_wait_while_any_claim_is_held_and_never_for_a_stale_one() -> None:
    """Claims count: a key, a pushed screen and a drift view each hold one, and the checks go on only
    once all are released; a claim never released (a screen closed unpainted) stops counting after
    `LONGEST_CLAIM`, so the checks cannot be slowed for good."""
    now = [100.0]
    foreground = runtime.Foreground(clock=lambda: now[0])
    foreground.claim()
    foreground.claim()
    foreground.release()
    assert foreground.claimed
    waited = threading.Event()
    waiter = threading.Thread(target=lambda: (foreground.wait(), waited.set()))
    waiter.start()
    assert not waited.wait(0.05)  # still claimed: the pause is waiting (for at most LONGEST_YIELD)
    foreground.release()
    assert waited.wait(30) and not foreground.claimed
    waiter.join()
    foreground.claim()  # never released
    now[0] += runtime.LONGEST_CLAIM
    started = threading.Event()
    returned = threading.Event()

    def pause() -> None:
        started.set()
        foreground.wait()
        returned.set()

    threading.Thread(target=pause).start()
    assert started.wait(30) and returned.wait(30)
    assert foreground.claimed  # ignored, not forgotten: a later release still balances it
    foreground.close()  # the collector it stopped runs again, as when the app closes


def test_the_collector_waits_while_a_claim_is_held_and_never_for_long() -> None:
    """The garbage collector is stopped from the first claim to the last release; claims held for
    `LONGEST_CLAIM` (keys pressed without end, a screen closed unpainted) no longer stop it, nor
    do any once the app closes; a collector someone else stopped stays stopped."""
    was_enabled = gc.isenabled()
    gc.enable()
    now = [100.0]
    foreground = runtime.Foreground(clock=lambda: now[0])
    try:
        foreground.claim()
        foreground.claim()
        foreground.release()
        assert not gc.isenabled()
        foreground.release()
        assert gc.isenabled()
        foreground.claim()  # held without end
        now[0] += runtime.LONGEST_CLAIM / 2
        foreground.claim()  # a later claim does not make the pause longer
        foreground.expire()
        assert not gc.isenabled()
        now[0] += runtime.LONGEST_CLAIM / 2
        foreground.expire()
        assert gc.isenabled()
        foreground.release()
        foreground.release()
        assert gc.isenabled() and not foreground.claimed
        foreground.claim()
        foreground.close()
        assert gc.isenabled()
        foreground.release()
        gc.disable()  # someone else's pause is theirs to end
        foreground.claim()
        foreground.release()
        assert not gc.isenabled()
    finally:
        if was_enabled:
            gc.enable()
