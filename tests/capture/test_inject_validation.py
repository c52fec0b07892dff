"""_testhooks._inject rejects bad input with TypeError/ValueError naming the
record and the problem, and a list that fails appends nothing."""
from __future__ import annotations

import pytest

import loopscope
from loopscope import _core, _testhooks
from loopscope.live import _options

GOOD_KERNEL = (1_000, 2_000, 0, 7, 1, "k")


@pytest.fixture
def running():
    """A running profile to inject into; yields the Profile."""
    with loopscope.profile() as prof:
        yield prof


def test_outside_a_profile_raises_runtime_error():
    with pytest.raises(RuntimeError, match="no profile is running"):
        _testhooks._inject("kernel", [GOOD_KERNEL])
    with loopscope.profile() as prof:
        pass
    with pytest.raises(RuntimeError, match="no profile is running"):
        _testhooks._inject("kernel", [GOOD_KERNEL])  # after the profile stopped
    assert prof.summary()["source"] is None


def test_returns_the_count(running):
    assert _testhooks._inject("kernel", [GOOD_KERNEL, (3_000, 4_000, 0, 7, 2)]) == 2
    assert _testhooks._inject("kernel", ()) == 0
    assert _testhooks._inject("sync_record", iter([(1, 2)])) == 1  # any iterable of tuples


@pytest.mark.parametrize("kind", ["bogus", "Kernel", "", 1, None])
def test_unknown_kind(running, kind):
    with pytest.raises(ValueError, match="kind must be one of 'kernel', 'memcpy', 'memset', 'graph'"):
        _testhooks._inject(kind, [GOOD_KERNEL])


def test_wrong_argument_count(running):
    with pytest.raises(TypeError, match="takes 2 arguments, got 1"):
        _testhooks._inject("kernel")
    with pytest.raises(TypeError, match="takes 2 arguments, got 3"):
        _testhooks._inject("kernel", [], [])


def test_records_not_a_sequence(running):
    with pytest.raises(TypeError, match="records must be a sequence of tuples"):
        _testhooks._inject("kernel", 5)


# (kind, records, exception, message pattern)
BAD_SHAPES = [
    ("kernel", [[1_000, 2_000, 0, 7, 1]], r"kernel record 0 must be a tuple \(start_ns, end_ns, device, stream, correlation_id"),
    ("kernel", [(1_000, 2_000, 0, 7)], r"kernel record 0 must be a tuple"),
    ("kernel", [GOOD_KERNEL + (64, 8, 32, 40, 0, "extra")], r"kernel record 0 must be a tuple"),
    ("kernel", [GOOD_KERNEL + (64, "grid")], r"kernel record 0, grid must be an int or a tuple of 1 to 3 ints"),
    ("kernel", [GOOD_KERNEL + (64, (1, 2, 3, 4))], r"kernel record 0, grid must be an int or a tuple of 1 to 3 ints"),
    ("kernel", [GOOD_KERNEL + (64, 8, (32, None))], r"kernel record 0, block must be"),
    ("memcpy", [GOOD_KERNEL, (1, 2)], r"memcpy record 1 must be a tuple"),
    ("memset", [None], r"memset record 0 must be a tuple"),
    ("graph", [GOOD_KERNEL + ("g", 64)], r"graph record 0 must be a tuple \(start_ns, end_ns, device, stream, correlation_id\[, name\]\)"),
    ("graph", [(1_000, 2_000, 0, 7)], r"graph record 0 must be a tuple"),
    ("api", [(1_000, 2_000)], r"api record 0 must be a tuple \(start_ns, end_ns, correlation_id\[, thread_id\[, domain\[, api\]\]\]\)"),
    ("api", [(1_000, 2_000, 1, 2, 0, "cudaGraphLaunch", 3)], r"api record 0 must be a tuple"),
    ("api", [(1_000, 2_000, 1, 2, 0, 3.0)], r"api record 0, field 5 \(api\) must be a str or an int"),
    ("range", [(1_000, 2_000, "r", -1, -1)], r"range record 0 must be a tuple \(start_ns, end_ns, name, parent, step, thread_id\)"),
    ("sync_record", [(1_000,)], r"sync record 0 must be a tuple \(start_ns, end_ns\[, stream\]\)"),
    ("sync_record", [(1_000, 2_000, 1, 2)], r"sync record 0 must be a tuple"),
]


@pytest.mark.parametrize("kind, records, pattern", BAD_SHAPES)
def test_wrong_shape_is_a_type_error(running, kind, records, pattern):
    with pytest.raises(TypeError, match=pattern):
        _testhooks._inject(kind, records)


BAD_FIELDS = [
    # wrong types
    ("kernel", (1_000, 2_000.0, 0, 7, 1), TypeError, r"kernel record 0, field 1 must be an int, not float"),
    ("kernel", (True, 2_000, 0, 7, 1), TypeError, r"kernel record 0, field 0 must be an int, not bool"),
    ("kernel", (1_000, 2_000, "0", 7, 1), TypeError, r"field 2 must be an int, not str"),
    ("kernel", (1_000, 2_000, 0, 7, 1, 5), TypeError, r"kernel record 0, field 5 \(name\) must be a str or None, not int"),
    ("memcpy", (1_000, 2_000, 0, 7, 1, "c", 1.5), TypeError, r"memcpy record 0, field 6 must be an int"),
    ("api", (1_000, 2_000, None), TypeError, r"api record 0, field 2 must be an int, not NoneType"),
    ("sync_record", (1_000, 2_000, "s"), TypeError, r"sync record 0, field 2 must be an int"),
    ("graph", (1_000, 2_000, 0, 7, 1, 5), TypeError, r"graph record 0, field 5 \(name\) must be a str or None, not int"),
    # bad values
    ("kernel", (2_000, 1_000, 0, 7, 1), ValueError, r"kernel record 0 ends before it starts \(start_ns=2000, end_ns=1000\): a negative duration"),
    ("api", (2_000, 1_999, 1), ValueError, r"api record 0 ends before it starts"),
    ("sync_record", (2_000, 1_000), ValueError, r"sync record 0 ends before it starts"),
    ("kernel", (0, 1_000, 0, 7, 1), ValueError, r"kernel record 0 has start_ns 0"),
    ("graph", (2_000, 1_000, 0, 7, 1), ValueError, r"graph record 0 ends before it starts"),
    ("sync_record", (0, 0), ValueError, r"sync record 0 has start_ns 0"),
    ("kernel", (-5, 1_000, 0, 7, 1), ValueError, r"kernel record 0, field 0 is -5: must be between 0 and"),
    ("kernel", (1_000, 2_000, -1, 7, 1), ValueError, r"field 2 is -1: must be between 0 and 4294967295"),
    ("kernel", (1_000, 2_000, 0, 2**32, 1), ValueError, r"field 3 is 4294967296: must be between 0 and 4294967295"),
    ("memset", (1_000, 2_000, 0, 7, 1, None, -8), ValueError, r"memset record 0, field 6 is -8"),
    ("api", (1_000, 2_000, 1, -2), ValueError, r"api record 0, field 3 is -2"),
    ("kernel", (1_000, 2**64, 0, 7, 1), ValueError, r"field 1 is 18446744073709551616: must be between 0 and 9223372036854775807"),
]


@pytest.mark.parametrize("kind, record, error, pattern", BAD_FIELDS)
def test_bad_field(running, kind, record, error, pattern):
    with pytest.raises(error, match=pattern):
        _testhooks._inject(kind, [record])


def test_message_names_the_failing_record(running):
    """The index in the message is the bad record's place in the list."""
    records = [GOOD_KERNEL, (3_000, 4_000, 0, 7, 2), (6_000, 5_000, 0, 7, 3)]
    with pytest.raises(ValueError, match=r"kernel record 2 ends before it starts"):
        _testhooks._inject("kernel", records)


def test_failing_list_appends_nothing():
    """A list with good records before the bad one leaves the capture as it was,
    for every kind."""
    with loopscope.profile() as prof:
        _testhooks._inject("kernel", [(1_000, 2_000, 0, 7, 1, "k0"), (102_000, 103_000, 0, 7, 2, "k1")])
        with pytest.raises(ValueError, match="kernel record 1"):
            _testhooks._inject("kernel", [(200_000, 201_000, 0, 7, 3), (5, 4, 0, 7, 4)])
        with pytest.raises(TypeError, match="memcpy record 2"):
            _testhooks._inject("memcpy", [(300_000, 301_000, 0, 7, 5), (400_000, 401_000, 0, 7, 6), "x"])
        with pytest.raises(ValueError, match="api record 1"):
            _testhooks._inject("api", [(50_000, 50_100, 2), (0, 1, 1)])
        with pytest.raises(TypeError, match="sync record 1"):
            _testhooks._inject("sync_record", [(2_000, 102_000), (1.0, 2.0)])
    s = prof.summary()
    gpu, gaps = s["gpu"], s["gaps"]
    assert (gpu["kernels"], gpu["memcpys"], gpu["memsets"]) == (2, 0, 0)
    assert gpu["ops_without_launch_record"] == 2        # the api list was refused
    assert gaps["count"] == 1 and gaps["max_us"] == 100.0
    assert gaps["by_cause"] == {"host": 0, "sync": 0, "other": 1}  # the sync list was refused
    assert s["overhead"]["records"] == 2


def test_only_failing_lists_leave_no_gpu_sections():
    """If every injection failed, the profile reads as not injected at all."""
    with loopscope.profile() as prof:
        with pytest.raises(ValueError):
            _testhooks._inject("kernel", [(1_000, 2_000, 0, 7, 1), (0, 1, 0, 7, 2)])
    s = prof.summary()
    assert s["source"] is None
    assert s["gaps"] is None and s["gpu"] is None
    assert s["overhead"]["records"] == 0


def test_optional_fields():
    """Names may be None, bytes may be given, api thread and domain and sync
    stream too: each field is read back from the capture as given, and a
    left-out one as its default (no name, 0 bytes, thread 0, the runtime
    domain, stream 0)."""
    kernel = (1_000, 2_000, 0, 7, 1, None)
    memcpy = (3_000, 4_000, 0, 7, 2, "HtoD", 1 << 30, 1, 2)  # copy kind HtoD, pinned
    memset = (5_000, 6_000, 3, 2**32 - 1, 2**32 - 1)
    apis = [(500, 600, 1, 12345), (650, 700, 2, 12345, 1), (800, 900, 3)]
    syncs = [(2_000, 3_000, 7), (7_000, 7_000)]
    pageable = (3_000, 4_000, 0, 7, 4, "DtoH", 8, 2, 1)
    with loopscope.profile() as prof:
        assert _testhooks._inject("kernel", [kernel]) == 1
        assert _testhooks._inject("memcpy", [memcpy]) == 1
        assert _testhooks._inject("memset", [memset]) == 1
        assert _testhooks._inject("api", apis) == len(apis)
        assert _testhooks._inject("sync_record", syncs) == len(syncs)
        assert _testhooks._inject("memcpy", [pageable]) == 1
        # an async copy call for each: only the pageable one made the host wait
        _testhooks._inject_calls([("cudaMemcpyAsync", 1_000, memcpy[4])])
        _testhooks._inject_calls([("cudaMemcpyAsync", 1_000, pageable[4])])
    c = prof.capture
    # ops(): (kind, start, end, device, stream, correlation, name, bytes)
    assert sorted(c.ops()) == sorted([("kernel", *kernel, 0), ("memcpy", *memcpy[:7]),
                                      ("memset", *memset, None, 0), ("memcpy", *pageable[:7])])
    # apis(): (start, end, correlation, thread, cbid, domain); injected records have cbid 0
    assert sorted(c.apis()) == sorted([(500, 600, 1, 12345, 0, 0), (650, 700, 2, 12345, 0, 1),
                                       (800, 900, 3, 0, 0, 0)])
    # sync_records(): (start, end, stream, correlation, type)
    assert sorted(c.sync_records()) == [(2_000, 3_000, 7, 0, 0), (7_000, 7_000, 0, 0, 0)]
    # host memory (no column shows it) is read back through the sync rule:
    # a pinned async copy is no wait, a pageable one is; both were judged
    s = prof.summary()["syncs"]
    assert (s["count"], s["unjudged_async_copies"]) == (1, 0)
    assert s["sites"][0]["apis"] == {"cudaMemcpyAsync": 1}


def test_the_sample_hook_names_every_figure():
    """The figures a sample may carry come from the one metric table: the
    hook's message lists exactly those the model averages."""
    _core.start(_options.core_start_values(trace=False, syncs=False))
    try:
        _testhooks._inject("sample", [(1_000, 2_000, {"sm_active_pct": 1.0})])
        with pytest.raises(TypeError) as error:
            _testhooks._inject("sample", [(1_000,)])
    finally:
        capture = _core.stop()
    listed = str(error.value).split("(figures: ")[1].split(";")[0].split()
    averaged = [k for k in capture.model().metrics()["span"]
                if k not in ("samples", "covered_ns", "window_ns")]
    assert listed == averaged and len(listed) == 10


def test_a_sample_figure_that_is_not_a_number_is_named(running):
    """Found by the hostile property test: a str figure raised a bare
    TypeError ('must be real number, not str') without the record."""
    with pytest.raises(TypeError, match=r"loopscope._inject: sample record 0, sm_active_pct must "
                                        r"be a number, not str"):
        _testhooks._inject("sample", [(1, 2, {"sm_active_pct": ""})])
    with pytest.raises(TypeError, match="must be a number, not bool"):
        _testhooks._inject("sample", [(1, 2, {"sm_active_pct": True})])
