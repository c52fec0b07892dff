"""Issue 14, the CPU side of "8 Python threads launching kernels at once,
each with its own steps": the threads, their steps (made and entered in
each thread) and the ranges are real; the launches and kernels enter
through `_testhooks._inject`, shaped as CUPTI delivers them.

A launch found by a launch callback names its thread by the whole
pthread_self(), as ranges do; a launch found in CUPTI's API activity
records (another client holds the callback slot, e.g. after
torch.profiler) carries only its lower 32 bits.  The GPU run of
test_hostile_gpu.py::test_eight_threads_each_with_its_own_steps (after the
torch.profiler tests, so with activity records) got wrong counts per step
(T0_S1: 43, want 4) because those ids named no thread of the ranges.
"""
from __future__ import annotations

import itertools
import threading

import pytest

import loopscope
from loopscope import _core, _testhooks

THREADS, STEPS, LOW32 = 8, 5, 0xFFFFFFFF


def run_threads(thread_bits: int):
    """8 threads, each making and entering its own steps T{t}_S{s}.  All
    enter step s before any launches in it (so the step that began last is
    one thread's only); then thread t launches 4 * (t + 1) kernels, each an
    API record named by `get_ident() & thread_bits` and its kernel.  Returns
    (the profile, the launches each step made as counted here)."""
    entered = threading.Barrier(THREADS, timeout=30)
    corr = itertools.count(1)
    corr_lock = threading.Lock()
    made: dict[str, int] = {}
    errors: list[BaseException] = []
    with loopscope.profile(trace=False) as prof:
        def worker(t: int) -> None:
            try:
                me = threading.get_ident() & thread_bits
                for s in range(STEPS):
                    name = f"T{t}_S{s}"
                    with prof.step(name):
                        entered.wait()
                        for _ in range(4 * (t + 1)):
                            with corr_lock:
                                c = next(corr)
                            now = _core.now_ns()
                            _testhooks._inject("api", [(now, now + 1, c, me)])
                            _testhooks._inject("kernel", [(now + 10, now + 20, 0, 7, c, "k")])
                            made[name] = made.get(name, 0) + 1
                        entered.wait()  # every thread is done launching in step s
            except BaseException as error:  # noqa: BLE001 (asserted below)
                errors.append(error)
                entered.abort()

        pool = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
        for th in pool:
            th.start()
        for th in pool:
            th.join(timeout=60)
    assert errors == [] and not any(th.is_alive() for th in pool)
    return prof, made


@pytest.mark.parametrize("thread_bits", [(1 << 64) - 1, LOW32], ids=["callbacks", "activity"])
def test_kernels_go_to_the_step_of_the_thread_that_launched_them(thread_bits):
    """Each step holds exactly the kernels its own thread launched in it,
    whether the launch records name the thread whole (callbacks) or by its
    lower 32 bits (CUPTI's API activity records)."""
    prof, made = run_threads(thread_bits)
    want = {f"T{t}_S{s}": 4 * (t + 1) for t in range(THREADS) for s in range(STEPS)}
    assert made == want  # what the threads did, counted as they did it
    s = prof.summary()
    got = {st["name"]: st["kernels"] for st in s["steps"]}
    assert got == made
    assert s["dropped_records"] == 0


def test_activity_thread_ids_are_widened_to_the_ranges_thread():
    """The capture's API records carry the whole id of the thread whose
    lower 32 bits CUPTI recorded, the one the ranges of that thread carry."""
    prof, _ = run_threads(LOW32)
    step_threads = {st["thread"] for st in prof.model.steps()}
    apis = prof.capture.apis()
    assert len(apis) == sum(4 * (t + 1) for t in range(THREADS)) * STEPS
    assert len(step_threads) == THREADS and all(i > LOW32 for i in step_threads)
    assert {a[3] for a in apis} == step_threads


def test_a_32_bit_id_two_threads_share_or_a_range_names_is_left_alone():
    """A launch carrying lower 32 bits that two range threads share could be
    either's: it keeps CUPTI's id (and is placed by time).  An id that names
    a range's thread exactly is that thread, though a whole id has the same
    lower bits.  An id with one whole match takes it."""
    a, b, shared = 0x7F00_0000_1000, 0x7E00_0000_1000, 0x1000
    exact, exact_alias = 0x1001, 0x7D00_0000_1001
    one, one_low = 0x7C00_0000_2000, 0x2000
    with loopscope.profile(trace=False) as prof:
        t0 = _core.now_ns()
        ranges = [(a, "A"), (b, "B"), (exact, "C"), (exact_alias, "D"), (one, "E")]
        _testhooks._inject("range", [(t0, t0 + 1000, name, -1, k, thread)
                                for k, (thread, name) in enumerate(ranges)])
        launches = [shared, exact, one_low]
        _testhooks._inject("api", [(t0 + 10, t0 + 11, c + 1, thread)
                              for c, thread in enumerate(launches)])
        _testhooks._inject("kernel", [(t0 + 20, t0 + 30, 0, 7, c + 1, "k")
                                 for c in range(len(launches))])
    got = {x[2]: x[3] for x in prof.capture.apis()}  # correlation id: thread id
    assert got == {1: shared, 2: exact, 3: one}
