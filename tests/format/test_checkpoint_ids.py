"""Checkpoint ids made by agentfs.ids: ULIDs that python-ulid (the reference) reads back, in order,
distinct across processes, and after a head whose clock is ahead."""

from __future__ import annotations

import collections
import multiprocessing
import time

import pytest
from ulid import ULID

from agentfs import ids
from agentfs.errors import InvalidName
from agentfs.names import check_id

pytestmark = pytest.mark.timeout(60)


def test_ids_are_ulids_of_now_that_python_ulid_reads_back() -> None:
    before = time.time_ns() // 1_000_000
    made = [ids.new_id() for _ in range(1000)]
    after = time.time_ns() // 1_000_000
    for checkpoint_id in made:
        check_id(checkpoint_id)
        assert str(ULID.from_str(checkpoint_id)) == checkpoint_id
        assert ids.milliseconds(checkpoint_id) == ULID.from_str(checkpoint_id).milliseconds
    assert before <= ids.milliseconds(made[0]) and ids.milliseconds(made[-1]) <= after + 1


def test_ids_of_one_process_sort_in_the_order_they_were_made() -> None:
    made = [ids.new_id() for _ in range(20_000)]  # many share a millisecond
    assert made == sorted(made) and len(set(made)) == len(made)
    assert len({ids.milliseconds(i) for i in made}) < len(made), "the workload should make ids within one millisecond"


def test_random_digits_are_uniform() -> None:
    # the first id of each millisecond has fresh random digits; count the first random digit of many
    counts = collections.Counter(ids._random_digits()[0] for _ in range(64_000))
    assert set(counts) == set(ids.CROCKFORD)
    assert min(counts.values()) > 1600 and max(counts.values()) < 2400  # 2000 expected, sigma ~44


def test_an_id_after_a_head_from_a_clock_ahead_takes_the_next_millisecond_with_fresh_random_bits() -> None:
    ahead_ms = time.time_ns() // 1_000_000 + 3_600_000
    head = str(ULID(ahead_ms.to_bytes(6, "big") + bytes(10)))
    made = {ids.new_id(after=head) for _ in range(100)}
    assert all(i > head and ids.milliseconds(i) == ahead_ms + 1 for i in made)
    assert len(made) == 100 and len({i[ids.TIME_DIGITS :] for i in made}) == 100, "each takes fresh random bits, never head + 1"
    # another run, no head: the clock's time again, not the skewed head's (a suite run failed 4 later tests so)
    later = ids.new_id()
    assert ids.milliseconds(later) <= time.time_ns() // 1_000_000 + 1


def test_the_successor_of_an_id_whose_random_part_is_full_moves_to_the_next_millisecond() -> None:
    full = ids._time_digits(1_000) + "Z" * ids.RANDOM_DIGITS
    assert ids.milliseconds(ids._successor(full)) == 1_001
    assert ids._successor(ids._time_digits(1_000) + "0" * 15 + "Z") == ids._time_digits(1_000) + "0" * 14 + "10"


def test_a_malformed_id_is_refused_by_name() -> None:
    with pytest.raises(InvalidName, match="not a 26-character ULID"):
        ids.id_time_ns("01ARZ3NDEKTSV4RRFFQ69G5FAU")  # U is not a Crockford digit


def _ids_of_a_child(queue: multiprocessing.Queue[list[str]]) -> None:
    queue.put([ids.new_id() for _ in range(2000)])


def test_forked_processes_do_not_follow_their_parent_s_last_id() -> None:
    # the parent's last id an hour ahead: the ids that follow it are its successors, which a child that
    # kept it would make too
    ahead_ms = time.time_ns() // 1_000_000 + 3_600_000
    ids.new_id(after=str(ULID(ahead_ms.to_bytes(6, "big") + bytes(10))))
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[list[str]] = context.Queue()
    children = [context.Process(target=_ids_of_a_child, args=(queue,)) for _ in range(2)]
    for child in children:
        child.start()
    mine = [ids.new_id() for _ in range(2000)]
    theirs = [queue.get(timeout=30) for _ in children]
    for child in children:
        child.join(timeout=30)
        assert child.exitcode == 0
    everyone = mine + theirs[0] + theirs[1]
    assert len(set(everyone)) == len(everyone)
