"""`loopscope.watch()`: always on, for long jobs.  A flight recorder that
keeps every step's figures in a rolling window and writes a full profile
when a step goes wrong.

    with loopscope.watch(step_budget_ms=120, dump_dir="loopscope-dumps") as w:
        for batch in loader:
            with w.step():
                train_step(batch)

It is loopscope's own machinery composed, nothing new underneath:

- While all is well, a chain of light profiles (`profile(trace=False)`:
  counters and sync detection, no per-kernel trace) runs back to back, each
  over a block of steps.  When a block ends, the profile's step figures
  (FinishedProfile.step_figures: no sync sites) give each step's row
  (_watch_rules.ROW_FIELDS) into a window of the last
  `keep_steps`; the profile is then dropped, so memory stays flat.  The
  figures of a block are read one block later (its finish runs on
  loopscope's worker meanwhile).
- Block size: chosen so that a block's own cost (stopping one profile,
  starting the next, reading the last one's step figures) stays under
  BLOCK_COST_SHARE of the block's time: after each block,
  steps = cost / (BLOCK_COST_SHARE x the block's mean step), within
  [MIN_BLOCK_STEPS, MAX_BLOCK_STEPS] (`block_steps=N` fixes it).
- GPU busy per step without a kernel trace: the step's GR active % (the
  graphics engine busy, from the PM samples over the step) x its host time.
- A breach (step_budget_ms; a pytest-plugin budget; a step over p99_factor x
  the window's p99) arms a full profile (trace on) of the next
  `profile_steps` steps; then one dump folder is written (_watch_dump), one
  line goes to stderr, and its path to `w.dumps`.  `w.capture(steps=N)` and,
  with signal=True, SIGUSR1 arm the same.
- Nothing in a step raises into the job: an internal failure is said once,
  the counters stop, and host step times go on.

`loopscope.step()` is a step of the running watch (or of the running
profile; nothing otherwise), so code marked with it is watched by
`loopscope run --watch` and the pytest option without other changes."""
from __future__ import annotations

import collections
import functools
import json
import math
import os
import signal as _signal
import threading
import time
import warnings
from typing import Any

from .. import _core
from ..live import _options, _session
from ..live._module_steps import ModuleSteps, check_module
from .._profile import LoopscopeWarning, Profile
from ..distributed._distributed import MAX_TIMEOUT_S
from ..distributed._ranks_view import head_lines as ranks_head_lines
from . import _ranks
from ._dumps import Dumps, folder_problem, say
from ._rules import (FIGURES, P99_MIN_EXCESS_MS, P99_MIN_STEPS, ROW_FIELDS, budget_breach,
                           check_watch_budgets, figure_stats, host_breach, percentile, sites_in_step, step_rows)

_clock = time.perf_counter_ns   # a step's host time (the tests script it)
_rotation_clock = time.perf_counter_ns  # a block's own cost (the tests script it too)
_core_step = _core.step

# A light block's own cost: at most 0.2% of its time.  0.5% until the rows
# were read without sync sites (2026-11-30): a rotation then cost 20-31 ms on
# GPT-2 generate() (H200), blocks ran ~7 s; at 4-6 ms a rotation, 0.2% gives
# ~2.5 s blocks (a summary budget arms within two), and the rotations' bound
# on a long job's time falls from 0.5% to 0.2%.
BLOCK_COST_SHARE = 0.002
FIRST_BLOCK_STEPS = 64
MIN_BLOCK_STEPS, MAX_BLOCK_STEPS = 16, 4096
BREACHES_KEPT = 100             # w.breaches keeps the last ones (the count is whole)

_current: "Watch | None" = None  # the running watch (loopscope.step() finds it)


def block_steps_for(spent_ns: float, mean_step_ns: float) -> int:
    """The next light block's steps: enough that a rotation costing
    `spent_ns` is BLOCK_COST_SHARE of the block's time at `mean_step_ns` a
    step (under 1 ns counts as 1), within [MIN_BLOCK_STEPS, MAX_BLOCK_STEPS]."""
    wanted = math.ceil(spent_ns / (BLOCK_COST_SHARE * max(mean_step_ns, 1.0)))
    return min(MAX_BLOCK_STEPS, max(MIN_BLOCK_STEPS, wanted))


def _int_option(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"loopscope.watch(): {name} must be a whole number, got "
                        f"{_options.shown(value)} ({type(value).__name__})")
    if not low <= value <= high:
        raise ValueError(f"loopscope.watch(): {name} must be between {low} and {high}, "
                         f"got {value}")
    return value


def _float_option(name: str, value: Any, low: float, high: float, unit: str,
                  above: bool = False) -> float:
    """A finite number in [low, high] ((low, high] with above=True)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"loopscope.watch(): {name} must be a number ({unit}), got "
                        f"{_options.shown(value)} ({type(value).__name__})")
    if not (low < value <= high if above else low <= value <= high):
        raise ValueError(f"loopscope.watch(): {name} must be {'above' if above else 'at least'} "
                         f"{low:g} and at most {high:g} {unit}, got {_options.shown(value)}")
    return float(value)


class WatchStep:
    """One watched step (w.step()): a step of the running profile, timed."""

    __slots__ = ("_watch", "_scope", "_t0", "_t1", "index")

    def __init__(self, watch: "Watch", entered: bool = False) -> None:
        self._watch = watch
        self._scope: Any = None
        self._t1: int | None = None  # the end marked while it stays open (steps=module)
        if entered:  # steps=module's opener: made and entered in one call
            self.__enter__()

    def __enter__(self) -> "WatchStep":
        w = self._watch
        self.index = n = w._next
        w._next = n + 1
        try:
            scope = _core_step("Step_%d" % n, n)
            scope.__enter__()
            self._scope = scope
        except Exception:  # a step already open on this thread: timed, not marked
            self._scope = None
        self._t0 = _clock()
        return self

    def _mark_end(self) -> bool:
        """steps=module: its caller returned, so it may end here; it stays
        open in case the function returned into makes the next call."""
        self._t1 = _clock()
        scope = self._scope
        return scope is None or scope._mark_end()

    def _unmark_end(self) -> bool:
        """The mark taken back, unless a new step already ended the step
        at its mark (False then: its host time stays to the mark)."""
        scope = self._scope
        taken_back = scope is None or scope._unmark_end()
        if taken_back:
            self._t1 = None
        return taken_back

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        t1 = _clock() if self._t1 is None else self._t1
        scope = self._scope
        if scope is not None:
            self._scope = None
            try:
                scope.__exit__(None, None, None)
            except Exception:  # the profile ended under it: the step still counts
                pass
        self._watch._stepped(self.index, t1 - self._t0)
        return False


class Watch:
    """Watches every step of a long job; see the module's text and
    docs/watch.md.  Use through `loopscope.watch()`.

    step_budget_ms:   a step whose host time is over this breaches (None: no budget).
    p99_factor:       a step slower than this x the window's p99 breaches, once the
                      window holds 100 steps (None: off).
    max_syncs, max_sync_blocked_ms, min_sm_active_pct, min_busy_pct: the pytest
                      plugin's budgets, per step (min_busy_pct from GR active).
    dump_dir:         where the dumps go (made at the first dump).
    keep_steps:       rows in the rolling window.
    profile_steps:    steps the full profile of a breach covers.
    warmup_steps:     the first steps breach nothing (compilation, allocator, cuBLAS).
    block_steps:      steps per light profile (None: chosen from its cost).
    min_dump_interval_s, max_dumps, max_dump_mb: the dumps' rate limit and caps.
    signal:           SIGUSR1 arms a dump (main thread only; the old handler comes back).
    steps:            a torch.nn.Module whose top-level calls are the steps.
    syncs, metrics:   sync detection and counters in the light profiles (which
                      never wait for the counters' first set-up in a process: the
                      rows of steps before sampling begins have no counter figures).
    metrics_interval_us: the counters' sampling interval, as profile()'s (None: its
                      default, 500 us, doubled while the decode falls behind).  A
                      longer one is not shown to cost the job less: the decode's
                      host time goes with the SMs' busy time at any interval from
                      500 us up (H200, docs/watch.md).
    all_ranks:        under torch.distributed, one rank's breach (or capture) arms
                      every rank's full profile for the same steps, gathered as
                      profile(gather=True) is: rank 0's dump names the straggler (_ranks).
    rank_check_steps: with all_ranks, the ranks read the job's store every this many
                      steps (one round trip, no collective).
    rank_timeout_s:   with all_ranks, the full profiles' gather_timeout_s.
    """

    @_options.keywords_checked("loopscope.watch()")
    def __init__(
        self,
        *,
        step_budget_ms: float | None = None,
        p99_factor: float | None = 2.0,
        max_syncs: float | None = None,
        max_sync_blocked_ms: float | None = None,
        min_sm_active_pct: float | None = None,
        min_busy_pct: float | None = None,
        dump_dir: str | os.PathLike[str] = "loopscope-dumps",
        keep_steps: int = 1000,
        profile_steps: int = 10,
        warmup_steps: int = 10,
        block_steps: int | None = None,
        min_dump_interval_s: float = 300.0,
        max_dumps: int = 10,
        max_dump_mb: float = 1024.0,
        signal: bool = False,
        steps: Any = None,
        syncs: bool = True,
        metrics: bool = True,
        metrics_interval_us: float | None = None,
        all_ranks: bool = False,
        rank_check_steps: int = 16,
        rank_timeout_s: float = 5.0,
    ) -> None:
        self._budget_ms = None if step_budget_ms is None else _float_option(
            "step_budget_ms", step_budget_ms, 0.0, 1e9, "ms", above=True)
        self._factor = None if p99_factor is None else _float_option(
            "p99_factor", p99_factor, 1.0, 1e6, "x", above=True)
        self._budgets = check_watch_budgets({
            "max_syncs": max_syncs, "max_sync_blocked_ms": max_sync_blocked_ms,
            "min_sm_active_pct": min_sm_active_pct, "min_busy_pct": min_busy_pct})
        try:
            folder = os.fspath(dump_dir)
        except TypeError:
            raise TypeError(f"loopscope.watch(): dump_dir must be a folder path, got "
                            f"{_options.shown(dump_dir)}") from None
        if not isinstance(folder, str) or not folder or "\0" in folder:
            raise ValueError(f"loopscope.watch(): dump_dir must be a folder path, got "
                             f"{_options.shown(dump_dir)}")
        problem = folder_problem(folder)
        if problem is not None:
            raise ValueError(f"loopscope.watch(): dump_dir {folder!r} {problem}")
        self._keep = _int_option("keep_steps", keep_steps, 1, 10_000_000)
        self._profile_steps = _int_option("profile_steps", profile_steps, 1, 100_000)
        self._warm = _int_option("warmup_steps", warmup_steps, 0, 1 << 62)
        self._fixed_block = None if block_steps is None else _int_option(
            "block_steps", block_steps, 1, 1_000_000)
        interval = _float_option("min_dump_interval_s", min_dump_interval_s, 0.0, 1e9, "s")
        dumps = _int_option("max_dumps", max_dumps, 0, 1_000_000)
        mb = _float_option("max_dump_mb", max_dump_mb, 0.0, 1e9, "MiB", above=True)
        self._signal = _options.check_bool("signal", signal)
        self._syncs = _options.check_bool("syncs", syncs)
        self._metrics = _options.check_bool("metrics", metrics)
        self._interval_us = None if metrics_interval_us is None else _float_option(
            "metrics_interval_us", metrics_interval_us, 1.0, 1e6, "us")
        self._all_ranks = _options.check_bool("all_ranks", all_ranks)
        self._check_steps = _int_option("rank_check_steps", rank_check_steps, 1, 1_000_000)
        self._rank_timeout = _float_option("rank_timeout_s", rank_timeout_s, 0.0,
                                           MAX_TIMEOUT_S, "s", above=True)
        self._module = check_module(steps)
        self._dumps = Dumps(folder, dumps, int(mb * (1 << 20)), interval)
        self._window: collections.deque[tuple[Any, ...]] = collections.deque(maxlen=self._keep)
        self.breaches: collections.deque[dict[str, Any]] = collections.deque(maxlen=BREACHES_KEPT)
        self.breach_count = 0
        self._next = 0                # the next step's index
        self._prof: Profile | None = None
        self._kind = "light"
        self._hosts: list[tuple[int, int, str | None]] = []
        self._block_last = -1         # the block ends after this step
        self._block_steps = self._fixed_block or FIRST_BLOCK_STEPS
        self._pending: tuple[Profile, list[tuple[int, int, str | None]]] | None = None
        self._armed: dict[str, Any] | None = None
        self._asked: tuple[int, str] | None = None   # w.capture() / SIGUSR1, for the next step
        self._budget_ns = math.inf if self._budget_ms is None else self._budget_ms * 1e6
        self._slow_ns = self._budget_ns  # the host-time limit: min(budget, factor x p99)
        self._p99_ms: float | None = None
        self._missing: dict[str, str] = {}
        self._notes: list[str] = []
        self._failed: str | None = None
        self._rotations = 0
        self._rotate_ns = 0
        self._state = "new"
        self._old_handler: Any = None
        self._module_steps: ModuleSteps | None = None
        self._arms: _ranks.RankArms | None = None
        self._ranks_status = _ranks.NOT_INITIALISED if all_ranks else "off (all_ranks=False)"
        self._mine: dict[int, tuple[Profile | None, dict[str, Any] | None]] = {}
        self._rank_ns = 0            # host time spent reading and writing the store
        self._rank_dropped = 0       # accepted arms the watch ended before

    # -- the with-block --------------------------------------------------
    def __enter__(self) -> "Watch":
        global _current
        if self._state != "new":
            raise RuntimeError("this watch was already used; create a new loopscope.watch()")
        if _current is not None:
            raise RuntimeError("a loopscope.watch() is already running: watches do not nest")
        if self._signal and threading.current_thread() is not threading.main_thread():
            raise ValueError("loopscope.watch(signal=True) must be entered on the main thread "
                             "(Python runs signal handlers there only)")
        self._start("light")  # a running profile raises here, naming where it was entered
        self._state = "running"
        if self._all_ranks:
            self._join_ranks()
        _current = self
        try:
            if self._signal:
                self._old_handler = _signal.signal(_signal.SIGUSR1, self._on_signal)
            if self._module is not None:
                self._module_steps = ModuleSteps(self, self._module)
                self._note_step_ends()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        global _current
        if self._state != "running":
            return False
        try:  # the last module step ends first, inside the running profile
            if self._module_steps is not None:
                self._module_steps.close()
            if self._signal and self._old_handler is not None:
                _signal.signal(_signal.SIGUSR1, self._old_handler)
        except Exception as error:  # never lose the job's own exit to the watch
            self._notes.append(f"{type(error).__name__}: {error}")
        self._state = "finished"
        self._leave_ranks()
        try:
            prof, kind, hosts = self._take()
            if prof is not None:
                self._stop(prof)
            if kind == "full" and prof is not None:
                self._finish_full(prof, hosts)
            else:
                self._drain_pending()
                if prof is not None:
                    self._process(prof, hosts, "light")
        except Exception as error:
            self._fail(error)
        finally:
            if _current is self:
                _current = None
        return False

    def __del__(self) -> None:
        global _current
        if _current is self:
            _current = None

    # -- steps ----------------------------------------------------------------
    def step(self) -> WatchStep:
        """A context manager for one step: timed, counted, and a step of the
        light (or full) profile running under it."""
        return WatchStep(self)

    @property
    def _open_step(self) -> Any:
        """steps=module's opener: a step made and entered, one Python frame
        less than step() and __enter__ (a token's step pays for each)."""
        return functools.partial(WatchStep, self, True)

    def _attach_module(self, module: Any, args: Any) -> None:
        """steps=module from its call under way (loopscope run --watch-module
        finds the module at its first call, from a global pre-hook: that
        call is step 0, as with watch(steps=module))."""
        if self._state == "running" and self._module_steps is None:
            self._module = check_module(module)
            self._module_steps = ModuleSteps(self, module)
            self._module_steps.enter_call(module, args)
            self._note_step_ends()

    def _note_step_ends(self) -> None:
        """steps=module where a caller's return is not seen (Python < 3.12,
        or sys.monitoring's tool ids taken): a wait between calls lands in
        the last step, where the host-time rules judge it.  Said in the
        notes, as the rows would otherwise show a breach and no reason."""
        ends = self._module_steps.ends if self._module_steps is not None else "caller_return"
        if ends != "caller_return" and (self._budget_ms is not None or self._factor is not None):
            self._note(f"steps=module: each step lasts until the module's next call ({ends}), "
                       "so a wait between calls (a server's idle) counts in the last step and can "
                       "breach step_budget_ms or p99_factor; mark such steps with w.step() or "
                       "loopscope.step()")

    def _stepped(self, index: int, host_ns: int) -> None:
        """After a step: its host time noted, the host rules checked, and the
        block ended when it is full.  Never raises."""
        try:
            breach = None
            if host_ns >= self._slow_ns and index >= self._warm:  # _rules judges equality
                breach = self._host_breach(index, host_ns)
            if self._failed is not None or self._state != "running":
                self._window.append((index, round(host_ns / 1e6, 6)) + (None,) * 7
                                    + ("host", breach))
                return
            self._hosts.append((index, host_ns, breach))
            if self._all_ranks and self._next % self._check_steps == 0:
                self._check_ranks()
            if index >= self._block_last or self._asked is not None:
                self._rotate()
        except Exception as error:  # the job goes on; the watch says why it stopped watching
            self._fail(error)

    def _host_breach(self, index: int, host_ns: int) -> str | None:
        p99, factor = self._p99_ms, self._factor
        slow = None if p99 is None or factor is None else factor * p99
        broken = host_breach(host_ns / 1e6, self._budget_ms, slow, p99, factor)
        if not broken:
            return None
        self._breach(index, broken, self._prof if self._kind == "light" else None)
        return "; ".join(broken)

    def _breach(self, index: int, rules: list[str], block: Profile | None) -> None:
        """A breach of step `index`: counted, and a full profile armed unless
        one is armed already or the dumps' limits refuse."""
        self.breach_count += 1
        record: dict[str, Any] = {"step": index, "rules": rules, "dump": None}
        self.breaches.append(record)
        if self._armed is not None:
            record["dump"] = f"in the dump of step {self._armed['step']}"
            return
        if self._arms is not None and self._arms.busy():
            record["dump"] = "in the dump of the arm already on its way to every rank"
            return
        refused = self._dumps.refusal(forced=False)
        if refused is not None:
            self._dumps.skip(refused)
            record["dump"] = f"not written: {refused}"
            return
        if self._arms is not None and \
                self._publish(index, rules, "breach", self._profile_steps, block, record):
            return
        self._armed = {"step": index, "rules": rules, "block": block, "source": "breach",
                       "steps": self._profile_steps, "record": record}
        self._block_last = -1  # the block ends at this step's end

    def capture(self, steps: int | None = None) -> None:
        """Arms a full profile of the next `steps` steps (default profile_steps)
        and a dump of them, as a breach does (past the rate limit, within
        the caps)."""
        n = self._profile_steps if steps is None else _int_option("steps", steps, 1, 100_000)
        self._asked = (n, "capture")

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._asked = (self._profile_steps, "SIGUSR1")  # the next step's end arms it

    # -- every rank (all_ranks=True; _ranks) ----------------------------------------
    def _join_ranks(self) -> None:
        """Joins the job's store when torch.distributed is initialised."""
        try:
            self._arms, self._ranks_status = _ranks.join(self._check_steps)
        except Exception as error:  # no store: each rank watches itself
            self._ranks_off(error)

    def _ranks_off(self, error: BaseException) -> None:
        """The store failed: said once; each rank watches itself from now on."""
        if self._arms is not None:
            self._rank_dropped += len(self._arms.queued)
        self._arms = None
        self._ranks_status = (f"stopped: the job's store failed ({type(error).__name__}: "
                              f"{error}); each rank watches itself")
        for block_record in self._mine.values():
            if block_record[1] is not None:
                block_record[1]["dump"] = "not written: the job's store failed"
        self._mine.clear()
        say(f"all_ranks {self._ranks_status}")

    def _check_ranks(self) -> None:
        """Every rank_check_steps steps: the arms other ranks (or this one)
        published, read; the light block ends before the first one's start."""
        began = time.perf_counter_ns()
        try:
            if self._arms is None and self._ranks_status == _ranks.NOT_INITIALISED:
                self._join_ranks()
            arms = self._arms
            if arms is None:
                return
            for arm in arms.poll(self._next):
                if arm["rank"] == arms.rank and not arm["accepted"]:
                    _, record = self._mine.pop(arm["step"], (None, None))
                    if record is not None:
                        record["dump"] = "in the dump of an arm published just before it"
            self._cap_block()
        except Exception as error:
            self._ranks_off(error)
        finally:
            self._rank_ns += time.perf_counter_ns() - began

    def _publish(self, index: int, rules: list[str], source: str, steps: int,
                 block: Profile | None, record: dict[str, Any] | None) -> bool:
        """Arms every rank for step `index`'s breach; False when the store
        failed (then this rank arms alone)."""
        assert self._arms is not None
        began = time.perf_counter_ns()
        try:
            arm = self._arms.publish(self._next, steps, index, rules, source)
        except Exception as error:
            self._ranks_off(error)
            return False
        finally:
            self._rank_ns += time.perf_counter_ns() - began
        self._mine[index] = (block, record)
        if record is not None:
            record["dump"] = (f"armed on every rank for steps {arm['start']}-"
                              f"{arm['start'] + steps - 1}")
        return True

    def _cap_block(self) -> None:
        """A light block ends before the first accepted arm's start."""
        arms = self._arms
        if arms is not None and arms.queued and self._kind == "light":
            self._block_last = min(self._block_last, arms.queued[0]["start"] - 1)

    def _next_kind(self) -> str:
        """The next profile: full when armed here, or when an accepted arm
        of every rank starts at the next step (or passed it); else light."""
        arms = self._arms
        if self._armed is not None or arms is None or not arms.queued or \
                arms.queued[0]["start"] > self._next:
            return "full" if self._armed is not None else "light"
        arm = arms.queued.pop(0)
        own = arm["rank"] == arms.rank
        block, record = self._mine.pop(arm["step"], (None, None)) if own else (None, None)
        gather = True
        try:
            if arms.someone_left():
                gather = False
                self._note("all_ranks: a rank had left its watch, so a full profile of every "
                           "rank ran ungathered")
        except Exception as error:
            self._ranks_off(error)
            gather = False
        refused = self._dumps.refusal(forced=True)
        if refused is not None:
            self._dumps.skip(refused)
            if record is not None:
                record["dump"] = f"not written: {refused}"
        rules = arm["rules"] if own else [f"rank {arm['rank']}: {rule}" for rule in arm["rules"]]
        self._armed = {"step": arm["step"], "rules": rules, "block": block,
                       "source": arm["source"] if own else f"rank {arm['rank']}",
                       "steps": arm["steps"], "record": record, "gather": gather,
                       "write": refused is None,
                       "rank_arm": {**arm, "me": arms.rank, "world_size": arms.world_size,
                                    "began": self._next}}
        return "full"

    def _leave_ranks(self) -> None:
        """At the watch's end: the other ranks learn this one left; the arms
        accepted and not started are dropped (counted)."""
        arms = self._arms
        if arms is None:
            return
        self._rank_dropped += len(arms.queued)
        for _, record in self._mine.values():
            if record is not None:
                record["dump"] = "not written: the watch ended before the steps it armed"
        self._mine.clear()
        arms.queued.clear()
        try:
            arms.leave()
        except Exception:  # the store went with the job: nothing to tell
            pass

    def _ranks_summary(self) -> dict[str, Any]:
        arms = self._arms
        counts = dict(arms.counts) if arms is not None else None
        checks = (counts or {}).get("checks")
        return {"all_ranks": self._all_ranks, "status": self._ranks_status,
                "rank": arms.rank if arms is not None else None,
                "world_size": arms.world_size if arms is not None else None,
                "check_steps": self._check_steps, "timeout_s": self._rank_timeout,
                "counts": counts, "dropped_at_end": self._rank_dropped,
                "store_us_per_check": round(self._rank_ns / checks / 1e3, 3) if checks else None}

    # -- profiles ---------------------------------------------------------------
    def _start(self, kind: str) -> None:
        gather = kind == "full" and (self._armed or {}).get("gather", False)
        # A light block never holds the job up for the counters' first set-up
        # in a process (H200 2026-11-29 23:55Z: a fresh process's watch
        # entered in 445-468 ms, 33 ms with metrics off): it reads them
        # lazily, from when sampling begins.  An armed profile waits, as
        # any profile does (the set-up is long over by then).
        metrics = "lazy" if self._metrics and kind == "light" else self._metrics
        prof = Profile(trace=kind == "full", syncs=self._syncs or kind == "full",
                       metrics=metrics, metrics_interval_us=self._interval_us, gather=gather,
                       warm_up=kind == "full", gather_timeout_s=self._rank_timeout)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", LoopscopeWarning)
            prof.__enter__()
        for w in caught:
            self._note(str(w.message).removeprefix("loopscope: "))
        self._prof, self._kind, self._hosts = prof, kind, []
        steps = (self._armed or {}).get("steps", self._profile_steps) if kind == "full" \
            else self._block_steps
        self._block_last = self._next + steps - 1
        if kind == "light":
            self._cap_block()

    def _stop(self, prof: Profile) -> None:
        prof.__exit__(None, None, None)

    def _take(self) -> tuple[Profile | None, str, list[tuple[int, int, str | None]]]:
        out = (self._prof, self._kind, self._hosts)
        self._prof, self._hosts = None, []
        return out

    def _rotate(self) -> None:
        """Ends the running profile after the step just done and starts the
        next: full when armed, light otherwise."""
        began = _rotation_clock()
        if self._asked is not None and self._armed is None:
            steps, source = self._asked
            refused = self._dumps.refusal(forced=True)
            block = self._prof if self._kind == "light" else None
            if refused is not None:
                self._dumps.skip(refused)
            elif self._arms is not None and self._arms.busy():
                pass  # an arm is on its way to every rank: its dump is this one
            elif self._arms is not None and \
                    self._publish(self._next - 1, [f"asked by {source}"], source, steps, block, None):
                pass
            else:
                self._armed = {"step": self._next - 1, "rules": [f"asked by {source}"],
                               "block": self._prof if self._kind == "light" else None,
                               "source": source, "steps": steps, "record": None}
        self._asked = None
        prof, kind, hosts = self._take()
        assert prof is not None
        self._stop(prof)
        if kind == "full":
            self._finish_full(prof, hosts)
            self._start(self._next_kind())
            return
        self._start(self._next_kind())
        previous, self._pending = self._pending, (prof, hosts)
        if previous is not None:
            self._process(*previous, "light")
        spent = _rotation_clock() - began
        self._rotations += 1
        self._rotate_ns += spent
        if self._fixed_block is None and hosts and self._kind == "light":
            self._block_steps = block_steps_for(spent, sum(h for _, h, _ in hosts) / len(hosts))
            self._block_last = self._next + self._block_steps - 1
            self._cap_block()
        if self._armed is not None and self._kind == "light":  # armed by the block just read
            self._block_last = -1

    def _drain_pending(self) -> None:
        if self._pending is not None:
            previous, self._pending = self._pending, None
            self._process(*previous, "light")

    def _process(self, prof: Profile, hosts: list[tuple[int, int, str | None]],
                 kind: str) -> list[dict[str, Any]]:
        """A finished profile's rows into the window; the budgets checked on
        each; the p99 rule's limit updated."""
        # a light block's rows need no sync sites: a dump reads them from
        # its full summary (_write_dump)
        summary = prof.summary() if kind == "full" else prof._require_finished().step_figures()
        self._note_missing(summary, kind)
        rows = step_rows(summary, hosts, kind)
        for row in rows:
            if self._budgets and row["step"] >= self._warm:
                broken = budget_breach(row, self._budgets, summary)
                if broken:
                    row["breach"] = "; ".join(filter(None, [row["breach"], *broken]))
                    self._breach(row["step"], broken, prof if kind == "light" else None)
            self._window.append(tuple(row[f] for f in ROW_FIELDS))
        if self._factor is not None and len(self._window) >= P99_MIN_STEPS:
            self._p99_ms = percentile(sorted(r[1] for r in self._window), 99)
            self._slow_ns = min(self._budget_ns, 1e6 * max(self._factor * self._p99_ms,
                                                           self._p99_ms + P99_MIN_EXCESS_MS))
        else:
            self._slow_ns = self._budget_ns
        return rows

    def _note_missing(self, summary: dict[str, Any], kind: str) -> None:
        """Why figures are missing (no GPU, no CUPTI, counters refused)."""
        reasons = {"syncs": summary.get("syncs_error"),
                   "sm_active_pct": summary.get("metrics_error"),
                   "dram_pct": summary.get("metrics_error"),
                   "gr_active_pct": summary.get("metrics_error"),
                   "gpu_busy_ms": summary.get("metrics_error")}
        if kind == "full":
            reasons = {"trace": summary.get("gpu_error")}
        for figure, reason in reasons.items():
            if reason:
                self._missing[figure] = str(reason)
            elif kind == "light":
                self._missing.pop(figure, None)

    def _note(self, text: str) -> None:
        if text not in self._notes and len(self._notes) < 20:
            self._notes.append(text)

    def _fail(self, error: BaseException) -> None:
        """An internal failure: said once; the counters stop, host times go on."""
        if self._failed is not None:
            return
        self._failed = f"{type(error).__name__}: {error}"
        say(f"stopped watching counters after an internal error ({self._failed}); "
            "host step times go on, no more dumps")
        prof, _, _ = self._take()
        try:
            if prof is not None and prof.is_running:
                prof.__exit__(None, None, None)
        except Exception:  # already said; nothing more to do with it
            pass
        self._pending = None
        self._armed = None

    # -- the dump -----------------------------------------------------------------
    def _finish_full(self, prof: Profile, hosts: list[tuple[int, int, str | None]]) -> None:
        """After the full profile of an armed breach: the rows, then the dump."""
        armed = self._armed
        try:
            self._drain_pending()
            rows = self._process(prof, hosts, "full")
            if armed is not None and armed.get("write", True):
                self._write_dump(armed, prof, rows)
        finally:
            self._armed = None

    def _write_dump(self, armed: dict[str, Any], full: Profile,
                    full_rows: list[dict[str, Any]]) -> None:
        index = armed["step"]
        block = armed["block"]
        block_summary = block.summary() if block is not None and block.is_finished else None
        sites = sites_in_step(block_summary, index) if block_summary is not None else []
        window = self.steps()
        for row in window:
            row["breaching"] = row["step"] == index
        profiled = [r["step"] for r in full_rows]
        breach = {"step": index, "source": armed["source"], "rules": armed["rules"],
                  "profiled_steps": [profiled[0], profiled[-1]] if profiled else [],
                  "sync_sites": [{k: s.get(k) for k in ("file", "line", "function", "code",
                                                        "kind", "count", "blocked_ms")}
                                 for s in sites],
                  "missing": dict(self._missing), "pid": os.getpid(),
                  "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                  "ranks": _ranks_of_dump(armed, full)}
        name = f"loopscope-watch-{time.strftime('%Y%m%d-%H%M%S')}-pid{os.getpid()}-step{index}"
        if breach["ranks"] is not None:
            name += f"-rank{breach['ranks']['rank']}"
        files: list[tuple[str, Any]] = [
            ("README.txt", _text(_readme(breach, block is not None))),
            ("breach.json", _json(breach)),
            ("window.json", _json({"fields": list(ROW_FIELDS), "breaching_step": index,
                                   "rows": window})),
            ("report.txt", _text(full.report())),
            ("profile.loopscope.json.gz", full.save_recording),
            ("trace.json", full.export_trace)]
        if block is not None and block.is_finished:
            files += [("breach_block_report.txt", _text(block.report())),
                      ("breach_block.loopscope.json.gz", block.save_recording)]
        path = self._dumps.write(name, files)
        if armed.get("record") is not None:
            armed["record"]["dump"] = path or "not written: write_failed"
        if path is not None:
            where = f" at {sites[0]['file']}:{sites[0]['line']}" if sites else ""
            ranks = breach["ranks"]
            lines = ranks["lines"] if ranks is not None else []
            every = f"; every rank armed, {lines[0]}" if lines and ranks["straggler"] else \
                ("; every rank armed" if ranks is not None else "")
            say(f"step {index}: {'; '.join(armed['rules'])}{where}; profiled steps "
                f"{breach['profiled_steps'][0] if profiled else '-'}-"
                f"{breach['profiled_steps'][-1] if profiled else '-'}{every}; dump written to {path}")

    # -- results --------------------------------------------------------------------
    @property
    def dumps(self) -> list[str]:
        """The dump folders written, oldest first."""
        return self._dumps.paths

    def steps(self) -> list[dict[str, Any]]:
        """The rolling window (the last keep_steps steps whose profile has
        been read), oldest first, as rows (dicts of ROW_FIELDS)."""
        if self._state == "running" and self._failed is None:
            try:
                self._drain_pending()
            except Exception as error:
                self._fail(error)
        # in step order: a held step that a user's step ended (steps=module)
        # comes to the window after that step
        return [dict(zip(ROW_FIELDS, row)) for row in sorted(self._window, key=_step_of)]

    def summary(self) -> dict[str, Any]:
        """The window's figures: percentiles per figure, breaches, dumps,
        and why a figure is missing."""
        rows = self.steps()
        return {
            "steps": len(rows), "steps_seen": self._next, "keep_steps": self._keep,
            "first_step": rows[0]["step"] if rows else None,
            "figures": {f: figure_stats([r[f] for r in rows]) for f in FIGURES},
            "gpu_busy_from": sorted({r["gpu_busy_from"] for r in rows if r["gpu_busy_from"]}),
            "breaches": self.breach_count, "recent_breaches": list(self.breaches),
            "dumps": list(self.dumps), "dumps_skipped": dict(self._dumps.skipped),
            "missing": dict(self._missing), "notes": list(self._notes),
            "error": self._failed,
            "blocks": {"steps": self._block_steps, "fixed": self._fixed_block is not None,
                       "rotations": self._rotations,
                       "mean_cost_ms": round(self._rotate_ns / self._rotations / 1e6, 6)
                       if self._rotations else None},
            "p99_host_ms": self._p99_ms,
            "ranks": self._ranks_summary(),
            # steps=module: calls, which rule ended the steps ("caller_return",
            # or "next_call: why not") and how many a return ended
            "module_steps": self._module_steps.note() if self._module_steps is not None else None,
        }

    def __repr__(self) -> str:
        return (f"<loopscope.Watch {self._state} steps={self._next} "
                f"breaches={self.breach_count} dumps={len(self.dumps)}>")


def _step_of(row: tuple[Any, ...]) -> int:
    return int(row[0])


def _text(text: str) -> Any:
    def write(path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text if text.endswith("\n") else text + "\n")
    return write


def _json(data: Any) -> Any:
    def write(path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, default=str)
    return write


def _ranks_of_dump(armed: dict[str, Any], full: Profile) -> dict[str, Any] | None:
    """breach.json's "ranks": who armed every rank for which steps, and what
    the gathering found (on rank 0: the straggler, as profile(gather=True)
    names it: summary["skew"], and the report's head lines)."""
    arm = armed.get("rank_arm")
    if arm is None:
        return None
    summary = full.summary()
    skew = summary.get("skew")
    return {"armed_by": arm["rank"], "breach_step": arm["step"], "rank": arm["me"],
            "world_size": arm["world_size"],
            "steps": [arm["start"], arm["start"] + arm["steps"] - 1], "began": arm["began"],
            "late": arm["late"], "gathered": armed["gather"],
            "gather": (summary.get("distributed") or {}).get("gather"),
            "straggler": skew["straggler"] if skew else None,
            "missing": skew["missing"] if skew else None,
            "lines": ranks_head_lines(summary)}


def _readme(breach: dict[str, Any], with_block: bool) -> str:
    lines = [f"loopscope.watch() dump: step {breach['step']} ({breach['source']})"]
    lines += [f"  {rule}" for rule in breach["rules"]]
    ranks = breach.get("ranks")
    if ranks is not None:
        lines.append(f"  every rank armed by rank {ranks['armed_by']} for steps "
                     f"{ranks['steps'][0]}-{ranks['steps'][1]}"
                     + (f" (this rank began late, at step {ranks['began']})" if ranks["late"]
                        else ""))
        lines += [f"  {line}" for line in ranks["lines"]]
    for site in breach["sync_sites"]:
        lines.append(f"  sync in step {breach['step']}: {site['file']}:{site['line']} in "
                     f"{site['function']}(): {site['code']}  [{site['kind']}] x{site['count']}")
    for figure, why in breach["missing"].items():
        lines.append(f"  {figure} not measured: {why}")
    steps = breach["profiled_steps"]
    lines += ["", "Files:",
              f"  report.txt, profile.loopscope.json.gz, trace.json: the full profile (trace on) "
              f"of steps {steps[0]}-{steps[-1]}" if steps else
              "  report.txt, profile.loopscope.json.gz, trace.json: the full profile (no step ran)",
              "  window.json: the rolling window; the breaching step has \"breaching\": true"]
    if with_block:
        lines.append(f"  breach_block_report.txt, breach_block.loopscope.json.gz: the light "
                     f"profile (counters, syncs) holding step {breach['step']}")
    lines.append("  trace.json opens at https://ui.perfetto.dev; the recordings with "
                 "loopscope.load() or `loopscope analyze`")
    return "\n".join(lines)


def step(name: str | None = None) -> Any:
    """One loop step of whatever runs: the running watch's w.step(), else
    the running profile's prof.step(name), else nothing (a no-op context).
    Marking a loop with it lets `loopscope run --watch` and the pytest
    option watch it without other changes."""
    w = _current
    if w is not None:
        return WatchStep(w)
    running = _session._running
    prof = running.ref() if running is not None else None
    if prof is not None:
        return prof.step(name)
    return _NO_STEP


class _NoStep:
    __slots__ = ()

    def __enter__(self) -> "_NoStep":
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False


_NO_STEP = _NoStep()
watch = Watch
