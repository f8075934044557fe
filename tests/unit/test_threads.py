"""icectl/threads.py: the bounded, ordered parallel map every local path uses (issue 28)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from icectl.errors import NotFoundError
from icectl.threads import ordered_map


def _jittered(item: int) -> int:
    time.sleep(random.random() / 500)  # finish out of order
    return item * 10


def test_results_come_in_input_order_whatever_order_they_finish_in() -> None:
    items = list(range(300))
    assert list(ordered_map(_jittered, items, workers=8)) == [i * 10 for i in items]
    assert list(ordered_map(_jittered, iter(items), workers=3, ahead=4)) == [i * 10 for i in items]
    assert list(ordered_map(_jittered, [], workers=4)) == []


@pytest.mark.parametrize(("workers", "ahead"), [(4, None), (4, 3), (1, 1), (16, 5)])
def test_at_most_ahead_items_are_taken_and_not_yet_yielded(workers: int, ahead: int | None) -> None:
    bound = ahead if ahead is not None else 2 * workers
    taken = 0
    running = 0
    most_running = 0
    lock = threading.Lock()

    def source() -> Iterator[int]:
        nonlocal taken
        for i in range(200):
            taken += 1
            yield i

    def fn(item: int) -> int:
        nonlocal running, most_running
        with lock:
            running += 1
            most_running = max(most_running, running)
        time.sleep(random.random() / 1000)
        with lock:
            running -= 1
        return item

    yielded = 0
    for got in ordered_map(fn, source(), workers=workers, ahead=ahead):
        assert got == yielded
        yielded += 1
        assert taken - yielded <= bound, f"{taken - yielded} items in flight, the bound is {bound}"
        time.sleep(0.0005)  # a slow consumer: the map must not run on ahead of it
    assert yielded == 200
    assert most_running <= min(workers, bound)


def test_an_error_reaches_the_consumer_at_its_item_and_nothing_further_starts() -> None:
    started: list[int] = []
    lock = threading.Lock()

    def fn(item: int) -> int:
        with lock:
            started.append(item)
        if item == 20:
            raise NotFoundError("item 20 is gone", path="/x/20")
        time.sleep(0.001)
        return item

    got: list[int] = []
    with pytest.raises(NotFoundError, match="item 20 is gone") as e:
        for r in ordered_map(fn, range(10_000), workers=4, ahead=6):
            got.append(r)
    assert e.value.path == "/x/20"
    assert got == list(range(20))
    time.sleep(0.05)  # what was cancelled stays cancelled
    assert max(started) <= 20 + 6, "items past the read-ahead were started after the failure"


def test_an_abandoned_map_cancels_what_has_not_started() -> None:
    started: list[int] = []
    release = threading.Event()

    def fn(item: int) -> int:
        started.append(item)
        if item > 0:
            release.wait(10)
        return item

    stream = ordered_map(fn, range(100), workers=2, ahead=10)
    assert next(stream) == 0
    stream.close()  # returns at once: the two under way are not joined
    release.set()
    time.sleep(0.05)
    assert len(started) <= 3, f"queued items ran after the consumer left: {started}"


def test_ctrl_c_in_the_consumer_cancels_the_queue() -> None:
    finished: list[int] = []

    def fn(item: int) -> int:
        time.sleep(0.1)
        finished.append(item)
        return item

    stream = ordered_map(fn, range(50), workers=2, ahead=8)
    with pytest.raises(KeyboardInterrupt):
        for _ in stream:
            raise KeyboardInterrupt  # as a signal arriving in the consumer's loop
    stream.close()
    time.sleep(0.4)
    assert len(finished) <= 4, f"queued items ran after Ctrl-C: {sorted(finished)}"


def test_ctrl_c_while_waiting_waits_for_the_running_items() -> None:
    finished: list[int] = []
    both = threading.Barrier(3)

    def fn(item: int) -> int:
        if item in (0, 1, 2):
            both.wait(5)  # 0, 1 and 2 are all running
        if item == 0:
            raise KeyboardInterrupt  # reaches the consumer from the result it waits for
        time.sleep(0.1)
        finished.append(item)
        return item

    with pytest.raises(KeyboardInterrupt):
        list(ordered_map(fn, range(50), workers=3, ahead=6))
    # 1 and 2 were running when the interrupt came: the map waited for them; the queue was cancelled
    # (item 3 may have been taken by the freed thread before the cancel).
    assert {1, 2} <= set(finished)
    time.sleep(0.3)
    assert max(finished) <= 3, f"queued items ran after Ctrl-C: {sorted(finished)}"


def test_wait_true_lets_nothing_run_on_after_a_failure() -> None:
    finished: list[int] = []

    def fn(item: int) -> int:
        if item == 0:
            time.sleep(0.01)
            raise ValueError("bad bin")
        time.sleep(0.1)
        finished.append(item)
        return item

    with pytest.raises(ValueError, match="bad bin"):
        list(ordered_map(fn, range(20), workers=4, ahead=4, wait=True))
    assert sorted(finished) == [1, 2, 3], "the map ended while writes were still under way"


def test_a_shared_pool_is_left_open_and_nested_maps_share_it() -> None:
    with ThreadPoolExecutor(4) as pool:
        outer = ordered_map(lambda i: i, range(5), pool=pool, workers=4)
        got = [(i, list(ordered_map(lambda j, i=i: i * j, range(3), pool=pool, workers=4))) for i in outer]
        assert got == [(i, [0, i, 2 * i]) for i in range(5)]
        assert pool.submit(lambda: 7).result() == 7
