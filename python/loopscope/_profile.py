"""The `profile()` context manager: starts the C core, marks steps, and at
its exit hands over a `FinishedProfile`, the value `summary()`, `report()`,
the views and the files read (readers build the same value from a trace)."""
from __future__ import annotations

import atexit
import functools
import os
import sys
import time
import warnings
import weakref
from time import perf_counter_ns as _enter_clock_ns  # apart from `time`, which tests script
from typing import Any, Callable

from . import _core
from .live import _cupti_paths, _instrument, _options, _session, _settings
from .distributed import _distributed
from .views._html import profile_html
from .views._html_file import title, write_page
from .live._module_steps import ModuleSteps, check_module
from .files._recording import save
from .views._report import format_report
from ._summary import Summary, build_step_figures, build_summary
from .views._trace_export import export_trace


# The C core's last word at exit, registered first so that it runs right
# after the handler below: a C function that atexit calls directly, with no
# Python code in it, so a Ctrl-C at exit cannot cut it short.  It stops a
# session the handler below left running and ends loopscope's worker thread
# (counters given back) before CUDA and CUPTI go away.
atexit.register(_core._at_exit)


@atexit.register
def _release_counters_at_exit() -> None:
    # A profile still open ends here (nobody can read it any more).  Then
    # loopscope's worker thread finishes what it holds (at most 10 s), the
    # counters are given back (sampling stays enabled a few seconds after a
    # profile, for the next one) and the thread ends, before the interpreter
    # and CUPTI go away.  A forked child leaves the parent's profile alone.
    # Interrupted anywhere (Ctrl-C), _core._at_exit does what is left.
    _session.stop_at_exit()
    if not _session.forked and not _core.active():
        _core._release_counters()

_warned: set[str] = set()


class LoopscopeWarning(RuntimeWarning):
    """loopscope could not do part of its job (e.g. no GPU); the run goes on."""


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, LoopscopeWarning, stacklevel=3)


def _other_profiler() -> str | None:
    """Names another tool that traces this process right now, if any.

    The C core learns from CUPTI's subscription whether a client holds CUPTI,
    but Kineto keeps its subscription after torch.profiler ends, so a held
    slot alone does not mean somebody traces.  These checks tell: a CUDA
    injection tool (Nsight Systems / Compute) or torch.profiler running."""
    injected = os.environ.get("CUDA_INJECTION64_PATH")
    if injected:
        return (
            f"a CUDA tool is injected into this process (CUDA_INJECTION64_PATH={injected}, "
            "e.g. Nsight Systems or Nsight Compute) and owns CUPTI; profile outside it. "
            "NVTX ranges still reach that tool"
        )
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch._C._autograd._profiler_enabled():
            return (
                "torch.profiler (Kineto) is running and owns CUPTI; only one CUPTI client "
                "may trace a process. NVTX ranges and host step times still work"
            )
    except Exception:  # a torch without this private hook: nothing to tell
        return None
    return None


def _current_device() -> int:
    """The CUDA device torch runs on, when torch has set CUDA up; else -1
    (the C core then takes the current context's device, or device 0)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return int(torch.cuda.current_device())
    except Exception:  # a torch without CUDA, or one in a bad state: let the core choose
        return -1
    return -1


_HERE = os.path.dirname(os.path.abspath(__file__))


@functools.lru_cache(maxsize=256)
def _is_ours(filename: str) -> bool:
    """A code file of loopscope's own, in the package or one of its
    subpackages (asked at every enter: cached, as abspath costs ~1 us a frame)."""
    return os.path.abspath(filename).startswith(_HERE + os.sep)


def _user_site() -> str:
    """file:line of the innermost frame outside loopscope (where a profile
    was entered)."""
    frame: Any = sys._getframe(1)
    while frame is not None and _is_ours(frame.f_code.co_filename):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"


# FinishedProfile.load() is readers' load() and .compare() is surfaces'
# compare(): both sit on floors above this one, so neither may be imported
# here (tests/house/test_import_graph.py).  Each hands its function over
# when its own module is imported (provide(), called beside its def), and
# loopscope/__init__ imports both: through `import loopscope` they are always
# there.  Dependency inversion keeps the imports downward and the methods on
# the value, with no second copy of either function.
_PROVIDED: dict[str, Callable[..., Any]] = {}
_PROVIDERS = {"load": "loopscope.readers._analyze", "compare": "loopscope.surfaces._compare"}


def provide(name: str, function: Callable[..., Any]) -> None:
    """Hands FinishedProfile the function behind its method `name` ("load"
    or "compare"), from the floor above that defines it."""
    if name not in _PROVIDERS:
        raise ValueError(f"FinishedProfile has no method provided from above named {name!r} "
                         f"(known: {', '.join(sorted(_PROVIDERS))})")
    _PROVIDED[name] = function


def _provided(name: str) -> Callable[..., Any]:
    """The function provide() handed over for `name`; RuntimeError saying
    what to import when its module has not been imported yet."""
    function = _PROVIDED.get(name)
    if function is None:
        raise RuntimeError(
            f"FinishedProfile.{name}() is provided by {_PROVIDERS[name]}, which has not been "
            f"imported: `import loopscope` (it imports every part) before calling it")
    return function


class FinishedProfile:
    """A finished profile as a value: its records, the analysed model, the
    summary and their views.  A `loopscope.profile()` block hands one over at
    its exit (`prof.finished`); `loopscope.load()` (or FinishedProfile.load())
    reads one from a file, save() writes one, compare() sets it against another.

    capture:    the raw records (_core.Capture); None when stopping failed.
    state:      what the session said about itself (tracing, why syncs or
                SM/DRAM are missing, ...), as build_summary reads it.
    thresholds: the gap thresholds in us, (normal_below, severe_above).
    host_ns:    the host time the profile spanned.
    stop_error: why there are no records, when stopping failed.
    summary:    the summary, when the reader made it itself; else it is made
                from the records at the first summary() call.
    extra:      keys added to the summary made from the records.
    gathered:   the torch.distributed session whose cross-rank figures
                summary() adds (None: a single process)."""

    # answered as a finished Profile answers them (the views, `loopscope run`)
    is_running = False
    is_finished = True

    def __init__(self, capture: Any, *, state: dict[str, Any], thresholds: tuple[float, float],
                 host_ns: int, stop_error: str | None = None,
                 summary: dict[str, Any] | None = None, extra: dict[str, Any] | None = None,
                 gathered: _distributed.Session | None = None) -> None:
        self.capture = capture
        self.state = state
        self.thresholds = thresholds
        self.host_ns = host_ns
        self.stop_error = stop_error
        self._extra = extra
        self._gathered = gathered
        self._summary: Summary | None = None
        # a reader's own summary is also the local one: no rank gathered into it
        self._local: dict[str, Any] | None = None if summary is None else self._own(summary)

    def _own(self, summary: dict[str, Any]) -> Summary:
        self._summary = Summary(summary)
        self._summary.owner = weakref.ref(self)  # its HTML draws this profile's time line
        return self._summary

    @property
    def model(self) -> Any:
        """The analysed model (_core.Model), with the gap thresholds and the
        recorded steps: computed once, cached on the capture.  None when
        there is no capture."""
        if self.capture is None:
            return None
        return self.capture.model(*self.thresholds)

    def summary(self) -> dict[str, Any]:
        """The summary dict (see PRODUCT.md); computed once, then cached."""
        if self._summary is None:
            return self._own(_distributed.attach(self._gathered, self.local_summary()))
        return self._summary

    def step_figures(self) -> dict[str, Any]:
        """What loopscope.watch() reads of a light block (build_step_figures):
        its steps and checks without the sync sites or any rank's figures
        (a light block gathers none); the summary itself when it is made
        already, or when the capture holds GPU records, traced or injected
        (not cached: a later summary() builds the whole one)."""
        if self._local is None:
            figures = build_step_figures(self.capture, self.state, self.thresholds,
                                         self.host_ns, self.stop_error)
            if figures is not None:
                return figures
        return self.summary()

    def local_summary(self) -> dict[str, Any]:
        """This process's own summary, before any cross-rank figures."""
        if self._local is None:
            local = build_summary(
                self.capture, self.state, self.thresholds, self.host_ns, self.stop_error)
            local.update(self._extra or {})
            self._local = local
        return self._local

    def report(self) -> str:
        """The summary as readable text, verdict first."""
        return format_report(self.summary())

    def export_trace(self, path: str | os.PathLike[str]) -> str:
        """Writes a Chrome/Perfetto JSON trace (steps, ranges, GPU ops, host
        syncs, launch gaps); returns the path."""
        return export_trace([self], path)

    @classmethod
    def load(cls, path: str | os.PathLike[str], **options: Any) -> "FinishedProfile":
        """The finished profile of a file: the same as `loopscope.load(path,
        **options)` (a saved recording, a torch.profiler trace or an Nsight
        Systems export)."""
        loaded: FinishedProfile = _provided("load")(path, **options)
        return loaded

    def save(self, path: str | os.PathLike[str], *, command: str | None = None) -> str:
        """Writes the recording (the raw records, JSON; gzip when the name
        ends in .gz) that load() reads back; returns the path.  The same as
        save_recording(), whatever the suffix: save_html() writes a page."""
        return self.save_recording(path, command=command)

    def save_recording(self, path: str | os.PathLike[str], *,
                       command: str | None = None) -> str:
        """Writes the raw records to a JSON(.gz) recording that
        loopscope can analyse again later, anywhere (see _recording)."""
        return str(save(self, path, command=command))

    def compare(self, other: Any) -> dict[str, Any]:
        """This profile (before) against `other` (after: a summary dict, a
        finished profile or a file path): the same as
        `loopscope.compare(self, other)`."""
        result: dict[str, Any] = _provided("compare")(self, other)
        return result

    def to_html(self) -> str:
        """The notebook view as an HTML fragment (verdict, tables, the time
        line); save_html() writes a whole page."""
        return profile_html(self)

    def save_html(self, path: str | os.PathLike[str]) -> str:
        """Writes the notebook view as an HTML page a browser opens; returns
        the path.  OSError (HtmlFileError) naming the file when it cannot."""
        return write_page(profile_html(self), path, title(self.summary()))

    def _repr_html_(self) -> str:
        return profile_html(self)

    def __repr__(self) -> str:
        summary = self.summary()  # its steps: a replayed recording has no prof.step() calls
        return (f"<loopscope.Profile steps={len(summary['steps'])} "
                f"verdict={summary['diagnosis']['verdict']}>")


class Profile:
    """One profiled region.  Use through `loopscope.profile()`.

    trace:              trace GPU activity with CUPTI (False: host ranges only).
    syncs:              watch the CUDA calls that make the host wait (CUPTI callbacks)
                        and report each sync with the Python line that caused it.
    gap_thresholds_us:  (normal_below, severe_above); gaps in between are warnings.
    step_name:          default step name; "{i}" is replaced by the step index.
    driver_api:         only when CUPTI's callback slot is taken (e.g. after
                        torch.profiler ran): also take driver-API activity records, so
                        cuBLAS/Triton/CuPy launches (driver API) are tied to their
                        steps; False saves ~1.5% there and loses those.
    buffer_mb, max_buffer_mb: size of one CUPTI buffer (0.0625-1024 MiB), and the
                        pool's cap (buffer_mb-65536 MiB).
    warm_up:            at the first traced profile of the process, put one 1-byte memset
                        through the GPU and wait, so CUPTI's lazy set-up (0.15-1.5 ms) is
                        not a fake bubble in its step 0 (later profiles need none: it
                        would cost each enter ~0.4 ms and changed no gap).
    metrics:            sample the GPU's SM and DRAM counters (CUPTI PM sampling) on the
                        device the loop runs on; any failure leaves summary["sm"] None
                        with the reason in summary["metrics_error"], tracing goes on.
                        With trace=False this is the counters-only mode (no per-kernel
                        tracing, near-zero overhead; GPU busy % then comes from GR active).
                        loopscope's worker thread sets sampling up (the first time in a
                        process ~0.4 s on an H100/H200) and starts it.  True: a profile
                        whose sampler must be set up (the first of a process) waits for
                        that at its enter, at most 2 s, so its samples cover the whole
                        loop (the wait: summary["overhead"]["metrics_setup_wait_ms"]);
                        "lazy": never wait, the set-up runs while the loop does and the
                        samples cover the loop from then on (summary["sm"]["coverage_pct"];
                        a first profile shorter than the set-up reads no counters).
                        A profile entered before the code made its CUDA context (e.g.
                        `loopscope run`) sets sampling up when that context appears.
    metrics_interval_us: sampling interval (1-1e6).  None (the default): 500 us, doubled
                        (up to 1 ms) for the next profiles when decoding the samples
                        falls behind them, which summary["metrics"]["interval_note"]
                        says (on an H200 CUPTI's decode takes ~0.5-0.8 ms of host time
                        per ms of busy SMs whatever the interval, and falls behind below
                        ~200 us).  One sampler runs
                        for the process (issue 43): a profile with another interval
                        starts it anew, and waits.
    metrics_buffer_mb:  the GPU-side buffer samples wait in until loopscope's sampler
                        thread takes them, every metrics_decode_ms (default 10 ms while a
                        profile runs, so summary() waits for one decode call and the
                        last ~10 ms of samples; 20 ms between profiles) and after the
                        stop; an overflow
                        is reported in
                        summary["metrics"]["overflows"], never silent (1-65536 MiB;
                        metrics_decode_ms 1-10000).
    gather:             under torch.distributed (detected, never imported here), send this
                        rank's compact summary to rank 0 at exit, whose summary then holds
                        every rank's (summary["ranks"]) and the cross-rank figures
                        (summary["skew"]: skews, waits, the straggler).  Every rank must
                        profile the same region; False where one rank profiles alone.
    gather_timeout_s:   how long rank 0 waits for the other ranks at the profile's start
                        and at its end (default 5 s) before naming them missing.
    steps:              a torch.nn.Module whose top-level calls are the steps (decode
                        loops with no place for prof.step(), e.g. model.generate()):
                        each step lasts from one call to the next, or until the function
                        that made the call returns (Python 3.12+; see _module_steps).
    graph_kernels:      only after loopscope.prepare() (graph-level mode, where each
                        CUDA-graph replay is one span): record each replay's kernels one by
                        one in this profile, at per-kernel cost.  Should the profiled code
                        instantiate a CUDA graph meanwhile, graph-level mode ends for the
                        process (summary["cupti_note"] says so): CUPTI would crash replaying
                        that graph with the graph-level trace on.

    Every option is checked here: a wrong one raises TypeError (True/False
    options take only bools; numbers must be int or float) or ValueError (out
    of range), naming the option, the value and what is allowed; a misspelt
    option is a TypeError naming the nearest right one.
    """

    @_options.keywords_checked("loopscope.profile()")
    def __init__(
        self,
        *,
        trace: bool = True,
        syncs: bool = True,
        gap_thresholds_us: tuple[float, float] = (20.0, 50.0),
        step_name: str = "Step_{i}",
        driver_api: bool = True,
        buffer_mb: float = 4,
        max_buffer_mb: float = 256,
        warm_up: bool = True,
        metrics: bool | str = True,
        metrics_interval_us: float | None = None,
        metrics_buffer_mb: float = 64,
        metrics_decode_ms: float = 10.0,
        gather: bool = True,
        gather_timeout_s: float = _distributed.DEFAULT_TIMEOUT_S,
        steps: Any = None,
        graph_kernels: bool = False,
    ) -> None:
        self._steps_module = check_module(steps)
        self._module_steps: ModuleSteps | None = None
        self._thresholds = _options.check_thresholds(gap_thresholds_us)
        if not isinstance(step_name, str) or not step_name:
            raise TypeError(f"step_name must be a non-empty str, got {step_name!r}")
        lazy_metrics = metrics == "lazy"
        flags = {name: _options.check_bool(name, value) for name, value in (
            ("trace", trace), ("syncs", syncs), ("driver_api", driver_api),
            ("warm_up", warm_up), ("metrics", True if lazy_metrics else metrics),
            ("graph_kernels", graph_kernels))}
        buffer_mb = _options.check_number("buffer_mb", buffer_mb)
        max_buffer_mb = _options.check_number("max_buffer_mb", max_buffer_mb,
                                              lowest=("buffer_mb", buffer_mb))
        interval_us = (0.0 if metrics_interval_us is None else
                       _options.check_number("metrics_interval_us", metrics_interval_us))
        metrics_mb = _options.check_number("metrics_buffer_mb", metrics_buffer_mb)
        decode_ms = _options.check_number("metrics_decode_ms", metrics_decode_ms)
        self._options: dict[str, Any] = dict(
            flags,
            buffer_bytes=int(buffer_mb * (1 << 20)),
            max_buffers=max(1, int(max_buffer_mb // buffer_mb)),
            metrics_interval_ns=int(round(interval_us * 1000)),
            metrics_buffer_bytes=int(metrics_mb * (1 << 20)),
            metrics_decode_ns=int(decode_ms * 1e6),
            metrics_wait_for_start=0 if lazy_metrics else 2,
        )
        self._gather = _distributed.check_options(gather, gather_timeout_s)
        self._dist: _distributed.Session | None = None
        self._steps = _core.Stepper(step_name)  # refuses a NUL in step_name
        # The instance attribute is the C method itself: a step costs no Python frame.
        self.step = self._steps.scope  # type: ignore[method-assign]
        self._state: dict[str, Any] | None = None
        self._finished: FinishedProfile | None = None
        self._exited = False

    # -- the with-block --------------------------------------------------
    def __enter__(self) -> "Profile":
        if self._state is not None:
            raise RuntimeError("this Profile was already used; create a new loopscope.profile()")
        entered = _enter_clock_ns()
        wants_cupti = self._options["trace"] or self._options["syncs"] or self._options["metrics"]
        busy = (_session.cupti_unusable() or _other_profiler()) if wants_cupti else None
        options = dict(self._options, trace=self._options["trace"] and busy is None,
                       syncs=self._options["syncs"] and busy is None,
                       metrics=self._options["metrics"] and busy is None,
                       metrics_device=_current_device(),
                       **_settings.core_options(self._options["warm_up"]))
        self._dist = _distributed.begin(self._gather)  # torch.distributed: the start exchange
        starting = _enter_clock_ns()
        # where CUPTI may be found: planned only for a profile that may load it
        # (~2 ms in a torch process until CUPTI is loaded, /proc/self/maps
        # read: a host-only watch paid it at each block)
        paths = _cupti_paths.candidates() if wants_cupti and busy is None else ()
        self._state, self._serial = _session.start_profile(
            self, _user_site(), dict(options, cupti_paths=paths))
        started = _enter_clock_ns()
        _distributed.started(self._dist)
        if busy is not None:
            if self._options["trace"]:
                self._state["reason"] = busy
            if self._options["syncs"]:
                self._state["syncs_reason"] = busy
            if self._options["metrics"]:
                self._state["metrics_reason"] = busy
        if self._options["trace"] and not self._state["tracing"]:
            try:
                _warn_once(
                    f"loopscope: GPU tracing is off: {self._state['reason']}. "
                    "Host ranges and step times are still recorded."
                )
            except BaseException:  # warnings turned into errors: leave no session behind
                _session.stop_profile(self._serial)
                raise
        if self._steps_module is not None:  # steps=module: its hooks, removed at exit
            try:
                self._module_steps = ModuleSteps(self, self._steps_module)
            except BaseException:
                _session.stop_profile(self._serial)
                raise
        self._mismatches_at_start = _instrument.mismatch_count()
        self._t0 = time.perf_counter_ns()
        # Where the enter's time went, for summary["overhead"]["enter_ms"].
        self._state["enter_ns"] = {"before_start": starting - entered, "start": started - starting,
                                   "after_start": _enter_clock_ns() - started}
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if self._exited:  # a second exit: the profile stopped at the first; nothing failed
            warnings.warn("loopscope: Profile.__exit__ was called again after the profile had "
                          "stopped: ignored (the profile and its records are as the first exit "
                          "left them)", LoopscopeWarning, stacklevel=2)
            return False
        host_ns = time.perf_counter_ns() - self._t0
        assert self._state is not None, "__exit__ without __enter__"
        self._exited = True
        if self._module_steps is not None:  # the last step ends here; the module is restored
            try:
                self._module_steps.close()
            except Exception as error:  # the hooks are gone; the step ends with the profile
                self._module_steps.errors.append(f"{type(error).__name__}: {error}")
        self._state["instrument_mismatches"] = (
            _instrument.mismatch_count() - self._mismatches_at_start)
        extra = None
        if self._module_steps is not None:
            self._state["steps_declared"] = (  # for _checks
                f"steps={type(self._steps_module).__name__} was given")
            extra = {"steps_from": "module", "module_steps": self._module_steps.note()}
        unguarded = None
        _distributed.stopping(self._dist)
        try:
            capture, unguarded = _session.stop_profile(self._serial)
        except Exception as error:  # never lose the user's run to the profiler
            failed = f"{type(error).__name__}: {error}"
            self._finish(None, host_ns, extra, failed)
            _warn_once(f"loopscope: stopping the profile failed: {failed}")
        except BaseException as interrupt:  # Ctrl-C while stopping: stop, then let it go on
            _session.abandon_profile(self._serial)
            self._finish(None, host_ns, extra,
                         f"interrupted while stopping ({type(interrupt).__name__})")
            raise
        else:
            self._finish(capture, host_ns, extra, None)
        if unguarded is not None:
            _warn_once(f"loopscope.no_sync: after the profile, syncs cannot be watched: "
                       f"{unguarded}. The open no_sync() blocks run unguarded.")
        # the end exchange, the gathering
        _distributed.finish(self._dist, self._finished, exc, _warn_once)
        return False

    def _finish(self, capture: Any, host_ns: int, extra: dict[str, Any] | None,
                stop_error: str | None) -> None:
        assert self._state is not None
        self._finished = FinishedProfile(
            capture, state=self._state, thresholds=self._thresholds, host_ns=host_ns,
            stop_error=stop_error, extra=extra, gathered=self._dist)

    def __del__(self) -> None:
        # Dropped while running (entered, never exited): stop, so the next
        # profile can start, and say so.
        if getattr(self, "_state", None) is None or self._finished is not None \
                or _session.exiting:
            return
        if self._module_steps is not None:
            self._module_steps.remove()
        _session.abandon_profile(self._serial)
        warnings.warn("loopscope: a profile was dropped while running (its __enter__ ran, its "
                      "__exit__ never did): it was stopped and its records discarded. Use "
                      "`with loopscope.profile() as prof:`", LoopscopeWarning, stacklevel=2)

    def step(self, name: str | None = None) -> _core.StepScope:
        """A context manager for one loop step: an NVTX range plus timings.
        Ranges of instrumented modules inside it are prefixed by its name.

        name: the step's name; "{i}" in it is replaced by the index.
        Defaults to the profile's step_name ("Step_{i}").  The index is taken
        when the step is entered (a step whose enter failed takes none); the
        returned object's `.step` and `.name` tell it from then on.
        (Each Profile replaces this method by its Stepper's C `scope`.)"""
        return self._steps.scope(name)

    # -- state -----------------------------------------------------------
    @property
    def is_running(self) -> bool:
        """True between entering the with-block and leaving it."""
        return self._state is not None and self._finished is None

    @property
    def is_finished(self) -> bool:
        """True once the with-block has ended (also when stopping failed)."""
        return self._finished is not None

    @property
    def finished(self) -> FinishedProfile | None:
        """The finished profile, the value the with-block hands over at its
        exit (None before)."""
        return self._finished

    @property
    def capture(self) -> Any:
        """The raw records of the finished profile (_core.Capture), or None
        (not finished, or stopping failed)."""
        return None if self._finished is None else self._finished.capture

    @property
    def model(self) -> Any:
        """The analysed model (_core.Model) of the finished profile, with its
        gap thresholds and live steps: computed once, cached on the capture.
        None when there is no capture."""
        return None if self._finished is None else self._finished.model

    # -- results: the finished profile's ----------------------------------
    def _require_finished(self) -> FinishedProfile:
        if self._state is None:
            raise RuntimeError("the profile has not run yet: use `with loopscope.profile() as prof:`")
        if self._finished is None:
            raise RuntimeError("the profile is still running: call summary() after the with-block")
        return self._finished

    def summary(self) -> dict[str, Any]:
        """The summary dict (see PRODUCT.md); computed once, then cached."""
        return self._require_finished().summary()

    def report(self) -> str:
        """The summary as readable text, verdict first."""
        return format_report(self.summary())  # summary(): the pytest plugin's ends the block

    def export_trace(self, path: str | os.PathLike[str]) -> str:
        """Writes a Chrome/Perfetto JSON trace (steps, ranges, GPU ops, host
        syncs, launch gaps); returns the path."""
        return self._require_finished().export_trace(path)

    def save(self, path: str | os.PathLike[str], *, command: str | None = None) -> str:
        """Writes the recording that loopscope.load() reads back; returns the
        path (FinishedProfile.save)."""
        return self._require_finished().save(path, command=command)

    def save_recording(self, path: str | os.PathLike[str], *,
                       command: str | None = None) -> str:
        """Writes the raw records to a JSON(.gz) recording that
        loopscope can analyse again later, anywhere (see _recording)."""
        return self._require_finished().save_recording(path, command=command)

    def compare(self, other: Any) -> dict[str, Any]:
        """The finished profile (before) against `other` (after): the same
        as `loopscope.compare(prof, other)` (FinishedProfile.compare)."""
        return self._require_finished().compare(other)

    def to_html(self) -> str:
        """The notebook view of the finished profile as an HTML fragment
        (verdict, tables, the time line); save_html() writes a whole page."""
        return self._require_finished().to_html()

    def save_html(self, path: str | os.PathLike[str]) -> str:
        """Writes the notebook view as an HTML page a browser opens; returns
        the path.  OSError (HtmlFileError) naming the file when it cannot."""
        return self._require_finished().save_html(path)

    def _repr_html_(self) -> str:
        return profile_html(self if self._finished is None else self._finished)  # or its state

    def __repr__(self) -> str:
        if self._state is None:
            return "<loopscope.Profile (not started)>"
        if self.is_running:
            return "<loopscope.Profile (running)>"
        summary = self.summary()  # its steps: a replayed recording has no prof.step() calls
        return (f"<loopscope.Profile steps={len(summary['steps'])} "
                f"verdict={summary['diagnosis']['verdict']}>")


# `loopscope.profile(...)` is the class itself: its real signature, every
# option typed and documented (help(), an IDE, Jupyter's Shift-Tab), and a
# misspelt option names the right one (_options.keywords_checked).
profile = Profile
