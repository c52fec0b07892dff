"""`loopscope.no_sync()`: strict mode, where a host-device sync is an error.

The C core notes the first sync on the guarded thread inside its CUPTI
callback and asks the interpreter to run a handler as soon as control is
back in Python (never raising from the callback itself).  The handler
resolves the site and raises `SyncError` there, at the line that synced,
unless its kind is allowed.  A sync on a thread other than the main thread,
or one the handler could not report in time, is raised when the block ends.

An async copy waits only when its host memory is pageable.  A profile
learns that from the copy's activity record, later; strict mode must know at
once, so while it guards a thread the C core asks the driver about the
copy's host pointer (cuPointerGetAttribute, one call per async copy).
"""
from __future__ import annotations

import threading
import warnings
import weakref
from typing import Any, Callable, Iterable

from .live import _session
from .figures._names import display_path
from .figures._syncs import KINDS, Resolver


class SyncError(RuntimeError):
    """A host-device sync happened inside `loopscope.no_sync()`.

    Attributes: file, line, function, code, kind, api."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 function: str | None = None, code: str | None = None,
                 kind: str | None = None, api: str | None = None) -> None:
        super().__init__(message)
        self.file, self.line, self.function = file, line, function
        self.code, self.kind, self.api = code, kind, api


def _check_allow(allow: Iterable[str] | str | None) -> frozenset[str]:
    if allow is None:
        return frozenset()
    if isinstance(allow, str):
        allow = (allow,)
    try:
        kinds = frozenset(allow)
    except TypeError:
        raise TypeError(f"no_sync(allow=...) takes sync kinds (a str or an iterable of str), "
                        f"got {allow!r}") from None
    if isinstance(allow, bytes | bytearray) or not all(isinstance(k, str) for k in kinds):
        raise TypeError(f"no_sync(allow=...) takes sync kinds as str, got {allow!r}")
    unknown = sorted(k for k in kinds if k not in KINDS)
    if unknown:
        raise ValueError(f"no_sync(allow=...): unknown sync kind(s) {', '.join(map(repr, unknown))}; "
                         f"known kinds: {', '.join(KINDS)}")
    return kinds


def _weak_handler(block: "no_sync") -> Callable[[dict[str, Any]], None]:
    """The handler strict mode calls on the main thread, holding the block
    weakly, so a block dropped while open can be collected (and closed)."""
    ref = weakref.ref(block)

    def on_sync(call: dict[str, Any]) -> None:
        live = ref()
        if live is not None:
            live._on_sync(call)

    return on_sync


class no_sync:
    """Raises `loopscope.SyncError` at the first host-device sync inside the block.

        with loopscope.no_sync():                 # alone, or inside loopscope.profile()
            for i in range(steps):
                x = model(x)                      # an x.item() here raises at that line

    allow: sync kinds to let through, e.g. allow={"print"} (see loopscope.SYNC_KINDS).
    Each thread has its own blocks (blocks on several threads at once are
    fine; within one thread they do not nest).  A profile may start and end
    inside the block.  Without a GPU or CUPTI the block runs unguarded, with
    one LoopscopeWarning."""

    def __init__(self, allow: Iterable[str] | str | None = None) -> None:
        self.allow = _check_allow(allow)
        self._threads: set[int] = set()  # the threads it guards now

    def __enter__(self) -> "no_sync":
        from ._profile import _warn_once

        started = _session.enter_block(self, _weak_handler(self),
                                       threading.current_thread() is threading.main_thread())
        self._threads.add(threading.get_ident())
        if started is not None and not started["watching_syncs"]:
            try:
                _warn_once(f"loopscope.no_sync: syncs cannot be watched here: "
                           f"{started['syncs_reason']}. The block runs unguarded.")
            except BaseException:  # warnings turned into errors: leave nothing armed
                self._threads.discard(threading.get_ident())
                _session.exit_block()
                raise
        return self

    def _error(self, call: dict[str, Any] | None) -> SyncError | None:
        if call is None:
            return None
        site = Resolver().sync_site(call, call.get("before", ()))  # as the report names it
        if site.kind in self.allow:
            return None
        if site.file:
            where = f"{display_path(site.file)}:{site.line} in {site.function}()"
        elif call.get("stale"):
            where = (f"thread {call['thread_id']} (its Python line is unknown: a profile "
                     "started or ended while the call waited)")
        else:
            where = f"thread {call['thread_id']} (no Python frame)"
        code = site.call or site.code
        message = (f"host-device sync inside loopscope.no_sync() at {where}"
                   f"{': ' + code if code else ''}  [{site.kind}] via {call['api']}")
        return SyncError(message, file=site.file, line=site.line, function=site.function,
                         code=site.code, kind=site.kind, api=call["api"])

    def _on_sync(self, call: dict[str, Any]) -> None:
        error = self._error(call)
        if error is not None:
            raise error

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        ident = threading.get_ident()
        calls = _session.exit_block() if ident in self._threads else []
        self._threads.discard(ident)
        error = next(filter(None, map(self._error, calls)), None)
        if error is not None and exc_type is None:
            raise error
        return False

    def __del__(self) -> None:
        threads = getattr(self, "_threads", None)
        if threads and not _session.exiting:
            _session.drop_block(threads)
            warnings.warn("loopscope.no_sync(): a block was dropped while open (its __enter__ "
                          "ran, its __exit__ never did): its thread is no longer guarded",
                          _profile_warning(), stacklevel=2)


def _profile_warning() -> type[Warning]:
    from ._profile import LoopscopeWarning

    return LoopscopeWarning
