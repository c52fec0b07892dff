"""loopscope.instrument() on CPU torch: the hook tree, names, depth limits,
removal, exception safety and the range stack, exact on the scripted clock;
per-layer GPU figures from synthetic kernels; torch.compile.

The model is transformer-like and tiny.  Its leaves "launch a kernel": they
read the profiler clock once, as CUPTI stamps a launch call, and the test
then injects a kernel with that launch time.  With `test_clock`, clock read
n is 1_000_000 + n * 1_000 ns (read 0: profile start; then one read per range
enter, exit and launch)."""
from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch", reason="instrument() needs PyTorch")
from torch import nn  # noqa: E402

import loopscope  # noqa: E402
from loopscope import _core, _testhooks  # noqa: E402
from loopscope.live import _instrument

# torch.jit warns about its own deprecation (used directly and by Dynamo's imports).
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script:DeprecationWarning")


@pytest.fixture(autouse=True)
def _hook_stack_is_left_empty():
    """Every test leaves this thread's backward-range stack and its C range
    stack empty (checked, then reset)."""
    open_before = _testhooks._open_ranges()
    yield
    leftover = list(_instrument._local.stack)
    _instrument._local.stack.clear()
    assert leftover == [], "the test left hook ranges open on this thread"
    assert _testhooks._open_ranges() == open_before, "the test left ranges open on this thread"


class Launch(nn.Module):
    """A leaf that launches one kernel of `us` microseconds (see the module doc)."""

    def __init__(self, log: list, us: int, fail: type[BaseException] | None = None) -> None:
        super().__init__()
        self.log, self.us, self.fail = log, us, fail

    def forward(self, x):
        self.log.append((_core.now_ns(), self.us))
        if self.fail is not None:
            raise self.fail("planted")
        return x


class Block(nn.Module):
    def __init__(self, log: list) -> None:
        super().__init__()
        self.norm = Launch(log, 5)
        self.mlp = nn.Sequential()
        self.mlp.add_module("up", Launch(log, 20))
        self.mlp.add_module("act", Launch(log, 10))
        self.mlp.add_module("down", Launch(log, 20))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Tiny(nn.Module):
    """embed, two blocks (norm, mlp: up act down), final: 10 launches a call."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list = []
        self.embed = Launch(self.log, 3)
        self.layers = nn.ModuleList([Block(self.log), Block(self.log)])
        self.final = Launch(self.log, 5)

    def forward(self, x):
        x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        return self.final(x)


ALL_NAMES = {
    "": "Tiny", "embed": "embed",
    "layers.0": "layers.0", "layers.0.norm": "layers.0/norm", "layers.0.mlp": "layers.0/mlp",
    "layers.0.mlp.up": "layers.0/mlp/up", "layers.0.mlp.act": "layers.0/mlp/act",
    "layers.0.mlp.down": "layers.0/mlp/down",
    "layers.1": "layers.1", "layers.1.norm": "layers.1/norm", "layers.1.mlp": "layers.1/mlp",
    "layers.1.mlp.up": "layers.1/mlp/up", "layers.1.mlp.act": "layers.1/mlp/act",
    "layers.1.mlp.down": "layers.1/mlp/down",
    "final": "final",
}
# One call inside a step, reads from the step's enter: (name, parent, first read, last read).
# Parents index this list (0 is the step).  16 ranges, 42 reads a step.
ONE_STEP = [
    ("{s}", -1, 1, 42),
    ("{s}/Tiny", 0, 2, 41),
    ("{s}/embed", 1, 3, 5),                                   # launch at 4
    ("{s}/layers.0", 1, 6, 21),
    ("{s}/layers.0/norm", 3, 7, 9),                           # launch at 8
    ("{s}/layers.0/mlp", 3, 10, 20),
    ("{s}/layers.0/mlp/up", 5, 11, 13),
    ("{s}/layers.0/mlp/act", 5, 14, 16),
    ("{s}/layers.0/mlp/down", 5, 17, 19),
    ("{s}/layers.1", 1, 22, 37),
    ("{s}/layers.1/norm", 9, 23, 25),
    ("{s}/layers.1/mlp", 9, 26, 36),
    ("{s}/layers.1/mlp/up", 11, 27, 29),
    ("{s}/layers.1/mlp/act", 11, 30, 32),
    ("{s}/layers.1/mlp/down", 11, 33, 35),
    ("{s}/final", 1, 38, 40),
]
STEP_READS = 42


def expected_records(clock, steps: int, first_read: int = 1, first_step: int = 0,
                     first_index: int = 0):
    """range_records() of `steps` steps of one Tiny call each, the first one
    entered at clock read `first_read` as step `first_step`, its record at
    `first_index` in the list."""
    out = []
    for k in range(steps):
        base = first_index + k * len(ONE_STEP)
        offset = first_read - 1 + k * STEP_READS
        step = first_step + k
        for name, parent, a, b in ONE_STEP:
            out.append((name.format(s=f"Step_{step}"), parent + base if parent >= 0 else -1,
                        step if parent < 0 else None, clock.at(a + offset), clock.at(b + offset)))
    return out


def inject_kernels(log, per_step: int = 10, gap_us: int = 2, step_gap_us: int = 100):
    """One kernel per launch in `log`, back to back on the GPU with a gap of
    gap_us between kernels and step_gap_us before each step's first."""
    apis, kernels, cursor = [], [], 10_000_000
    for i, (launch_ns, us) in enumerate(log):
        if i:
            cursor += (step_gap_us if i % per_step == 0 else gap_us) * 1000
        apis.append((launch_ns, launch_ns + 100, i + 1))
        kernels.append((cursor, cursor + us * 1000, 0, 7, i + 1, f"k{i}"))
        cursor += us * 1000
    _testhooks._inject("api", apis)
    _testhooks._inject("kernel", kernels)


def run_steps(model, steps: int, **profile_options):
    with loopscope.profile(**profile_options) as prof:
        for _ in range(steps):
            with prof.step():
                model(torch.zeros(2))
        inject_kernels(model.log)
    return prof


def hook_counts(model) -> list[tuple[int, int, int, int]]:
    return [(len(m._forward_pre_hooks), len(m._forward_hooks), len(m._backward_pre_hooks),
             len(m._backward_hooks)) for m in model.modules()]


def module_state(model) -> list[list[tuple[str, int, int]]]:
    """Each module's __dict__ as (key, id(value), len(value) for dicts),
    in order: what instrument() + remove() must leave exactly as it was."""
    return [[(k, id(v), len(v) if isinstance(v, dict) else -1) for k, v in vars(m).items()]
            for m in model.modules()]


def wrapped(module) -> bool:
    return isinstance(vars(module).get("_call_impl"), _core.CallRange)


# -- the hook tree and names --------------------------------------------------

def test_every_called_module_gets_a_range_named_by_its_path():
    """Names are paths with "/" between levels, an index staying on its
    container; the root is named by its class; ModuleList is never called,
    so it gets no hooks."""
    model = Tiny()
    handle = loopscope.instrument(model)
    assert handle.names == ALL_NAMES
    assert len(handle) == 15 and handle.active and handle.mismatches == 0
    # each called module's call is wrapped, no hook anywhere: torch's fast path stays
    assert [m for m in model.modules() if wrapped(m)] == [
        m for m in model.modules() if m is not model.layers]
    assert hook_counts(model) == [(0, 0, 0, 0)] * len(list(model.modules()))
    assert "forward" not in vars(model.embed) and model.embed.forward.__func__ is Launch.forward
    assert vars(model.embed)["_call_impl"].site.name == "embed"
    assert repr(handle) == "<loopscope.InstrumentHandle Tiny: 15 modules, active, mismatches=0>"


def test_the_range_stack_is_exactly_the_module_tree(test_clock):
    """Each call is a range under its caller's range, prefixed by the step;
    host times are exact (one clock read per enter, exit and launch)."""
    model = Tiny()
    loopscope.instrument(model)
    prof = run_steps(model, 2)
    assert prof.capture.range_records() == expected_records(test_clock, 2)
    s = prof.summary()
    assert [st["host_ms"] for st in s["steps"]] == [0.041, 0.041]
    assert s["overhead"]["range_mismatches"] == 0
    assert s["overhead"]["ranges_left_open"] == 0
    assert s["overhead"]["instrument_mismatches"] == 0
    assert _instrument._local.stack == []


def test_depth_limits_nesting(test_clock):
    """depth=0: the root only; 1: its children too (ModuleList has no
    range); 2: the blocks; names beyond depth are refused."""
    model = Tiny()
    with loopscope.instrument(model, depth=0) as handle:
        assert handle.names == {"": "Tiny"}
    with loopscope.instrument(model, depth=1) as handle:
        assert handle.names == {"": "Tiny", "embed": "embed", "final": "final"}
    with loopscope.instrument(model, depth=2) as handle:
        assert list(handle.names) == ["", "embed", "layers.0", "layers.1", "final"]
        with loopscope.profile() as prof:
            with prof.step():
                model(torch.zeros(2))
    t = test_clock.at
    assert prof.capture.range_records() == [
        ("Step_0", -1, 0, t(1), t(22)),
        ("Step_0/Tiny", 0, None, t(2), t(21)),
        ("Step_0/embed", 1, None, t(3), t(5)),
        ("Step_0/layers.0", 1, None, t(6), t(11)),   # 4 launches inside, no ranges
        ("Step_0/layers.1", 1, None, t(12), t(17)),
        ("Step_0/final", 1, None, t(18), t(20)),
    ]
    with pytest.raises(ValueError, match=r"no module at 'layers.0.mlp' within depth 1;"):
        loopscope.instrument(model, depth=1, names={"layers.0.mlp": "MLP"})


def test_user_names_and_left_out_modules(test_clock):
    """names= renames by dotted path ("" is the root); None leaves a module
    out, its children stay in."""
    model = Tiny()
    names = {"": "Model", "layers.0": "Layer_0", "layers.0.norm": "Layer_0/LN",
             "layers.0.mlp": None, "layers.0.mlp.up": "Layer_0/MLP/Up"}
    handle = loopscope.instrument(model, names=names)
    assert "layers.0.mlp" not in handle.names
    assert handle.names["layers.0.mlp.up"] == "Layer_0/MLP/Up"
    assert handle.names["layers.0.mlp.act"] == "layers.0/mlp/act"  # not renamed: the default
    with loopscope.profile() as prof:
        with prof.step():
            model(torch.zeros(2))
    records = prof.capture.range_records()
    assert [(name, parent) for name, parent, *_ in records[:8]] == [
        ("Step_0", -1), ("Step_0/Model", 0), ("Step_0/embed", 1), ("Step_0/Layer_0", 1),
        ("Step_0/Layer_0/LN", 3), ("Step_0/Layer_0/MLP/Up", 3),     # under Layer_0: no mlp range
        ("Step_0/layers.0/mlp/act", 3), ("Step_0/layers.0/mlp/down", 3)]


def test_without_step_prefix_and_outside_steps(test_clock):
    """step_prefix=False names by path only; outside a step there is no
    prefix either; outside a profile the hooks drive NVTX only."""
    model = Tiny()
    with loopscope.instrument(model, depth=1, step_prefix=False):
        with loopscope.profile() as prof:
            with prof.step():
                model(torch.zeros(2))
    assert [r[0] for r in prof.capture.range_records()] == [
        "Step_0", "Tiny", "embed", "final"]
    with loopscope.instrument(model, depth=1):
        model(torch.zeros(2))  # no profile: NVTX only, nothing to check but no error
        with loopscope.profile() as prof:
            model(torch.zeros(2))
    assert [(r[0], r[1]) for r in prof.capture.range_records()] == [
        ("Tiny", -1), ("embed", 0), ("final", 0)]
    assert _instrument._local.stack == []


def test_step_label_is_per_thread(test_clock):
    """A thread with no step open gets unprefixed names even while the main
    thread's step is open; a thread's own step prefixes its ranges."""
    model = Tiny()
    loopscope.instrument(model, depth=0)
    seen = []

    def worker(prof):
        model(torch.zeros(2))
        with prof.step("Worker_{i}"):
            model(torch.zeros(2))
        seen.append(list(_instrument._local.stack))

    with loopscope.profile() as prof:
        with prof.step():
            thread = threading.Thread(target=worker, args=(prof,))
            thread.start()
            thread.join()
            model(torch.zeros(2))
    names = sorted(r[0] for r in prof.capture.range_records())
    assert names == ["Step_0", "Step_0/Tiny", "Tiny", "Worker_1", "Worker_1/Tiny"]
    assert seen == [[]]


# -- the summary from synthetic kernels --------------------------------------

def test_per_layer_gpu_times_add_up_to_the_step(test_clock):
    """Per-layer GPU busy times are exact and add up to the step's; the
    MLPs (up, act, down: 50 us) dominate the norms (5 us)."""
    model = Tiny()
    loopscope.instrument(model)
    s = run_steps(model, 2).summary()
    r = {e["name"]: e for e in s["ranges"]}
    assert [e["name"] for e in s["ranges"]] == list(ALL_NAMES.values())
    assert [st["gpu_ms"] for st in s["steps"]] == [0.118, 0.118]  # 3 + 2 * 55 + 5 us
    top = ["embed", "layers.0", "layers.1", "final"]
    assert [r[n]["gpu_ms"] for n in top] == [0.006, 0.11, 0.11, 0.01]
    assert round(sum(r[n]["gpu_ms"] for n in top), 6) == r["Tiny"]["gpu_ms"] == 0.236
    assert (r["layers.0/mlp"]["gpu_ms"], r["layers.0/norm"]["gpu_ms"]) == (0.1, 0.01)
    assert [r[f"layers.1/mlp/{n}"]["gpu_ms"] for n in ("up", "act", "down")] == [0.04, 0.02, 0.04]
    assert [(r[n]["count"], r[n]["kernels"]) for n in ("Tiny", "layers.0", "layers.0/mlp/up")] == [
        (2, 20), (2, 8), (2, 2)]
    assert (r["Tiny"]["host_ms"], r["layers.0"]["host_ms"], r["layers.0/mlp"]["host_ms"]) == (
        0.078, 0.03, 0.02)
    assert [(r[n]["parent"], r[n]["depth"]) for n in ("Tiny", "layers.1", "layers.1/mlp/act")] == [
        (None, 0), ("Tiny", 1), ("layers.1/mlp", 3)]
    assert all(e["step_prefixed"] for e in s["ranges"])


def test_per_layer_gap_figures(test_clock):
    """A layer owns the gaps ended by its kernels: 2 us inside a step, and
    the 100 us bubble before step 1 goes to embed (its first kernel)."""
    model = Tiny()
    loopscope.instrument(model)
    s = run_steps(model, 2).summary()
    r = {e["name"]: e for e in s["ranges"]}
    g = r["Tiny"]["gaps"]
    assert (g["count"], g["normal"], g["severe"], g["p50_us"], g["max_us"]) == (19, 18, 1, 2.0, 100.0)
    assert (r["embed"]["gaps"]["count"], r["embed"]["gaps"]["max_us"]) == (1, 100.0)
    assert (r["layers.0/mlp/up"]["gaps"]["count"], r["layers.0/mlp/up"]["gaps"]["idle_ms"]) == (2, 0.004)


def test_report_prints_the_layer_tree(test_clock):
    """The report draws the layers under the model with totals."""
    model = Tiny()
    loopscope.instrument(model)
    report = run_steps(model, 2).report()
    tree = report[report.index("Ranges (totals over 2 steps"):].split("\n\n")[0].splitlines()
    assert len(tree) == 16
    assert [" ".join(line.split()) for line in tree[1:8]] == [
        "Tiny x2 host 0.078 ms GPU 0.236 ms kernels 20",
        "├─ embed x2 host 0.004 ms GPU 0.006 ms kernels 2",
        "├─ layers.0 x2 host 0.030 ms GPU 0.110 ms kernels 8",
        "│ ├─ layers.0/norm x2 host 0.004 ms GPU 0.010 ms kernels 2",
        "│ └─ layers.0/mlp x2 host 0.020 ms GPU 0.100 ms kernels 6",
        "│ ├─ layers.0/mlp/up x2 host 0.004 ms GPU 0.040 ms kernels 2",
        "│ ├─ layers.0/mlp/act x2 host 0.004 ms GPU 0.020 ms kernels 2",
    ]
    assert tree[-1].split() == ["└─", "final", "x2", "host", "0.004", "ms", "GPU", "0.010", "ms",
                                "kernels", "2"]


# -- removal ------------------------------------------------------------------

def test_remove_takes_every_hook_off_and_twice_is_harmless(test_clock):
    """remove() leaves the user's own hooks; a second remove() does nothing;
    with-block removal; every module's __dict__ (keys, order, the very
    objects) and hook dicts are exactly as before; no ranges afterwards."""
    model = Tiny()
    model.embed.register_forward_hook(lambda m, a, o: None)
    model.final.forward = model.final.forward  # a user's own `forward` entry stays as it is
    before, state = hook_counts(model), module_state(model)
    handle = loopscope.instrument(model, backward=True)
    assert hook_counts(model) != before and module_state(model) != state
    assert vars(model.final)["forward"].__self__ is model.final  # forward itself untouched
    handle.remove()
    assert hook_counts(model) == before and not handle.active
    assert module_state(model) == state
    handle.remove()
    assert hook_counts(model) == before and module_state(model) == state
    assert repr(handle).endswith("removed, mismatches=0>")
    with pytest.raises(KeyError):
        with loopscope.instrument(model):
            raise KeyError("out of the block")
    assert hook_counts(model) == before and module_state(model) == state
    with loopscope.profile() as prof:
        with prof.step():
            model(torch.zeros(2))
    assert [r[0] for r in prof.capture.range_records()] == ["Step_0"]


def test_remove_leaves_a_call_the_user_replaced_since():
    """A module whose _call_impl entry its owner replaced after instrument()
    keeps the owner's on remove(); the others are restored."""
    model = Tiny()
    state = module_state(model)
    handle = loopscope.instrument(model)

    def theirs(*args, **kwargs):
        return type(model.final)._call_impl(model.final, *args, **kwargs)

    vars(model.final)["_call_impl"] = theirs
    handle.remove()
    assert vars(model.final)["_call_impl"] is theirs
    del vars(model.final)["_call_impl"]
    assert module_state(model) == state


def test_copies_and_pickles_of_an_instrumented_module_are_plain(tmp_path):
    """copy.deepcopy and pickle of an instrumented module give torch's plain
    call (no range, no loopscope object inside); the original stays
    instrumented."""
    import copy
    import pickle

    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    with loopscope.instrument(model):
        twin = copy.deepcopy(model)
        clone = pickle.loads(pickle.dumps(model))
        assert wrapped(model) and wrapped(model[0])
        for other in (twin, clone):
            for m in other.modules():
                entry = vars(m).get("_call_impl")
                assert not isinstance(entry, _core.CallRange)
                assert entry is None or entry.__self__ is m  # torch's own, bound to the copy
            x = torch.ones(1, 2)
            assert torch.equal(other(x), model(x))
            with loopscope.profile() as prof:
                other(x)
            assert prof.capture.range_records() == []


def test_an_instrumented_model_dropped_without_remove_is_freed_at_once():
    """The wrappers hold their module weakly: no reference cycle, so a model
    dropped while instrumented (its GPU memory with it) goes as soon as the
    last reference does, not at some later cyclic collection."""
    import gc
    import weakref

    model = Tiny()
    handle = loopscope.instrument(model, backward=True)
    gone = weakref.ref(model)
    leaf = weakref.ref(model.layers[1].mlp.down)
    gc.disable()
    try:
        del model  # the handle, kept, does not keep the model either
        assert gone() is None and leaf() is None
        assert handle.active
        handle.remove()  # harmless once the modules are gone
        assert not handle.active
    finally:
        gc.enable()


def test_instrumenting_twice_is_refused_until_removed():
    """The same module, or a part of an instrumented tree, cannot be
    instrumented again until the first handle is removed."""
    model = Tiny()
    handle = loopscope.instrument(model)
    with pytest.raises(RuntimeError, match=r"Tiny is already instrumented \(it has a loopscope range\)"):
        loopscope.instrument(model)
    with pytest.raises(RuntimeError, match="Block is already instrumented"):
        loopscope.instrument(model.layers[0])
    handle.remove()
    with loopscope.instrument(model.layers[0]) as inner:
        with pytest.raises(RuntimeError, match=r"its submodule 'layers.0' has a loopscope range"):
            loopscope.instrument(model)
    assert inner.names["mlp.up"] == "mlp/up"


@pytest.mark.parametrize("bad, message", [
    ([1, 2], "takes a torch.nn.Module, not builtins.list"),
    (None, "takes a torch.nn.Module, not builtins.NoneType"),
    (nn.Linear, "takes a torch.nn.Module, not builtins.type"),
    (lambda x: x, "takes a torch.nn.Module, not builtins.function"),
])
def test_non_modules_are_refused(bad, message):
    with pytest.raises(TypeError, match=message):
        loopscope.instrument(bad)


def test_torchscript_modules_take_no_hooks():
    """A scripted root is refused with the way out; a scripted submodule is
    left out (its work counts for the enclosing range)."""
    scripted = torch.jit.script(nn.Sequential(nn.Linear(2, 2)))
    with pytest.raises(TypeError, match="cannot hook a TorchScript module"):
        loopscope.instrument(scripted)
    model = nn.Sequential(nn.Linear(2, 2), scripted)
    with loopscope.instrument(model) as handle:
        assert handle.names == {"": "Sequential", "0": "0"}
        model(torch.zeros(2))


def test_bad_depth_and_names_are_refused():
    model = Tiny()
    with pytest.raises(ValueError, match="depth must be None or an int >= 0, got -1"):
        loopscope.instrument(model, depth=-1)
    for depth in ("2", 1.5, True):
        with pytest.raises(TypeError, match="depth must be None or an int >= 0"):
            loopscope.instrument(model, depth=depth)
    with pytest.raises(TypeError, match="names must be a mapping"):
        loopscope.instrument(model, names=[("embed", "E")])
    with pytest.raises(TypeError, match=r"names\['embed'\] must be a non-empty str"):
        loopscope.instrument(model, names={"embed": ""})
    with pytest.raises(TypeError, match="keys are dotted module paths"):
        loopscope.instrument(model, names={1: "x"})
    with pytest.raises(ValueError, match=r"no module at 'layers.0/mlp', 'nope'; paths are dotted"):
        loopscope.instrument(model, names={"nope": "x", "layers.0/mlp": "x"})
    assert hook_counts(model) == [(0, 0, 0, 0)] * len(list(model.modules()))


# -- exceptions and nesting mismatches ---------------------------------------

def test_exception_in_forward_closes_its_ranges(test_clock):
    """A forward that raises closes every range it opened (post hooks run
    with always_call), where the exception passed; the next step is
    recorded normally."""
    model = Tiny()
    model.layers[1].mlp.act.fail = ValueError
    loopscope.instrument(model)
    t = test_clock.at
    with loopscope.profile() as prof:
        with pytest.raises(ValueError, match="planted"):
            with prof.step():                     # reads 1..36
                model(torch.zeros(2))
        model.layers[1].mlp.act.fail = None
        with prof.step():                         # reads 37..78
            model(torch.zeros(2))
    records = prof.capture.range_records()
    assert records[2:14] == expected_records(test_clock, 1)[2:9] + [
        ("Step_0/layers.1", 1, None, t(22), t(34)),
        ("Step_0/layers.1/norm", 9, None, t(23), t(25)),
        ("Step_0/layers.1/mlp", 9, None, t(26), t(33)),
        ("Step_0/layers.1/mlp/up", 11, None, t(27), t(29)),
        ("Step_0/layers.1/mlp/act", 11, None, t(30), t(32)),  # launch at 31, then the raise
    ]
    assert records[0][4] == t(36) and records[1][4] == t(35)  # the step and Tiny
    assert records[14:] == expected_records(test_clock, 1, first_read=37, first_step=1,
                                            first_index=14)
    s = prof.summary()
    assert s["overhead"]["ranges_left_open"] == 0
    assert s["overhead"]["range_mismatches"] == 0
    assert s["overhead"]["instrument_mismatches"] == 0
    assert _instrument._local.stack == []


def test_keyboard_interrupt_ranges_are_closed_at_the_step_end(test_clock):
    """A BaseException skips torch's post hooks: the four hook ranges left
    open are closed when the step ends and counted as mismatches; the next
    step nests exactly as usual."""
    model = Tiny()
    model.layers[1].mlp.act.fail = KeyboardInterrupt
    handle = loopscope.instrument(model)
    t = test_clock.at
    with loopscope.profile() as prof:
        with pytest.raises(KeyboardInterrupt):
            with prof.step():                     # reads 1..36
                model(torch.zeros(2))
        model.layers[1].mlp.act.fail = None
        with prof.step():
            model(torch.zeros(2))
    records = prof.capture.range_records()
    # closed at the step's end, innermost first: act 32, mlp 33, layers.1 34, Tiny 35
    assert [(r[0], r[4]) for r in records[:14] if r[4] >= t(32)] == [
        ("Step_0", t(36)), ("Step_0/Tiny", t(35)), ("Step_0/layers.1", t(34)),
        ("Step_0/layers.1/mlp", t(33)), ("Step_0/layers.1/mlp/act", t(32))]
    assert records[14:] == expected_records(test_clock, 1, first_read=37, first_step=1,
                                            first_index=14)
    s = prof.summary()
    assert s["overhead"]["instrument_mismatches"] == 4 == handle.mismatches
    assert s["overhead"]["ranges_left_open"] == 0
    assert s["overhead"]["range_mismatches"] == 0
    assert "instrument" in prof.report() and "4 nesting mismatches" in prof.report()
    assert _instrument._local.stack == []


def test_instrumenting_inside_a_call_takes_effect_from_the_next_call(test_clock):
    """instrument() called inside the module's own call: the call under way
    has no range to close (no mismatch, nothing closed by mistake: the step
    keeps its range); the next call has its range."""
    handles = []

    class SelfInstrumenting(nn.Module):
        def forward(self, x):
            if not handles:
                handles.append(loopscope.instrument(self))
            return x

    model = SelfInstrumenting()
    model.register_forward_hook(lambda m, a, o: None)
    t = test_clock.at
    with loopscope.profile() as prof:
        with prof.step():                 # [t1, t2]: nothing to close
            model(torch.zeros(2))
        with prof.step():                 # [t3, t6]
            model(torch.zeros(2))         # [t4, t5]
    assert handles[0].mismatches == 0
    assert prof.capture.range_records() == [
        ("Step_0", -1, 0, t(1), t(2)),
        ("Step_1", -1, 1, t(3), t(6)),
        ("Step_1/SelfInstrumenting", 1, None, t(4), t(5)),
    ]
    s = prof.summary()
    assert (s["overhead"]["instrument_mismatches"], s["overhead"]["range_mismatches"]) == (0, 0)


def test_a_raising_pre_hook_of_the_user_still_closes_the_range(test_clock):
    """loopscope's pre hook runs first (prepend) and its post hook always: a
    user pre hook that raises leaves no range open."""
    model = Tiny()
    loopscope.instrument(model, depth=0)

    def refuse(module, args):
        raise RuntimeError("user hook")

    model.register_forward_pre_hook(refuse)
    t = test_clock.at
    with loopscope.profile() as prof:
        with prof.step():
            with pytest.raises(RuntimeError, match="user hook"):
                model(torch.zeros(2))
    assert prof.capture.range_records() == [
        ("Step_0", -1, 0, t(1), t(4)), ("Step_0/Tiny", 0, None, t(2), t(3))]
    assert _instrument._local.stack == []


# -- backward -----------------------------------------------------------------

class Grad(nn.Module):
    """Two linear layers; backward ranges nest when the inputs need grad."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        return self.b(self.a(x))


def test_backward_ranges(test_clock):
    """backward=True: "<name>.backward" ranges on the thread that runs the
    backward (the caller's, on CPU), prefixed by the step, nested as the
    modules are; aggregated under their parent."""
    model = Grad()
    handle = loopscope.instrument(model, backward=True)
    x = torch.randn(2, 4, requires_grad=True)
    with loopscope.profile() as prof:
        with prof.step():
            model(x).sum().backward()
    records = [(name, parent) for name, parent, *_ in prof.capture.range_records()]
    assert records == [
        ("Step_0", -1), ("Step_0/Grad", 0), ("Step_0/a", 1), ("Step_0/b", 1),
        ("Step_0/Grad.backward", 0), ("Step_0/b.backward", 4), ("Step_0/a.backward", 4)]
    tree = [(r["name"], r["parent"], r["depth"]) for r in prof.summary()["ranges"]]
    assert tree[3:] == [("Grad.backward", None, 0), ("b.backward", "Grad.backward", 1),
                        ("a.backward", "Grad.backward", 1)]
    assert handle.mismatches == 0 and _instrument._local.stack == []
    assert x.grad is not None and x.grad.shape == (2, 4)


def test_no_backward_hooks_unless_asked():
    model = Grad()
    with loopscope.instrument(model):
        assert [(len(m._backward_pre_hooks), len(m._backward_hooks)) for m in model.modules()] == [
            (0, 0)] * 3


# -- torch.compile --------------------------------------------------------------

def test_compiled_instrumented_module_has_no_graph_break():
    """Hooks inside a compiled region skip themselves while Dynamo traces:
    no graph break, the same result, and no ranges from inside."""
    import torch._dynamo

    torch._dynamo.reset()
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8))
    x = torch.randn(2, 8)
    expected = model(x)
    with loopscope.instrument(model) as handle:
        explained = torch._dynamo.explain(model)(x)
        assert (explained.graph_count, explained.graph_break_count) == (1, 0)
        compiled = torch.compile(model, backend="eager")
        with loopscope.profile() as prof:
            with prof.step():
                out = compiled(x)
        assert torch.allclose(out, expected)
    assert [r[0] for r in prof.capture.range_records()] == ["Step_0"]
    assert handle.mismatches == 0 and _instrument._local.stack == []


class Chain(nn.Module):
    """A user model (its forward is not in torch's files, unlike Sequential)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.inner = nn.Sequential(nn.GELU(), nn.Linear(8, 8))

    def forward(self, x):
        return self.inner(self.a(x)) + x


@pytest.mark.parametrize("make", [Chain, lambda: nn.Sequential(nn.Linear(8, 8), nn.GELU())],
                         ids=["user_model", "torch_sequential"])
def test_compile_counts_one_graph_through_the_wrapped_calls(make):
    """torch.compile over an instrumented model, counted by a backend that
    records each graph Dynamo hands it: one graph holding every op, no
    graph break, the eager result; a second call reuses it."""
    import torch._dynamo

    torch._dynamo.reset()
    model = make()
    x = torch.randn(2, 8)
    expected = model(x)
    graphs: list[int] = []

    def counting_backend(gm, example_inputs):
        graphs.append(sum(1 for n in gm.graph.nodes if n.op == "call_function"
                          or n.op == "call_module"))
        return gm.forward

    with loopscope.instrument(model):
        compiled = torch.compile(model, backend=counting_backend)
        assert torch.allclose(compiled(x), expected)
        assert torch.allclose(compiled(x), expected)
    ops = 4 if isinstance(model, Chain) else 2  # linear, gelu, linear, add / linear, gelu
    assert graphs == [ops]


def test_instrumenting_the_compiled_module_ranges_its_boundary(test_clock):
    """instrument(torch.compile(m)): one range per call of the compiled
    module; the modules inside are not hooked."""
    import torch._dynamo

    torch._dynamo.reset()
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8))
    compiled = torch.compile(model, backend="eager")
    handle = loopscope.instrument(compiled)
    assert handle.names == {"": "Sequential[compiled]"}
    assert all(not m._forward_pre_hooks for m in model.modules())
    t = test_clock.at
    with loopscope.profile() as prof:
        with prof.step():
            compiled(torch.randn(2, 8))
            compiled(torch.randn(2, 8))
    assert prof.capture.range_records() == [
        ("Step_0", -1, 0, t(1), t(6)),
        ("Step_0/Sequential[compiled]", 0, None, t(2), t(3)),
        ("Step_0/Sequential[compiled]", 0, None, t(4), t(5))]
    handle.remove()


def test_inductor_compiles_an_instrumented_module():
    """The default backend (Inductor, C++ on CPU) compiles an instrumented
    module and gives the eager result.  Skipped only where Inductor finds no
    C++ compiler (asked the way Inductor asks, before compiling); any other
    error fails the test."""
    import torch._dynamo
    from torch._inductor import cpp_builder, exc

    try:
        cpp_builder.get_cpp_compiler()
    except exc.InvalidCxxCompiler as error:
        pytest.skip(f"no C++ compiler for Inductor on this machine: {error}")
    torch._dynamo.reset()
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8))
    x = torch.randn(2, 8)
    with loopscope.instrument(model):
        compiled = torch.compile(model)
        out = compiled(x)
        assert torch.allclose(out, model(x), atol=1e-6)


def test_demo_command_takes_layers(capsys):
    """`python -m loopscope demo --layers` is accepted; without a GPU it says so."""
    if torch.cuda.is_available():
        pytest.skip("with a GPU the demo runs for real (see tests/gpu)")
    from loopscope.__main__ import main

    assert main(["demo", "--layers"]) == 0
    assert "no GPU here" in capsys.readouterr().err
