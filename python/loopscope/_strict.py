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
from typing import Iterable

from . import _core, _cupti_paths
from ._names import display_path
from ._syncs import KINDS, Resolver


class SyncError(RuntimeError):
    """A host-device sync happened inside `loopscope.no_sync()`.

    Attributes: file, line, function, code, kind, api."""

    def __init__(self, message: str, *, file=None, line=None, function=None, code=None,
                 kind=None, api=None) -> None:
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


class no_sync:
    """Raises `loopscope.SyncError` at the first host-device sync inside the block.

        with loopscope.no_sync():                 # alone, or inside loopscope.profile()
            for i in range(steps):
                x = model(x)                      # an x.item() here raises at that line

    allow: sync kinds to let through, e.g. allow={"print"} (see loopscope.SYNC_KINDS).
    Without a GPU or CUPTI the block runs unguarded, with one LoopscopeWarning."""

    def __init__(self, allow: Iterable[str] | str | None = None) -> None:
        self.allow = _check_allow(allow)
        self._own_session = False
        self._armed = False

    def __enter__(self) -> "no_sync":
        from ._profile import _warn_once

        if not _core.active():
            state = _core.start(trace=False, syncs=True, warm_up=False,
                                cupti_paths=_cupti_paths.candidates())
            self._own_session = True
            if not state["watching_syncs"]:
                try:
                    _warn_once(f"loopscope.no_sync: syncs cannot be watched here: "
                               f"{state['syncs_reason']}. The block runs unguarded.")
                except BaseException:  # warnings turned into errors: leave no session behind
                    self._own_session = False
                    _core.stop()
                    raise
        _core._strict_arm(self._on_sync, threading.current_thread() is threading.main_thread())
        self._armed = True
        return self

    def _error(self, token: int) -> SyncError | None:
        call = _core._live_call(token)
        if call is None:
            return None
        site = Resolver().site(call)
        if site.kind in self.allow:
            return None
        where = (f"{display_path(site.file)}:{site.line} in {site.function}()"
                 if site.file else f"thread {call['thread_id']} (no Python frame)")
        code = site.call or site.code
        message = (f"host-device sync inside loopscope.no_sync() at {where}"
                   f"{': ' + code if code else ''}  [{site.kind}] via {call['api']}")
        return SyncError(message, file=site.file, line=site.line, function=site.function,
                         code=site.code, kind=site.kind, api=call["api"])

    def _on_sync(self, token: int) -> None:
        error = self._error(token)
        if error is not None:
            raise error

    def __exit__(self, exc_type, exc, tb) -> bool:
        token = _core._strict_disarm() if self._armed else 0
        self._armed = False
        error = self._error(token) if token else None
        if self._own_session:
            self._own_session = False
            _core.stop()
        if error is not None and exc_type is None:
            raise error
        return False
