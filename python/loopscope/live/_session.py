"""Who owns the process's one C session (CUPTI has one owner per process).

A profile owns it while its with-block runs.  Outside profiles, the
`no_sync()` blocks open on any threads share a session of their own (sync
callbacks only) that is not a profile: a profile entered inside no_sync()
takes the session over and hands it back to the blocks still open when it
ends.  Strict mode stays armed all along (ls_strict is apart from the
session); before a session stops, the waits noted and not yet handled are
taken out, already resolved, and raised when their block ends.

A profile or a no_sync() block dropped while open (garbage-collected without
its exit) is closed here at the latest when a profile or block next starts,
so nothing stays stuck.  Every change of owner holds one lock; a finalizer
never waits for it (it may run inside a holder, in the same thread), it
leaves the work to the next start."""
from __future__ import annotations

import os
import sys
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import _core
from . import _cupti_paths, _options

_lock = threading.Lock()


@dataclass
class _Profile:
    ref: Callable[[], Any]  # weak reference to the running Profile
    serial: int
    where: str              # where it was entered, for the "already running" error


@dataclass
class _Block:
    ref: Callable[[], Any]      # weak reference to the open no_sync block
    thread: threading.Thread
    deferred: list[dict] = field(default_factory=list)  # waits taken at a change of owner
    dropped: bool = False   # its block was collected while open

    def open(self) -> bool:
        return not self.dropped and self.ref() is not None and self.thread.is_alive()


_running: _Profile | None = None    # the profile owning the session
_guard_session = False              # the session runs for no_sync blocks only
_blocks: dict[int, _Block] = {}     # open no_sync blocks, by thread ident
_serials = iter(range(1, 1 << 62))
_forked_inside: set[int] = set()    # profiles running when this process was forked
forked = False                      # this process is a fork of one that imported loopscope
exiting = False                     # the interpreter is exiting: drops are not news


def _after_fork_in_child() -> None:
    """The C core has dropped the parent's session (ls_session); so does
    this side.  The lock may have been held by a thread that is not here."""
    global _lock, _running, _guard_session, forked
    _lock = threading.Lock()
    if _running is not None:
        _forked_inside.add(_running.serial)
    _running, _guard_session, forked = None, False, True


os.register_at_fork(after_in_child=_after_fork_in_child)


def cupti_unusable() -> str | None:
    """Why CUDA/CUPTI cannot be used in this process, if they cannot: a fork
    made after the parent set CUDA up (torch tells; the C core refuses on its
    own when loopscope had loaded CUPTI in the parent)."""
    torch = sys.modules.get("torch")
    try:
        bad_fork = torch is not None and torch.cuda._is_in_bad_fork()
    except Exception:  # a torch without this private hook: the C core still refuses
        return None
    if bad_fork:
        return ("this process was forked after CUDA was set up in its parent: CUDA and CUPTI "
                "cannot be used in it (start GPU worker processes with the 'spawn' method)")
    return None


def stop_at_exit() -> None:
    """At interpreter exit: a session still running (a profile never exited,
    a no_sync block left open) stops, so CUPTI and the counters are given
    back in order.  Never waits long for the lock (a daemon thread may hold
    it); not in a forked child (that belongs to the parent)."""
    global _running, _guard_session, exiting
    exiting = True
    if forked or not _lock.acquire(timeout=1.0):
        return
    try:
        if _core.active():
            _stop_current()
    finally:
        _lock.release()


def _guard_start() -> dict[str, Any]:
    global _guard_session
    unusable = cupti_unusable()
    state = _core.start(_options.core_start_values(
        trace=False, syncs=unusable is None, warm_up=0, cupti_paths=_cupti_paths.candidates()))
    if unusable is not None:
        state["syncs_reason"] = unusable
    _guard_session = True
    return state


def _open_blocks() -> list[_Block]:
    return [b for b in _blocks.values() if b.open()]


def _take_noted() -> None:
    """Before a session stops: the waits noted on armed threads, resolved
    while their tokens are live, go to their blocks."""
    if not _blocks:
        return
    for call in _core._strict_take_all():
        block = _blocks.get(call["thread_id"])
        if block is not None:
            block.deferred.append(call)


def _stop_current() -> Any:
    """Stops the running session (whoever owns it); returns its capture."""
    global _running, _guard_session
    _take_noted()
    capture = _core.stop()  # first: interrupted before it, the owner can still stop it
    _running, _guard_session = None, False
    return capture


def _resume_guard() -> str | None:
    """After a profile: a guard session for the blocks still open.  Returns
    why it could not start (the blocks then run unguarded), or None."""
    if not _open_blocks() or _core.active():
        return None
    try:
        state = _guard_start()
    except Exception as error:  # never lose the user's run to the profiler
        return f"{type(error).__name__}: {error}"
    return None if state["watching_syncs"] else state["syncs_reason"]


def _reap() -> None:
    """Closes what was dropped while open.  With the lock held."""
    global _running, _guard_session
    if not _core.active():  # stopped behind our back (a test hook): forget the owner
        _running, _guard_session = None, False
    elif _running is not None and _running.ref() is None:  # a profile dropped while running
        _stop_current()
    me = threading.get_ident()
    for ident, block in list(_blocks.items()):
        if block.open():
            continue
        if ident == me or not block.thread.is_alive():  # safe to disarm: no callback runs there
            _core._strict_disarm(ident)
            del _blocks[ident]
    if _guard_session and not _open_blocks():
        _stop_current()
    elif _running is None and not _core.active():
        _resume_guard()


# -- profiles ---------------------------------------------------------------
def start_profile(profile: Any, where: str, options: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Starts the session for `profile` (entered at `where`); returns the C
    core's state and the profile's serial.  Raises RuntimeError naming the
    running profile when one runs."""
    global _running
    with _lock:
        _reap()
        if _running is not None:
            raise RuntimeError(
                f"a loopscope profile is already running (entered at {_running.where}): "
                "profiles do not nest (CUPTI has one owner per process); use "
                "loopscope.range() inside it, or exit it first")
        if _guard_session:
            _stop_current()
        if _open_blocks():  # strict mode needs the sync callbacks
            options = dict(options, syncs=True)
        try:
            state = _core.start(_options.core_start_values(**options))
        except BaseException:
            _resume_guard()
            raise
        _running = _Profile(weakref.ref(profile), next(_serials), where)
        return state, _running.serial


def stop_profile(serial: int) -> tuple[Any, str | None]:
    """Stops the session of the profile `serial`; returns (its capture, why
    the no_sync blocks still open could not be guarded again, or None).
    Raises RuntimeError when that profile no longer owns the session."""
    with _lock:
        if serial in _forked_inside:
            raise RuntimeError("this process was forked inside the profile: its records stay "
                               "with the parent process")
        if _running is None or _running.serial != serial or not _core.active():
            raise RuntimeError("its session was stopped from outside the profile")
        try:
            capture = _stop_current()
        finally:
            unguarded = _resume_guard()
        return capture, unguarded


def abandon_profile(serial: int) -> bool:
    """From a finalizer: stops the session of the profile `serial` (dropped
    while running) if the lock is free; else the next start does.  True
    when it stopped it here."""
    if not _lock.acquire(blocking=False):
        return False
    try:
        if _running is None or _running.serial != serial or not _core.active():
            return False
        _stop_current()
        _resume_guard()
        return True
    finally:
        _lock.release()



# -- no_sync blocks ---------------------------------------------------------
def enter_block(block: Any, handler: Callable[[dict], None],
                on_main_thread: bool) -> dict[str, Any] | None:
    """Arms strict mode on this thread for `block` (held weakly: a block
    dropped while open is closed by _reap); starts a guard session when no
    session runs.  Returns that session's state when it started one."""
    with _lock:
        _reap()
        started = None if _core.active() else _guard_start()
        try:
            _core._strict_arm(handler, on_main_thread)
        except BaseException:
            if started is not None:
                _stop_current()
            raise
        _blocks[threading.get_ident()] = _Block(weakref.ref(block), threading.current_thread())
        return started


def exit_block() -> list[dict]:
    """Disarms this thread; returns the waits noted in its block and not yet
    handled, oldest first (call dicts, see _core._strict_disarm)."""
    with _lock:
        call = _core._strict_disarm()
        block = _blocks.pop(threading.get_ident(), None)
        calls = (block.deferred if block is not None else []) + ([call] if call else [])
        if _guard_session and not _open_blocks():
            _stop_current()
        return calls


def drop_block(idents: set[int]) -> None:
    """From a finalizer: the block open on the threads `idents` is gone.
    Closed now if the lock is free, else by the next start."""
    for ident in idents:
        block = _blocks.get(ident)
        if block is not None:
            block.dropped = True
    if _lock.acquire(blocking=False):
        try:
            _reap()
        finally:
            _lock.release()
