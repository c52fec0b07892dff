"""Sync detection without a GPU: fake CUPTI callbacks go through the real
switchboard (`_testhooks._inject_calls`) from real Python frames, and every
summary figure is exact.

How the fakes work: `FakeTensor.item` and friends are made only of C
callables (functools.partial, map, next), so while a fake call is in the
switchboard the innermost Python frame is the test's own line, exactly as
for torch's C methods (`Tensor.item`, `Tensor.__bool__`, ...).  Each fake
call reads the profile clock once, at enter; its exit is enter + duration.
Expected lines come from `here()` or from a `# site` marker, never from
hard-coded numbers.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import json
import os
import sys
import sysconfig
import threading

import pytest

import loopscope
from machine import driver_present
from loopscope import _testhooks
from loopscope.figures._syncs import Resolver, format_site

THIS_FILE = __file__
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))

COPY_CORR = 7     # correlation id of the copy inside FakeTensor's syncs
FETCH_CORR = 9    # correlation id of FakeTensor.fetch's lone async copy
COPY_NS, WAIT_NS = 2_000, 1_000
# What torch's .item()/.cpu() do: an async copy to the host, then a stream sync.
ITEM_CALLS = [("cudaMemcpyAsync", COPY_NS, COPY_CORR), ("cudaStreamSynchronize", WAIT_NS)]

MEMCPY_HTOD, MEMCPY_DTOH, MEMCPY_DTOD = 1, 2, 8
DEVICE_MEMORY, PAGEABLE, PINNED = 0, 1, 2


def here() -> int:
    """The caller's current line number."""
    return sys._getframe(1).f_lineno


def copy_record(correlation_id, host_memory, copy_kind=MEMCPY_DTOH, start=10):
    """A memcpy activity record for the copy call with this correlation id."""
    return (start, start + 10, 0, 7, correlation_id, None, 4, copy_kind, host_memory)


def pageable_copies(*correlation_ids):
    """Injects records saying these async copies used pageable host memory."""
    _testhooks._inject("memcpy", [copy_record(c, PAGEABLE, start=10 + 20 * i)
                             for i, c in enumerate(correlation_ids)])


def c_callable(calls, *then, release_gil=True):
    """A callable made of C functions only (no Python frame of its own).  Each
    call injects `calls` through the real switchboard, then returns the
    tokens passed through `then` (e.g. bool, so it can serve as __bool__).
    One positional argument (x.to("cpu"), x[mask], a format spec) is taken
    and ignored: it is next()'s default for an iterator that never ends."""
    inject = functools.partial(_testhooks._inject_calls, release_gil=release_gil)
    results = map(inject, itertools.repeat(calls))
    for f in then:
        results = map(f, results)
    return functools.partial(next, results)


def make_fake_tensor(release_gil=True):
    """A stand-in for a CUDA tensor whose syncing methods are C-level."""
    sync = c_callable(ITEM_CALLS, release_gil=release_gil)

    class FakeTensor:
        item = cpu = tolist = numpy = nonzero = to = __getitem__ = sync
        __bool__ = c_callable(ITEM_CALLS, bool, release_gil=release_gil)
        __str__ = __repr__ = __format__ = c_callable(ITEM_CALLS, str, release_gil=release_gil)
        __float__ = c_callable(ITEM_CALLS, len, float, release_gil=release_gil)
        __int__ = c_callable(ITEM_CALLS, len, release_gil=release_gil)
        __iter__ = c_callable(ITEM_CALLS, iter, release_gil=release_gil)
        fetch = c_callable([("cudaMemcpyAsync", COPY_NS, FETCH_CORR)])  # a non_blocking copy
        release = c_callable([("cudaFree", WAIT_NS)])

    tensor = FakeTensor()
    # t.any(): a tensor again, without a sync (the truth test of it syncs)
    FakeTensor.any = functools.partial(next, itertools.repeat(tensor))
    return tensor


# The GPU work of a loop step: one kernel launch (it separates the syncs of
# consecutive steps, as real kernels do).
launch_kernels = c_callable([("cudaLaunchKernel", 0)])


class FakeStream:
    synchronize = c_callable([("cudaStreamSynchronize", WAIT_NS)])


class FakeEvent:
    synchronize = c_callable([("cudaEventSynchronize", WAIT_NS)])


class FakeDevice:
    synchronize = c_callable([("cudaDeviceSynchronize", WAIT_NS)])


X = make_fake_tensor()
X_HOLDING_GIL = make_fake_tensor(release_gil=False)
STREAM, EVENT, DEVICE = FakeStream(), FakeEvent(), FakeDevice()

SITE_KEYS = ("file", "line", "function", "code", "call", "kind")


def where(site):
    """The identifying fields of a site."""
    return {k: site[k] for k in SITE_KEYS}


def expected(line, function, call, kind, file=THIS_FILE):
    code = open(file, encoding="utf-8").read().splitlines()[line - 1].strip()
    return {"file": file, "line": line, "function": function, "code": code, "call": call,
            "kind": kind}


def only_site(summary):
    sites = summary["syncs"]["sites"]
    assert len(sites) == 1, sites
    return sites[0]


def marked_line(fn):
    """Line number of the `# site` line inside fn."""
    lines, first = inspect.getsourcelines(fn)
    found = [first + i for i, text in enumerate(lines) if text.rstrip().endswith("# site")]
    assert len(found) == 1, fn
    return found[0]


# ---------------------------------------------------------------------------
# Sites and kinds, from real frames: each scenario syncs on its `# site` line.

def sync_item():
    v = X.item()  # site


def sync_cpu():
    v = X.cpu()  # site


def sync_to_cpu():
    v = X.to("cpu")  # site


def sync_to_device():
    v = X.to("cuda:1")  # site


def sync_tolist():
    v = X.tolist()  # site


def sync_list():
    v = list(X)  # site


def sync_numpy():
    v = X.numpy()  # site


def sync_nonzero():
    v = X.nonzero()  # site


def sync_mask():
    mask = [True, False]
    v = X[mask]  # site


def sync_print():
    print(X)  # site


def sync_str():
    s = str(X)  # site


def sync_fstring():
    s = f"{X}"  # site


def sync_float():
    f = float(X)  # site


def sync_int():
    i = int(X)  # site


def sync_stream():
    STREAM.synchronize()  # site


def sync_event():
    EVENT.synchronize()  # site


def sync_device():
    DEVICE.synchronize()  # site


def sync_pageable_copy():
    v = X.fetch()  # site


def sync_free():
    X.release()  # site


def sync_non_ascii():
    s, v = "ü→", X.item()  # site


def sync_multi_line_call():
    v = X.to(
        "cpu")


def sync_if():
    if X:  # site
        a = 1
        a += 1


def sync_while():
    while X:  # site
        break


def sync_assert():
    assert X  # site


def sync_and():
    v = X and 1  # site


def sync_not():
    v = not X  # site


def sync_if_expression():
    v = 1 if X else 2  # site


KIND_CASES = [
    (sync_item, "X.item()", "item"),
    (sync_cpu, "X.cpu()", "cpu"),
    (sync_to_cpu, 'X.to("cpu")', "cpu"),
    (sync_to_device, 'X.to("cuda:1")', "memcpy"),
    (sync_tolist, "X.tolist()", "tolist"),
    (sync_list, "list(X)", "tolist"),
    (sync_numpy, "X.numpy()", "numpy"),
    (sync_nonzero, "X.nonzero()", "nonzero"),
    (sync_mask, "X[mask]", "nonzero"),
    (sync_print, "print(X)", "print"),
    (sync_str, "str(X)", "print"),
    (sync_fstring, '{X}' if sys.version_info >= (3, 12) else 'f"{X}"', "print"),
    (sync_float, "float(X)", "item"),
    (sync_int, "int(X)", "item"),
    (sync_stream, "STREAM.synchronize()", "stream_sync"),
    (sync_event, "EVENT.synchronize()", "event_sync"),
    (sync_device, "DEVICE.synchronize()", "synchronize"),
    (sync_pageable_copy, "X.fetch()", "memcpy"),
    (sync_free, "X.release()", "other"),
    (sync_non_ascii, "X.item()", "item"),
]

def sync_comprehension_if():
    v = [1 for _ in range(2) if X]  # site


def sync_comprehension_if_call():
    v = [1 for _ in range(2) if X.any()]  # site


def sync_set_comprehension_if():
    v = {1 for _ in range(2) if X}  # site


def sync_dict_comprehension_if():
    v = {1: 2 for _ in range(2) if X}  # site


def sync_generator_if():
    v = list(1 for _ in range(2) if X)  # site


def sync_lambda_if():
    v = (lambda: 1 if X.any() else 2)()  # site


def sync_lambda_not():
    v = (lambda: not X)()  # site


def sync_if_call():
    if X.any():  # site
        pass


# (scenario, the tested expression's text)
TRUTH_TEST_CASES = [
    (sync_comprehension_if, "X"), (sync_comprehension_if_call, "X.any()"),
    (sync_set_comprehension_if, "X"), (sync_dict_comprehension_if, "X"),
    (sync_generator_if, "X"), (sync_lambda_if, "X.any()"), (sync_lambda_not, "X"),
    (sync_if_call, "X.any()"),
]


def bool_case(scenario):
    return pytest.param(scenario, "X", id=scenario.__name__.removeprefix("sync_"))


BOOL_CASES = [
    bool_case(sync_if),
    bool_case(sync_while),
    bool_case(sync_assert),
    bool_case(sync_if_expression),
    bool_case(sync_and),
    bool_case(sync_not),
]


def run_scenario(scenario):
    with loopscope.profile() as prof:
        pageable_copies(COPY_CORR, FETCH_CORR)
        scenario()
    return only_site(prof.summary())


@pytest.mark.parametrize("scenario, call, kind", KIND_CASES,
                         ids=[c[0].__name__ for c in KIND_CASES])
def test_site_and_kind_of_each_call(scenario, call, kind):
    """The site is exactly the scenario's `# site` line: this file, the
    function, the stripped source line, the call's own text, and its kind."""
    site = run_scenario(scenario)
    assert where(site) == expected(marked_line(scenario), scenario.__qualname__, call, kind)


def truth_test_code(scenario):
    """The code object (the scenario's own or one nested in it: a
    comprehension, generator expression or lambda, as this Python compiles
    it) holding a truth-testing instruction on the `# site` line, read with
    dis; asserts there is exactly one such code."""
    import dis

    line = marked_line(scenario)
    tests = ("POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_FALSE",
             "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE",
             "JUMP_IF_FALSE_OR_POP", "JUMP_IF_TRUE_OR_POP", "UNARY_NOT", "TO_BOOL")
    found, todo = [], [scenario.__code__]
    while todo:
        code = todo.pop()
        todo += [c for c in code.co_consts if hasattr(c, "co_code")]
        if any(i.opname in tests and i.positions.lineno == line for i in dis.get_instructions(code)):
            found.append(code)
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("scenario, tested", TRUTH_TEST_CASES,
                         ids=[c[0].__name__.removeprefix("sync_") for c in TRUTH_TEST_CASES])
def test_truth_test_in_a_comprehension_lambda_or_of_a_call_is_kind_bool(scenario, tested):
    """The truth test of a tensor in a comprehension's or generator
    expression's `if`, a lambda, or of a call's result (`if t.any():`) is
    kind bool, whatever source position this Python gives the instruction
    (3.11: the whole comprehension; 3.12: the call): the kind is read from
    the instruction itself.  The site's function is the code object that
    holds the test on this Python (comprehensions are inlined from 3.12)."""
    site = run_scenario(scenario)
    code = truth_test_code(scenario)
    assert where(site) == expected(marked_line(scenario), code.co_qualname, tested, "bool")


def test_multi_line_call_is_reported_at_its_first_line():
    """A call spread over two lines: its first line, its whole text."""
    site = run_scenario(sync_multi_line_call)
    line = inspect.getsourcelines(sync_multi_line_call)[1] + 1
    assert (site["line"], site["kind"]) == (line, "cpu")
    assert site["code"] == "v = X.to("
    assert site["call"].replace(" ", "") == 'X.to("cpu")'


@pytest.mark.parametrize("scenario, call", BOOL_CASES)
def test_truth_test_of_a_tensor_is_kind_bool(scenario, call):
    """`if t:` and the other truth tests of a tensor are kind 'bool', and the
    call text is the tested expression, not the whole statement."""
    site = run_scenario(scenario)
    assert where(site) == expected(marked_line(scenario), scenario.__qualname__, call, "bool")


def test_function_is_the_qualified_name_of_a_nested_function():
    """A sync inside a local function names it `outer.<locals>.inner`."""

    def inner():
        line = here() + 1
        X.item()
        return line

    with loopscope.profile() as prof:
        line = inner()
    assert where(only_site(prof.summary())) == expected(
        line, "test_function_is_the_qualified_name_of_a_nested_function.<locals>.inner",
        "X.item()", "item")


class TestMethodSites:
    def test_function_is_class_dot_method(self):
        """A sync inside a method names it `Class.method`."""
        with loopscope.profile() as prof:
            line = here() + 1
            v = X.cpu()
        assert where(only_site(prof.summary())) == expected(
            line, "TestMethodSites.test_function_is_class_dot_method", "X.cpu()", "cpu")


def test_site_is_the_innermost_user_frame_whatever_the_caller():
    """One helper line called from two places: one site (the helper's line),
    two syncs; the callers do not split it."""

    def read(t):
        return t.item()

    line = inspect.getsourcelines(read)[1] + 1
    with loopscope.profile() as prof:
        pageable_copies(COPY_CORR)
        read(X)
        read(X)
    site = only_site(prof.summary())
    assert where(site) == expected(
        line, "test_site_is_the_innermost_user_frame_whatever_the_caller.<locals>.read",
        "t.item()", "item")
    assert site["count"] == 2


def test_code_without_source_still_has_file_and_line():
    """Code compiled from a string: the file name and line as Python knows
    them, no source text, and the kind from the API class."""
    code = compile("\n\nSTREAM.synchronize()\n", "<generated>", "exec")
    with loopscope.profile() as prof:
        exec(code, {"STREAM": STREAM})
    site = only_site(prof.summary())
    assert where(site) == {"file": "<generated>", "line": 3, "function": "<module>",
                           "code": None, "call": None, "kind": "stream_sync"}


# ---------------------------------------------------------------------------
# Frames inside torch: skipped for the site, but they decide the kind.

@pytest.fixture
def torch_dir():
    torch = pytest.importorskip("torch")
    return os.path.dirname(os.path.abspath(torch.__file__))


def torch_function(torch_dir, relative_file, source, name):
    """A real function whose code claims to live in torch's `relative_file`
    (as torch.cuda.synchronize does); it syncs from a real frame there."""
    namespace = {"_inject_calls": _testhooks._inject_calls}
    exec(compile(source, os.path.join(torch_dir, relative_file), "exec"), namespace)
    return eval(name, namespace)


# Every fake torch function makes the same calls, a copy then a stream
# sync (kind memcpy by the API alone), so only torch's frame can give the
# expected kind; a function of torch/cuda/__init__.py other than
# synchronize() leaves the kind to the API.
_ITEM = "_inject_calls([('cudaMemcpyAsync', 1000, 7), ('cudaStreamSynchronize', 1000)])"
# (file inside torch, its source, the expression giving the function, kind)
TORCH_CASES = [
    ("cuda/__init__.py", f"def synchronize():\n    {_ITEM}\n", "synchronize", "synchronize"),
    ("cuda/__init__.py", f"def current_stream():\n    {_ITEM}\n", "current_stream", "memcpy"),
    ("cuda/streams.py", f"class Stream:\n    def synchronize(self):\n        {_ITEM}\n",
     "Stream().synchronize", "stream_sync"),
    ("cuda/streams.py", f"class Event:\n    def synchronize(self):\n        {_ITEM}\n",
     "Event().synchronize", "event_sync"),
    ("_tensor_str.py", f"def _str(self=None):\n    {_ITEM}\n", "_str", "print"),
    ("_tensor.py", f"class Tensor:\n    def __array__(self):\n        {_ITEM}\n",
     "Tensor().__array__", "numpy"),
]


@pytest.mark.parametrize("relative_file, source, name, kind", TORCH_CASES,
                         ids=[f"{c[2]}-{c[3]}" for c in TORCH_CASES])
def test_torch_frames_decide_the_kind_and_are_skipped(torch_dir, relative_file, source, name,
                                                      kind):
    """A sync made inside torch's Python code is reported at the user's line
    that called torch, with the kind torch's frame tells."""
    fake_torch_call = torch_function(torch_dir, relative_file, source, name)
    with loopscope.profile() as prof:
        pageable_copies(COPY_CORR)
        line = here() + 1
        fake_torch_call()
    assert where(only_site(prof.summary())) == expected(
        line, "test_torch_frames_decide_the_kind_and_are_skipped", "fake_torch_call()", kind)


@pytest.fixture
def user_file(tmp_path):
    """A user script with known source; returns (path, line of `print(t)`)."""
    path = tmp_path / "denoise.py"
    path.write_text("import torch\n\n\ndef step(t):\n    y = t * 2\n    print(t)\n    return y\n")
    return str(path), 6


def call_of(frames, wait_class="copy_async"):
    return {"frames": frames, "wait_class": wait_class, "api": "cudaMemcpyAsync",
            "thread_id": 1}


def test_print_through_torch_frames_unit(torch_dir, user_file):
    """Resolver on synthetic frames: torch's _tensor_str and Tensor.__repr__
    inside, the user's print(t) outside -> the user's line, kind print."""
    path, line = user_file
    frames = [
        (os.path.join(torch_dir, "_tensor_str.py"), "_tensor_str", 300, 320, 320, 8, 30),
        (os.path.join(torch_dir, "_tensor.py"), "Tensor.__repr__", 450, 460, 460, 8, 40),
        (path, "step", 4, line, line, 4, 12),
    ]
    site = Resolver().site(call_of(frames))
    assert site.__dict__ == {"file": path, "line": line, "function": "step",
                             "code": "print(t)", "call": "print(t)", "kind": "print"}


def test_bool_rule_on_the_tested_expression_unit(user_file, tmp_path):
    """Resolver rule: a frame positioned on the tested expression of an `if`
    is kind bool (the positions Python 3.11 really gives are tested above)."""
    path = tmp_path / "loop.py"
    path.write_text("def step(t):\n    if t:\n        return 1\n")
    site = Resolver().site(call_of([(str(path), "step", 1, 2, 2, 7, 8)]))
    assert (site.line, site.code, site.call, site.kind) == (2, "if t:", "t", "bool")


def test_a_user_class_named_tensor_is_not_torch(user_file):
    """Only frames inside torch's folder decide a kind: a user's own
    Tensor.__repr__ that waits is the user's site, its kind from the API."""
    path, line = user_file
    site = Resolver().site(call_of([(path, "Tensor.__repr__", 4, line, line, -1, -1)], "device"))
    assert (site.file, site.line, site.function, site.kind) == (path, line, "Tensor.__repr__",
                                                                "synchronize")


def test_frozen_and_nameless_frames_are_not_the_users(user_file):
    """Frames of frozen modules (importlib's bootstrap) and of code with no
    file are skipped like the standard library's: the site is the user's."""
    path, line = user_file
    for inner in [("<frozen importlib._bootstrap>", "_call_with_frames_removed", 1, 241, 241, -1, -1),
                  (None, None, -1, -1, -1, -1, -1)]:
        site = Resolver().site(call_of([inner, (path, "step", 4, line, line, 4, 12)]))
        assert (site.file, site.line, site.kind) == (path, line, "print")


def test_a_frame_without_a_line_has_no_line_and_no_code(user_file):
    """A user frame whose line is unknown (-1): no line, no code, no call
    text (never a line counted from the end of the file)."""
    path, _ = user_file
    site = Resolver().site(call_of([(path, "step", 4, -1, -1, -1, -1)], "device"))
    assert site.__dict__ == {"file": path, "line": None, "function": "step", "code": None,
                             "call": None, "kind": "synchronize"}


def test_only_library_frames_report_the_innermost(torch_dir):
    """With no user frame at all, the innermost frame is the site."""
    inner = os.path.join(torch_dir, "cuda", "__init__.py")
    frames = [(inner, "synchronize", 1, 5, 5, -1, -1),
              (os.path.join(torch_dir, "nn", "modules", "module.py"), "Module._call_impl", 1, 9, 9, -1, -1)]
    site = Resolver().site(call_of(frames, "device"))
    assert (site.file, site.line, site.function, site.kind) == (inner, 5, "synchronize", "synchronize")


def test_torch_is_skipped_where_site_packages_is_outside_the_stdlib(torch_dir, user_file,
                                                                   monkeypatch):
    """torch's frames are skipped by their own folder, not only because
    site-packages may lie under the standard library folders (a layout such
    as Debian's dist-packages, where it does not)."""
    outside = {"stdlib": "/nonexistent/lib/python3", "platstdlib": "/nonexistent/lib/python3"}
    monkeypatch.setattr("loopscope.figures._syncs.sysconfig.get_paths", lambda: outside)
    # the folders are computed once per process: forget them for this test
    monkeypatch.setattr("loopscope.figures._syncs._prefix_cache", {}, raising=False)
    path, line = user_file
    frames = [(os.path.join(torch_dir, "_tensor.py"), "Tensor.item_helper", 1, 9, 9, -1, -1),
              (path, "step", 4, line, line, 4, 12)]
    site = Resolver().site(call_of(frames))
    assert (site.file, site.line, site.kind) == (path, line, "print")


@pytest.mark.parametrize("wait_class, kind", [
    ("stream", "stream_sync"), ("event", "event_sync"), ("device", "synchronize"),
    ("copy", "memcpy"), ("copy_async", "memcpy"), ("free", "other"), ("none", "other")])
def test_no_python_frame_gives_the_api_class_kind(wait_class, kind):
    """A call from a thread without Python (a C++ thread): no file, the kind
    from the API's wait class, and the report names the thread."""
    site = Resolver().site(call_of([], wait_class))
    assert site.__dict__ == {"file": None, "line": None, "function": None, "code": None,
                             "call": None, "kind": kind}
    shown = format_site({"file": None, "line": None, "function": None, "code": None,
                         "call": None, "kind": kind, "count": 3, "blocked_ms": 0.25,
                         "steps": [], "thread_id": 77})
    assert shown == f"thread 77 (no Python frame)  [{kind}] x3, blocked 0.250 ms"


def test_installed_third_party_library_is_a_user_site(user_file):
    """A sync inside a library in site-packages is reported in that library:
    only torch, loopscope and the standard library are skipped."""
    # site-packages often lies inside the standard library's folder: a venv's
    # platstdlib, or lib/python3.X of pyenv, conda and the docker images
    library = os.path.join(sysconfig.get_paths()["purelib"], "fancy_scheduler", "step.py")
    path, line = user_file
    frames = [(library, "Scheduler.step", 10, 42, 42, 8, 20), (path, "step", 4, line, line, 4, 12)]
    site = Resolver().site(call_of(frames))
    assert (site.file, site.line, site.function) == (library, 42, "Scheduler.step")


# ---------------------------------------------------------------------------
# Which calls are syncs, and how calls group into one sync.

class FakeCalls:
    """`FakeCalls.run(calls)`: injects any list of calls from the caller's line."""
    run = functools.partial(_testhooks._inject_calls)


CALLS = FakeCalls()


def syncs_of(calls, memcpys=()):
    """Summary['syncs'] of one profile that injects `calls` from one line."""
    with loopscope.profile() as prof:
        if memcpys:
            _testhooks._inject("memcpy", list(memcpys))
        CALLS.run(calls)
    return prof.summary()["syncs"]


def test_item_is_one_sync_of_two_calls():
    """.item() = async copy to pageable memory + stream sync = ONE sync."""
    s = syncs_of(ITEM_CALLS, [copy_record(COPY_CORR, PAGEABLE)])
    assert s["count"] == 1
    assert only_site({"syncs": s})["apis"] == {"cudaMemcpyAsync": 1, "cudaStreamSynchronize": 1}


def test_launch_between_splits_syncs():
    """Same line, same stack: two .item()s with a kernel launch between are
    two syncs of one site."""
    split = syncs_of(ITEM_CALLS + [("cudaLaunchKernel", 0)] + ITEM_CALLS,
                     [copy_record(COPY_CORR, PAGEABLE)])
    site = only_site({"syncs": split})
    assert (split["count"], site["count"]) == (2, 2)
    assert site["apis"] == {"cudaMemcpyAsync": 2, "cudaStreamSynchronize": 2}


def test_sequential_synchronous_copies_are_separate_syncs(test_clock):
    """Two cudaMemcpy calls one after the other (not one inside the other)
    from one line: two syncs, each 0.5 us."""
    s = syncs_of([("cudaMemcpy", 500), ("cudaMemcpy", 500)])
    site = only_site({"syncs": s})
    assert (s["count"], site["count"], site["blocked_ms"]) == (2, 2, 0.001)


def test_back_to_back_items_are_separate_syncs(test_clock):
    """Two .item() round trips from one line with no kernel between (e.g.
    [t.item() for t in losses]) are two syncs: the host waited twice."""
    test_clock.set(1_000_000, 1_000_000)
    s = syncs_of(ITEM_CALLS * 2, [copy_record(COPY_CORR, PAGEABLE)])
    site = only_site({"syncs": s})
    assert (s["count"], site["count"], site["blocked_ms"]) == (2, 2, 0.006)


def test_fourteen_pairs_between_launches_are_one_site_of_fourteen():
    """print(t) of a CUDA tensor: a launch, a copy and a sync, 14 times, from
    one line -> one site, count 14, each API 14 times."""
    records = [copy_record(100 + i, PAGEABLE, start=10 + 20 * i) for i in range(14)]
    calls = [c for i in range(14) for c in
             (("cudaLaunchKernel", 0), ("cudaMemcpyAsync", 1_000, 100 + i),
              ("cudaStreamSynchronize", 1_000))]
    s = syncs_of(calls, records)
    site = only_site({"syncs": s})
    assert (s["count"], site["count"]) == (14, 14)
    assert site["apis"] == {"cudaMemcpyAsync": 14, "cudaStreamSynchronize": 14}
    assert s["by_kind"] == {site["kind"]: 14}


@pytest.mark.parametrize("trace", [False, True])
def test_print_of_a_tensor_counts_the_same_without_its_kernel_launches(trace):
    """A light profile enables no kernel-launch callback (docs/syncs.md), so
    print(t)'s 14 launch, copy, sync triples reach it as 14 copy, sync
    pairs: still 14 syncs, since each copy is itself a launch and starts a
    new one.  The same calls in a traced profile count the same (there the
    copies' records say pageable memory; a light one has no copy record,
    so its syncs are the stream syncs alone)."""
    calls = [c for _ in range(14) for c in
             (("cudaMemcpyAsync", 1_000, COPY_CORR), ("cudaStreamSynchronize", 1_000))]
    with loopscope.profile(trace=trace) as prof:
        if trace:
            pageable_copies(COPY_CORR)
        CALLS.run(calls)
    s = prof.summary()["syncs"]
    site = only_site({"syncs": s})
    assert (s["count"], site["count"]) == (14, 14)


def test_nested_runtime_and_driver_calls_are_one_sync(test_clock):
    """cudaMemcpy (5 us) with the driver's cuMemcpyDtoH inside it (enters 1 us
    later, lasts 1 us): one sync, blocked for the union (5 us), not the sum."""
    s = syncs_of([("cudaMemcpy", 5_000), ("cuMemcpyDtoH_v2", 1_000)])
    site = only_site({"syncs": s})
    assert (s["count"], s["blocked_ms"], site["kind"]) == (1, 0.005, "memcpy")
    assert site["apis"] == {"cudaMemcpy": 1, "cuMemcpyDtoH": 1}


def test_repeated_waits_are_separate_syncs(test_clock):
    """Two stream syncs in a row, neither inside the other and no copy before
    them: two syncs (as three torch.cuda.synchronize() in a row are three),
    each blocked 1.5 us; one site, count 2."""
    s = syncs_of([("cudaStreamSynchronize", 1_500), ("cuStreamSynchronize", 1_500)])
    site = only_site({"syncs": s})
    assert (s["count"], s["blocked_ms"], site["kind"], site["count"]) == (2, 0.003, "stream_sync", 2)
    assert site["apis"] == {"cudaStreamSynchronize": 1, "cuStreamSynchronize": 1}


def test_launch_on_another_thread_does_not_split_a_sync():
    """A copy and its sync from one line of this thread stay one sync while
    another thread launches a kernel between them."""
    launched = threading.Event()

    def launcher():
        _testhooks._inject_calls([("cudaLaunchKernel", 0)])
        launched.set()

    with loopscope.profile() as prof:
        pageable_copies(COPY_CORR)
        for calls in ([ITEM_CALLS[0]], [ITEM_CALLS[1]]):
            CALLS.run(calls)  # the same line both times: the same stack
            if not launched.is_set():
                worker = threading.Thread(target=launcher)
                worker.start()
                worker.join()
    s = prof.summary()["syncs"]
    assert s["count"] == 1
    assert only_site(prof.summary())["apis"] == {"cudaMemcpyAsync": 1, "cudaStreamSynchronize": 1}


@pytest.mark.parametrize("host_memory, counted", [(PAGEABLE, 1), (PINNED, 0)])
def test_async_copy_waits_only_with_pageable_memory(host_memory, counted):
    """A non_blocking copy blocks the host only into pageable memory."""
    s = syncs_of([("cudaMemcpyAsync", 1_000, 42)], [copy_record(42, host_memory)])
    assert (s["count"], s["unjudged_async_copies"]) == (counted, 0)
    assert [x["kind"] for x in s["sites"]] == ["memcpy"] * counted


def test_async_copy_without_record_is_not_counted_but_reported():
    """No activity record to judge it by: not a sync, but counted as unjudged."""
    s = syncs_of([("cudaMemcpyAsync", 1_000, 42), ("cuMemcpyDtoHAsync_v2", 1_000, 43)],
                 [copy_record(99, PAGEABLE)])
    assert (s["count"], s["sites"], s["unjudged_async_copies"]) == (0, [], 2)


@pytest.mark.parametrize("record, counted", [
    (None, 1),                                            # no record: assume it waited
    (copy_record(5, PAGEABLE, MEMCPY_DTOH), 1),
    (copy_record(5, PINNED, MEMCPY_HTOD), 1),
    (copy_record(5, DEVICE_MEMORY, MEMCPY_DTOD), 0),      # device to device: no wait
], ids=["no-record", "dtoh-pageable", "htod-pinned", "dtod"])
def test_synchronous_copy_waits_unless_device_to_device(record, counted):
    """cudaMemcpy blocks the host unless both sides are device memory."""
    s = syncs_of([("cudaMemcpy", 1_000, 5)], [record] if record else [])
    assert s["count"] == counted
    assert [x["kind"] for x in s["sites"]] == ["memcpy"] * counted


def test_free_of_null_is_not_a_sync():
    """cudaFree(NULL)/cuMemFree(0) is a no-op: not even recorded (token 0);
    a real free waits for the device: kind other."""
    with loopscope.profile() as prof:
        tokens = CALLS.run([("cudaFree", 1_000, 0, 0), ("cuMemFree_v2", 1_000, 0, 0),
                            ("cudaFree", 1_000, 0, 0xdead)])
    assert tokens[:2] == [0, 0] and tokens[2] > 0
    s = prof.summary()["syncs"]
    assert (s["count"], only_site(prof.summary())["kind"]) == (1, "other")
    assert only_site(prof.summary())["apis"] == {"cudaFree": 1}


def test_device_to_device_async_copy_is_not_recorded():
    """cudaMemcpyAsync marked cudaMemcpyDeviceToDevice (kind 3: the fake
    call puts function_param in every parameter slot) never waits: no stack
    is taken for it (token 0); marked device to host (2) it is recorded."""
    with loopscope.profile() as prof:
        tokens = CALLS.run([("cudaMemcpyAsync", 1_000, 0, 3), ("cudaMemcpyAsync_ptsz_v7000", 1_000, 0, 3),
                            ("cudaMemcpyAsync", 1_000, 0, 2)])
    assert tokens[:2] == [0, 0] and tokens[2] > 0
    assert prof.summary()["syncs"]["unjudged_async_copies"] == 1


def test_launch_calls_are_never_syncs():
    """Launches, memsets and device-to-device async copies only launch."""
    with loopscope.profile() as prof:
        tokens = CALLS.run([("cudaLaunchKernel", 1_000), ("cuLaunchKernel", 1_000),
                            ("cudaMemsetAsync", 1_000), ("cuMemcpyDtoDAsync_v2", 1_000)])
    assert tokens == [0, 0, 0, 0]
    s = prof.summary()["syncs"]
    assert (s["count"], s["sites"], s["unjudged_async_copies"]) == (0, [], 0)


def test_driver_api_sync_is_caught():
    """Triton/CuPy sync through the driver API: caught the same way."""
    s = syncs_of([("cuCtxSynchronize", 1_000)])
    assert (s["count"], only_site({"syncs": s})["kind"]) == (1, "synchronize")
    assert only_site({"syncs": s})["apis"] == {"cuCtxSynchronize": 1}


def test_api_names_with_version_suffix_are_accepted():
    """Table names work with or without CUPTI's suffix; reports strip it."""
    s = syncs_of([("cudaStreamSynchronize_v3020", 1_000)])
    assert only_site({"syncs": s})["apis"] == {"cudaStreamSynchronize": 1}


# ---------------------------------------------------------------------------
# Exact figures: blocked time, steps, order, kinds, threads.

def test_loop_figures_are_exact(test_clock):
    """One .item() before the loop, then 3 steps that launch a kernel, call
    .item(), and in steps 0 and 2 wait 10 us for a stream.  Clock ticks of
    1 ms keep the calls apart: an .item() blocks 2 + 1 us."""
    test_clock.set(1_000_000, 1_000_000)
    stream = c_callable([("cudaStreamSynchronize", 10_000)])

    def read():
        X.item()

    item_line = inspect.getsourcelines(read)[1] + 1
    with loopscope.profile() as prof:
        pageable_copies(COPY_CORR)
        read()
        for i in range(3):
            with prof.step():
                launch_kernels()
                read()
                if i != 1:
                    stream_line = here() + 1
                    stream()
    s = prof.summary()
    syncs = s["syncs"]
    assert syncs["count"] == 6
    assert syncs["blocked_ms"] == 0.032  # 4 x 3 us + 2 x 10 us
    assert (syncs["in_steps"], syncs["outside_steps"]) == (5, 1)
    assert list(syncs["by_kind"].items()) == [("item", 4), ("stream_sync", 2)]  # by count
    assert [step["syncs"] for step in s["steps"]] == [2, 1, 2]
    stream_site, item_site = syncs["sites"]  # by blocked time, not by count
    assert where(item_site) == expected(item_line, "test_loop_figures_are_exact.<locals>.read",
                                        "X.item()", "item")
    assert (item_site["count"], item_site["blocked_ms"], item_site["steps"]) == (4, 0.012, [0, 1, 2])
    assert item_site["apis"] == {"cudaMemcpyAsync": 4, "cudaStreamSynchronize": 4}
    assert (stream_site["line"], stream_site["call"], stream_site["kind"]) == (
        stream_line, "stream()", "stream_sync")
    assert (stream_site["count"], stream_site["blocked_ms"], stream_site["steps"]) == (2, 0.02, [0, 2])
    assert stream_site["apis"] == {"cudaStreamSynchronize": 2}
    assert item_site["thread_id"] == stream_site["thread_id"] == threading.get_ident()
    # Each fake call reads the clock once (at enter): step 0 spans its
    # launch, copy, sync and stream sync, so 5 ticks of 1 ms.
    assert [step["host_ms"] for step in s["steps"]] == [5.0, 4.0, 5.0]



def test_each_step_holds_the_blocked_time_of_its_syncs(test_clock):
    """summary["steps"][i]["sync_blocked_ms"]: the host's time blocked in the
    step's syncs, each sync counted for the union of its calls (a driver
    call inside a runtime one adds nothing); a sync before the steps counts
    in none, a step without syncs holds 0.0, and without sync detection
    the figure is None.  Expected from the injected durations alone (clock
    ticks of 1 ms; each step ends with a launch, so no sync runs on into the
    next step's calls)."""
    test_clock.set(1_000_000, 1_000_000)
    launch = ("cudaLaunchKernel", 0)
    # per step: the calls injected, its syncs, and the host's blocked ns in them
    plan = [
        ([("cudaStreamSynchronize", 7_000), launch], 1, 7_000),
        ([], 0, 0),
        # the driver's copy enters 1 tick (1 ms) into the runtime's 5 ms one: the union
        ([("cudaMemcpy", 5_000_000), ("cuMemcpyDtoH_v2", 1_000_000), launch], 1, 5_000_000),
        ([("cudaStreamSynchronize", 1_500), launch, ("cuStreamSynchronize", 2_500), launch,
          ("cudaDeviceSynchronize", 40_000), launch], 3, 44_000),
    ]
    with loopscope.profile() as prof:
        CALLS.run([("cudaStreamSynchronize", 90_000), launch])  # before the steps
        for calls, _, _ in plan:
            with prof.step():
                if calls:
                    CALLS.run(calls)
    s = prof.summary()
    assert [st["syncs"] for st in s["steps"]] == [count for _, count, _ in plan]
    assert [st["sync_blocked_ms"] for st in s["steps"]] == [ns / 1e6 for _, _, ns in plan]
    assert s["syncs"]["blocked_ms"] == (90_000 + sum(ns for _, _, ns in plan)) / 1e6
    assert list(s["steps"][0])[9:11] == ["syncs", "sync_blocked_ms"]  # beside its count

    with loopscope.profile(syncs=False) as prof:  # no calls watched (nor injected)
        with prof.step():
            pass
    step = prof.summary()["steps"][0]
    assert (step["syncs"], step["sync_blocked_ms"]) == (None, None)


def test_by_kind_is_ordered_by_count():
    """by_kind lists the most frequent kind first, not the first seen nor
    the alphabetically first."""
    with loopscope.profile() as prof:
        X.cpu()
        for _ in range(2):
            launch_kernels()
            STREAM.synchronize()
    assert list(prof.summary()["syncs"]["by_kind"].items()) == [("stream_sync", 2), ("cpu", 1)]


def test_sites_with_equal_blocked_time_are_ordered_by_count(test_clock):
    """Equal blocked time: the site seen more often comes first."""
    test_clock.set(1_000_000, 1_000_000)
    once = c_callable([("cudaStreamSynchronize", 4_000)])
    twice = c_callable([("cudaStreamSynchronize", 2_000)])
    with loopscope.profile() as prof:
        once()
        for _ in range(2):
            launch_kernels()
            twice()
    sites = prof.summary()["syncs"]["sites"]
    assert [(x["count"], x["blocked_ms"]) for x in sites] == [(2, 0.004), (1, 0.004)]


@pytest.mark.parametrize("release_gil", [True, False])
def test_sync_on_another_thread_has_that_threads_site(release_gil):
    """A sync from a threading.Thread is attributed to that thread's own
    frames and id, with or without the GIL released."""
    x = make_fake_tensor(release_gil=release_gil)
    seen = {}

    def worker():
        seen["ident"] = threading.get_ident()
        seen["line"] = here() + 1
        x.item()

    with loopscope.profile() as prof:
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    site = only_site(prof.summary())
    assert where(site) == expected(
        seen["line"], "test_sync_on_another_thread_has_that_threads_site.<locals>.worker",
        "x.item()", "item")
    assert site["thread_id"] == seen["ident"] != threading.get_ident()


def test_holding_the_gil_gives_the_same_site():
    """release_gil=False and True capture the same stack, so the same site."""
    sites = []
    for x in (X, X_HOLDING_GIL):
        with loopscope.profile() as prof:
            line = here() + 1
            x.item()
        sites.append(where(only_site(prof.summary())))
    assert sites[0] == sites[1] == expected(line, "test_holding_the_gil_gives_the_same_site",
                                            "x.item()", "item")


def test_sync_overlapping_a_gap_is_its_cause(test_clock):
    """A gap between two kernels during which the host was in a sync has
    cause 'sync'; the loop then reads SYNC_BOUND and names the site.
    Clock: start 1.0 ms, step enter 1.1, sync 1.2-1.28, step exit 1.3, stop 1.4.
    The host waits in the sync past the gap's end: the whole gap is the
    sync's (issue 39: only what the host waited counts as sync idle)."""
    test_clock.set(1_000_000, 100_000)
    wait = c_callable([("cudaStreamSynchronize", 80_000)])
    with loopscope.profile() as prof:
        # k0 and k1 without a launch id: a traced window records every
        # launch, and an op launched before its first one is an earlier
        # profile's (ls_finish_filter_window)
        _testhooks._inject("kernel", [(1_150_000, 1_190_000, 0, 7, 0, "k0"),
                                 (1_260_000, 1_280_000, 0, 7, 0, "k1"),   # gap 70 us: sync
                                 (1_330_000, 1_340_000, 0, 7, 3, "k2")])  # gap 50 us: host
        _testhooks._inject("api", [(1_320_000, 1_321_000, 3)])
        with prof.step():
            line = here() + 1
            wait()
    s = prof.summary()
    assert s["gaps"]["by_cause"] == {"host": 1, "sync": 1, "other": 0}
    assert s["gaps"]["idle_by_cause_ms"] == {"host": 0.05, "sync": 0.07, "other": 0.0}
    assert [(g["after"], g["before"], g["cause"]) for g in s["gaps"]["worst"]] == [
        ("k0", "k1", "sync"), ("k1", "k2", "host")]
    site = only_site(s)
    assert (site["line"], site["blocked_ms"], site["steps"]) == (line, 0.08, [0])
    assert s["diagnosis"]["verdict"] == "SYNC_BOUND"
    assert f"most costly: {format_site(site)}" in s["diagnosis"]["reasons"][-1]
    assert s["diagnosis"]["actions"][-1] == f"remove these syncs from the loop: {format_site(site)}"


# ---------------------------------------------------------------------------
# Report text and JSON.

def test_report_line_of_a_site(test_clock, monkeypatch):
    """`file:line in function(): call  [kind] xN, blocked X ms, steps ...`,
    in the report under a headline with the totals."""
    test_clock.set(1_000_000, 1_000_000)
    with loopscope.profile() as prof:
        pageable_copies(COPY_CORR)
        for i in range(4):
            with prof.step():
                launch_kernels()
                if i in (1, 3):
                    line = here() + 1
                    X.item()
    monkeypatch.chdir(TESTS_DIR)
    site = only_site(prof.summary())
    text = (f"test_syncs.py:{line} in test_report_line_of_a_site(): X.item()  [item] x2, "
            f"blocked 0.006 ms, steps 1, 3")
    assert format_site(site) == text
    report = prof.report().splitlines()
    at = report.index("Syncs: 2 host-device syncs, host blocked 0.006 ms (2 inside steps, 0 outside)")
    assert report[at + 1] == "  " + text


def test_step_spans_in_the_report_line():
    """Consecutive steps are shown as ranges."""
    site = {"file": None, "line": None, "function": None, "code": None, "call": None,
            "kind": "item", "count": 6, "blocked_ms": 1.5, "steps": [0, 1, 2, 5, 7, 8],
            "thread_id": 3}
    assert format_site(site).endswith("[item] x6, blocked 1.500 ms, steps 0-2, 5, 7-8")


def test_summary_with_syncs_is_json_serialisable():
    """summary['syncs'] (and the whole summary) survive json round trips."""
    with loopscope.profile() as prof:
        pageable_copies(COPY_CORR)
        with prof.step():
            X.item()
            STREAM.synchronize()
    s = prof.summary()
    assert json.loads(json.dumps(s["syncs"])) == s["syncs"]
    assert json.loads(json.dumps(s)) == s


# ---------------------------------------------------------------------------
# When syncs are not watched.

def test_syncs_turned_off():
    """syncs=False and nothing injected: None with the reason, steps too,
    and the report says so."""
    with loopscope.profile(syncs=False) as prof:
        with prof.step():
            pass
    s = prof.summary()
    assert s["syncs"] is None
    assert s["syncs_error"] == "sync detection was turned off (syncs=False)"
    assert s["steps"][0]["syncs"] is None
    assert "Syncs: not watched: sync detection was turned off (syncs=False)" in prof.report()




@pytest.mark.real_tracing  # the real start-up, not conftest's syncs=False stand-in
@pytest.mark.skipif(driver_present(), reason="an NVIDIA driver is present: syncs can be watched")
def test_no_driver_reason():
    """Without a GPU driver and nothing injected: None, and why."""
    with loopscope.profile() as prof:
        with prof.step():
            pass
    s = prof.summary()
    assert s["syncs"] is None
    assert s["syncs_error"] == "no NVIDIA GPU driver on this machine (libcuda.so.1 cannot be opened)"
    assert s["steps"][0]["syncs"] is None


def test_watched_but_none_is_zero_not_none():
    """With syncs watched (here: injected) and a step without any, the step
    says 0 and the section lists no site."""
    with loopscope.profile() as prof:
        with prof.step():
            pass
        with prof.step():
            STREAM.synchronize()
    s = prof.summary()
    assert [step["syncs"] for step in s["steps"]] == [0, 1]
    assert s["syncs_error"] is None


# ---------------------------------------------------------------------------
# Bad input to the test hook.

@pytest.fixture
def running():
    with loopscope.profile() as prof:
        yield prof


def test_inject_calls_outside_a_profile():
    with pytest.raises(RuntimeError, match=r"_inject_calls: no profile is running"):
        _testhooks._inject_calls([("cudaStreamSynchronize", 1)])


@pytest.mark.parametrize("calls, error, pattern", [
    ([("cudaNotAThing", 1)], ValueError, r"call 0: cudaNotAThing is not an API call loopscope listens to"),
    ([("cudaStreamSynchronize", 1), ("cudaStream", 1)], ValueError, r"call 1: cudaStream is not an API call"),
    ([("", 1)], ValueError, r"call 0:  is not an API call"),
    ([["cudaFree", 1]], TypeError, r"call 0 must be a tuple \(api: str, duration_ns: int"),
    ([("cudaFree",)], TypeError, r"call 0 must be a tuple"),
    ([("cudaFree", 1, 2, 3, 4)], TypeError, r"call 0 must be a tuple"),
    ([(7, 1)], TypeError, r"call 0 must be a tuple"),
    ([("cudaFree", 1.5)], TypeError, r"call 0 must be a tuple"),
    ([("cudaFree", "1")], TypeError, r"call 0 must be a tuple"),
    ([None], TypeError, r"call 0 must be a tuple"),
    (5, TypeError, r"calls must be a sequence of tuples"),
    ([("cudaFree", -1)], ValueError, r"call 0: duration_ns \(-1\) out of range"),
    ([("cudaFree", 2**63)], ValueError, r"call 0: duration_ns .* out of range"),
    ([("cudaFree", 1, 2**32)], ValueError, r"call 0: correlation_id \(4294967296\) out of range"),
    ([("cudaFree", 1, -1)], ValueError, r"call 0: correlation_id .* out of range"),
    ([("cudaFree", 1, 0, -1)], ValueError, r"call 0: function_param .* out of range"),
    ([("cudaFree", 1, 0, 2**64)], ValueError, r"call 0: function_param .* out of range"),
    ([("cudaFree", True)], TypeError, r"call 0 must be a tuple .*its duration_ns is a bool"),
    ([("cudaFree", 1, 0, None)], TypeError, r"call 0 must be a tuple .*its function_param is a NoneType"),
])
def test_bad_calls_are_clear_errors(running, calls, error, pattern):
    with pytest.raises(error, match=pattern):
        _testhooks._inject_calls(calls)


@pytest.mark.parametrize("call", [("cudaFree", 2**64 + 5), ("cudaFree", 1, 2**64 + 7),
                                  ("cudaFree", -(2**64) + 5)])
def test_values_past_64_bits_are_out_of_range(running, call):
    with pytest.raises(ValueError, match="out of range"):
        _testhooks._inject_calls([call])


def test_a_bad_list_dispatches_nothing():
    """The whole list is checked before any call reaches the switchboard."""
    with loopscope.profile() as prof:
        with pytest.raises(ValueError):
            CALLS.run([("cudaStreamSynchronize", 1_000), ("cudaBogus", 1)])
        launch_kernels()
        DEVICE.synchronize()
    s = prof.summary()["syncs"]
    assert s["count"] == 1
    assert only_site(prof.summary())["apis"] == {"cudaDeviceSynchronize": 1}


def test_each_profile_names_its_own_sites_when_the_code_table_is_reused():
    """The table of code objects keeps its slots between profiles (a reset
    only moves its generation on): a profile must never find a code object
    seen by an earlier one, whose id was an index into that profile's
    table.  The order swaps, so a stale slot would give a wrong id."""

    def first():
        line = here() + 1
        X.item()
        return line

    def second():
        line = here() + 1
        X.cpu()
        return line

    for order in [(first, second), (second, first), (second,), (first, second, first)]:
        with loopscope.profile() as prof:
            seen = [(f.__name__, f()) for f in order]
        sites = prof.summary()["syncs"]["sites"]
        want = sorted(set(seen))
        assert sorted((s["function"].rsplit(".", 1)[-1], s["line"]) for s in sites) == want
        assert all(s["file"] == THIS_FILE for s in sites)


# Which calls get a CUPTI callback, by (waits, launches): a traced profile
# with sync detection (1, 1), a light one (1, 0: no launch is counted, only
# the calls that can wait), tracing without syncs (0, 1).  Written from the
# roles in csrc/common/ls_cbids.c, not from the code.
CALLBACKS = [
    # api                  traced  light  traced, syncs off
    ("cudaLaunchKernel",   True,   False, True),
    ("cudaGraphLaunch",    True,   False, True),
    ("cudaMemsetAsync",    True,   False, True),
    ("cuLaunchKernel",     True,   False, True),
    ("cuGraphLaunch",      True,   False, True),
    ("cuMemsetD32Async",   True,   False, True),
    ("cudaMemcpyAsync",    True,   True,  True),   # a launch that can wait: kept for its wait
    ("cuMemcpyDtoHAsync_v2", True, True,  True),
    ("cudaStreamSynchronize", True, True, False),
    ("cuStreamSynchronize", True,  True,  False),
    ("cudaMalloc",         True,   True,  False),  # memory calls: recorded with their stack
    ("cudaFree",           True,   True,  False),
]


@pytest.mark.parametrize("api, traced, light, no_syncs", CALLBACKS, ids=[c[0] for c in CALLBACKS])
def test_which_calls_get_a_callback(api, traced, light, no_syncs):
    assert _testhooks._callback_wanted(api, True, True) is traced
    assert _testhooks._callback_wanted(api, True, False) is light
    assert _testhooks._callback_wanted(api, False, True) is no_syncs


def test_callback_wanted_names_an_unknown_api():
    with pytest.raises(ValueError, match="cudaNoSuchCall"):
        _testhooks._callback_wanted("cudaNoSuchCall", True, True)


@pytest.mark.parametrize("launch", ["cudaLaunchKernel", "cuLaunchKernel"])
def test_a_launch_of_either_domain_between_a_copy_and_its_wait_splits_them(launch):
    """A traced profile records launches of both domains: either alone
    splits a copy from the stream sync after it (one line, this thread).
    Without the launch they are one sync
    (test_launch_on_another_thread_does_not_split_a_sync).  A light profile
    counts no launch (docs/syncs.md): there the two would be one sync."""
    with loopscope.profile() as prof:
        pageable_copies(COPY_CORR)
        for calls in ([ITEM_CALLS[0]], [(launch, 0)], [ITEM_CALLS[1]]):
            CALLS.run(calls)  # the same line each time: the same stack
    s = prof.summary()["syncs"]
    assert s["count"] == 2
    assert sorted((sorted(site["apis"].items()), site["count"]) for site in s["sites"]) == [
        ([("cudaMemcpyAsync", 1)], 1), ([("cudaStreamSynchronize", 1)], 1)]
