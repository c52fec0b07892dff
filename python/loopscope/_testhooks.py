"""The C core's test hooks, for the tests and the benchmarks: synthetic
records and API calls, fake PM samples, a scripted clock, the worker thread
and the caches driven without a GPU, so expected numbers are exact.

The hooks (csrc/testhooks/ls_test_hooks.c) are compiled into loopscope._core only in a
test build (LOOPSCOPE_TEST_HOOKS=1 when it is built), so a release's _core
carries only the product; from any other build, importing this module raises
ImportError saying how to rebuild.  _inject and _set_test_clock are the
product's (a recording's replay uses them, csrc/python_api/ls_inject.c) and come from
here too, so the tests reach every hook one way."""
from __future__ import annotations

from . import _core

REBUILD = ("this build of loopscope has no test hooks: rebuild it with LOOPSCOPE_TEST_HOOKS=1 "
           "(LOOPSCOPE_TEST_HOOKS=1 pip install \".[test]\", or LOOPSCOPE_TEST_HOOKS=1 python "
           "setup.py build_ext --inplace)")

try:
    from ._core import (_activity_back_to_back, _callback_wanted, _capture_pending, _choose_metrics, _decoder_probe,
                        _beside_decode, _decoder_state, _fake_context_created, _fake_samples, _filter_window, _finish_delay,
                        _ids_sort_unique, _inject_calls, _launches_latest_id, _locate_as, _names, _names_hammer, _open_ranges, _pmavail, _pmcache, _radix_order,
                        _sample_clock_offset, _sample_wanted, _sampler_keep, _sampler_state, _settle_samples, _split_after_stop,
                        _tick_starts)
except ImportError:
    raise ImportError(REBUILD) from None

_inject = _core._inject
_set_test_clock = _core._set_test_clock

__all__ = ["_activity_back_to_back", "_beside_decode", "_callback_wanted", "_capture_pending", "_choose_metrics", "_decoder_probe", "_decoder_state",
           "_fake_context_created", "_fake_samples", "_filter_window", "_finish_delay", "_ids_sort_unique", "_inject",
           "_inject_calls", "_launches_latest_id", "_locate_as", "_names", "_names_hammer", "_open_ranges", "_pmavail", "_pmcache",
           "_radix_order",
           "_sample_clock_offset", "_sample_wanted", "_sampler_keep", "_sampler_state", "_set_test_clock", "_settle_samples", "_split_after_stop", "_tick_starts"]
