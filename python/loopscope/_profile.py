"""The `profile()` context manager: starts the C core, marks steps, and keeps
the capture for `summary()` and `report()`."""
from __future__ import annotations

import atexit
import os
import sys
import time
import warnings
from typing import Any

from . import _core, _cupti_paths, _instrument, _settings
from ._html import Summary
from ._report import format_report
from ._summary import build_summary


@atexit.register
def _release_counters_at_exit() -> None:
    # Before the interpreter and CUPTI go away: end a profile left open (its
    # records are dropped), let loopscope's worker thread finish what it
    # holds (at most 10 s), give the counters back (sampling stays enabled a
    # few seconds after a profile, for the next one) and end the thread.
    if _core.active():
        try:
            _core.stop()
        except Exception:  # exiting anyway: never turn that into an error
            pass
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


def _check_thresholds(value: Any) -> tuple[float, float]:
    try:
        normal, severe = (float(v) for v in value)
    except (TypeError, ValueError):
        raise TypeError(
            f"gap_thresholds_us must be two numbers (normal_below, severe_above), got {value!r}"
        ) from None
    if not 0 <= normal <= severe <= 1e9:
        raise ValueError(
            f"gap_thresholds_us must satisfy 0 <= normal <= severe, got {value!r}"
        )
    return normal, severe


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
    buffer_mb, max_buffer_mb: size of one CUPTI buffer, and the pool's cap.
    warm_up:            at start, put one 1-byte memset through the GPU and wait, so
                        CUPTI's lazy set-up (0.15-1.5 ms) is not a fake bubble in step 0.
    metrics:            sample the GPU's SM and DRAM counters (CUPTI PM sampling) on the
                        device the loop runs on; any failure leaves summary["sm"] None
                        with the reason in summary["metrics_error"], tracing goes on.
                        With trace=False this is the counters-only mode (no per-kernel
                        tracing, near-zero overhead; GPU busy % then comes from GR active).
                        loopscope's worker thread sets sampling up (the first time in a
                        process ~0.4 s on an H200, while the loop runs) and starts it;
                        samples cover the loop from then on (summary["sm"]["coverage_pct"]).
    metrics_interval_us: sampling interval (default 100 us).
    metrics_buffer_mb:  the GPU-side buffer samples wait in until loopscope's worker
                        thread takes them, every metrics_decode_ms (default 10 ms) and
                        after the stop; an overflow is reported in
                        summary["metrics"]["overflows"], never silent.
    """

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
        metrics: bool = True,
        metrics_interval_us: float = 100.0,
        metrics_buffer_mb: float = 64,
        metrics_decode_ms: float = 10.0,
    ) -> None:
        self._thresholds = _check_thresholds(gap_thresholds_us)
        if not isinstance(step_name, str) or not step_name:
            raise TypeError(f"step_name must be a non-empty str, got {step_name!r}")
        if not (0.0625 <= buffer_mb <= max_buffer_mb < float("inf")):
            raise ValueError(
                "need 0.0625 <= buffer_mb <= max_buffer_mb (finite, in MiB), got "
                f"buffer_mb={buffer_mb!r}, max_buffer_mb={max_buffer_mb!r}"
            )
        if not (1.0 <= float(metrics_interval_us) <= 1e6):
            raise ValueError(f"metrics_interval_us must be between 1 and 1e6, got {metrics_interval_us!r}")
        if not (1.0 <= float(metrics_buffer_mb) <= 1 << 16):
            raise ValueError(f"metrics_buffer_mb must be between 1 and 65536, got {metrics_buffer_mb!r}")
        if not (1.0 <= float(metrics_decode_ms) <= 1e4):
            raise ValueError(f"metrics_decode_ms must be between 1 and 10000, got {metrics_decode_ms!r}")
        self._options = dict(
            trace=bool(trace),
            syncs=bool(syncs),
            driver_api=bool(driver_api),
            buffer_bytes=int(buffer_mb * (1 << 20)),
            max_buffers=max(1, int(max_buffer_mb // buffer_mb)),
            warm_up=bool(warm_up),
            metrics=bool(metrics),
            metrics_interval_ns=int(round(float(metrics_interval_us) * 1000)),
            metrics_buffer_bytes=int(float(metrics_buffer_mb) * (1 << 20)),
            metrics_decode_ns=int(float(metrics_decode_ms) * 1e6),
        )
        self._step_name = step_name
        self._next_step = 0
        self._state: dict[str, Any] | None = None
        self._capture: Any = None
        self._summary: dict[str, Any] | None = None
        self._host_ns = 0
        self._stop_error: str | None = None

    # -- the with-block --------------------------------------------------
    def __enter__(self) -> "Profile":
        if self._state is not None:
            raise RuntimeError("this Profile was already used; create a new loopscope.profile()")
        wants_cupti = self._options["trace"] or self._options["syncs"] or self._options["metrics"]
        busy = _other_profiler() if wants_cupti else None
        options = dict(self._options, trace=self._options["trace"] and busy is None,
                       syncs=self._options["syncs"] and busy is None,
                       metrics=self._options["metrics"] and busy is None,
                       metrics_device=_current_device(),
                       **_settings.core_options(self._options["warm_up"]))
        self._state = _core.start(cupti_paths=_cupti_paths.candidates(), **options)
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
                _core.stop()
                raise
        self._mismatches_at_start = _instrument.mismatch_count()
        self._t0 = time.perf_counter_ns()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._host_ns = time.perf_counter_ns() - self._t0
        self._state["instrument_mismatches"] = (
            _instrument.mismatch_count() - self._mismatches_at_start)
        try:
            self._capture = _core.stop()
        except Exception as error:  # never lose the user's run to the profiler
            self._stop_error = f"{type(error).__name__}: {error}"
            _warn_once(f"loopscope: stopping the profile failed: {self._stop_error}")
        return False

    def step(self, name: str | None = None):
        """A context manager for one loop step: an NVTX range plus timings.
        Ranges of instrumented modules inside it are prefixed by its name.

        name: the step's name; "{i}" in it is replaced by the index.
        Defaults to the profile's step_name ("Step_{i}")."""
        index = self._next_step
        self._next_step += 1
        template = self._step_name if name is None else name
        if not isinstance(template, str):
            raise TypeError(f"step name must be a str, got {template!r}")
        label = template.replace("{i}", str(index))
        return _instrument.StepScope(_core.step(label, index))

    # -- results ---------------------------------------------------------
    def _require_finished(self) -> None:
        if self._state is None:
            raise RuntimeError("the profile has not run yet: use `with loopscope.profile() as prof:`")
        if self._capture is None and self._stop_error is None:
            raise RuntimeError("the profile is still running: call summary() after the with-block")

    def summary(self) -> dict[str, Any]:
        """The summary dict (see PRODUCT.md); computed once, then cached."""
        self._require_finished()
        if self._summary is None:
            self._summary = Summary(build_summary(
                self._capture, self._state, self._thresholds, self._host_ns, self._stop_error
            ))
        return self._summary

    def report(self) -> str:
        """The summary as readable text, verdict first."""
        return format_report(self.summary())

    def export_trace(self, path) -> str:
        """Writes a Chrome/Perfetto JSON trace (steps, ranges, GPU ops, host
        syncs, launch gaps); returns the path."""
        from ._trace_export import export_trace

        return export_trace([self], path)

    def save_recording(self, path, *, command: str | None = None) -> str:
        """Writes the raw records to a JSON(.gz) recording that
        loopscope can analyse again later, anywhere (see _recording)."""
        from ._recording import save

        return str(save(self, path, command=command))

    def _repr_html_(self) -> str:
        from ._html import profile_html

        return profile_html(self)

    def __repr__(self) -> str:
        if self._state is None:
            return "<loopscope.Profile (not started)>"
        if self._capture is None:
            return "<loopscope.Profile (running)>"
        verdict = self.summary()["diagnosis"]["verdict"]
        return f"<loopscope.Profile steps={self._next_step} verdict={verdict}>"


def profile(**options: Any) -> Profile:
    """Profile the GPU work of a with-block: `with loopscope.profile() as prof:`.

    Options are those of `Profile` (trace, gap_thresholds_us, step_name, ...)."""
    return Profile(**options)
