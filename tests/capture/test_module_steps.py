"""profile(steps=module): each top-level call of the module is a step that
lasts until its next top-level call, its caller's return, or the profile's
end (the rules' tests are below), so a decode
loop with no step markers (generate()) gets one step per forward, each
with the syncs of its forward and of the host work after it.

The module is a real torch.nn.Module on the CPU; its GPU work and syncs are
injected (the syncs through the real switchboard from the module's own
Python lines)."""
from __future__ import annotations

import cProfile
import functools
import itertools
import sys
import time

import pytest

import loopscope
from loopscope import _testhooks
from loopscope.live import _module_steps

torch = pytest.importorskip("torch", reason="steps=module takes a torch.nn.Module")

TOKENS = 5


def here() -> int:
    return sys._getframe(1).f_lineno


def c_callable(calls):
    return functools.partial(next, map(_testhooks._inject_calls, itertools.repeat(calls)))


mask_check = c_callable([("cudaMemcpyAsync", 1_000, 0), ("cudaStreamSynchronize", 1_000)])
stop_check = c_callable([("cudaMemcpyAsync", 1_000, 0), ("cudaStreamSynchronize", 1_000)])
LINES = {}


class Block(torch.nn.Module):
    def forward(self, x):
        return x + 1


class Decoder(torch.nn.Module):
    """A forward with a submodule, a sync of its own, and (depth > 0) a call
    of itself: only the outermost call makes a step."""

    def __init__(self) -> None:
        super().__init__()
        self.block = Block()

    def forward(self, x, depth=0):
        LINES["mask"] = here() + 1
        mask_check()
        x = self.block(x)
        if depth:
            x = self(x, depth - 1)
        return x


def generate(model, tokens=TOKENS, depth=0):
    """A decode loop with no step markers: forward, then a stopping check."""
    x = torch.zeros(1)
    for _ in range(tokens):
        x = model(x, depth=depth)
        LINES["stop"] = here() + 1
        stop_check()
    return x


def hooks(module):
    return (dict(module._forward_pre_hooks), dict(module._forward_hooks),
            dict(module._forward_hooks_always_called), dict(module._forward_hooks_with_kwargs),
            dict(module._forward_pre_hooks_with_kwargs))


@pytest.mark.parametrize("depth", [0, 2])
def test_each_top_level_call_is_a_step_with_both_syncs(test_clock, depth):
    model = Decoder()
    model.register_forward_pre_hook(lambda module, args: None)  # the user's own, kept
    model.register_forward_hook(lambda module, args, out: None, always_call=True)
    before = hooks(model), hooks(model.block)
    with loopscope.profile(steps=model) as prof:
        generate(model, depth=depth)
    assert (hooks(model), hooks(model.block)) == before  # the module is restored exactly
    s = prof.summary()
    assert [st["name"] for st in s["steps"]] == [f"Step_{i}" for i in range(TOKENS)]
    # each forward syncs depth + 1 times (its own calls), then the stopping check once
    assert [st["syncs"] for st in s["steps"]] == [depth + 2] * TOKENS
    sites = {site["line"]: site for site in s["syncs"]["sites"]}
    assert set(sites) == {LINES["mask"], LINES["stop"]}
    assert sites[LINES["stop"]]["steps"] == sites[LINES["mask"]]["steps"] == list(range(TOKENS))
    assert sites[LINES["stop"]]["count"] == TOKENS
    assert sites[LINES["mask"]]["count"] == TOKENS * (depth + 1)
    assert s["steps_from"] == "module"
    # Python 3.12+ sees generate()'s return and ends the last step there
    # (the tests below); before, it lasts to the end
    seen = sys.version_info >= (3, 12)
    assert s["module_steps"] == {
        "calls": TOKENS, "skipped": 0, "errors": [], "ended_by_return": int(seen),
        "ends": "caller_return" if seen else "next_call: Python < 3.12 has no sys.monitoring"}
    # a step lasts until the next call begins; the last until generate()
    # returns or the profile's end
    model_steps = prof.model.steps()
    for a, b in zip(model_steps, model_steps[1:]):
        assert a["end_ns"] <= b["start_ns"]
    assert model_steps[-1]["end_ns"] <= prof.capture.info()["stop_ns"]


def test_a_forward_that_raises_still_counts_down(test_clock):
    class Failing(torch.nn.Module):
        def forward(self, x, fail=False):
            if fail:
                raise ValueError("boom")
            return x

    model = Failing()
    with loopscope.profile(steps=model) as prof:
        model(torch.zeros(1))
        with pytest.raises(ValueError, match="boom"):
            model(torch.zeros(1), fail=True)
        model(torch.zeros(1))
    assert len(prof.summary()["steps"]) == 3
    assert prof.summary()["module_steps"]["calls"] == 3


def test_a_step_already_open_is_left_alone(test_clock):
    """The user's own prof.step() around the calls: the module's calls make
    no step (counted as skipped, with the reason), nothing breaks."""
    model = Decoder()
    with loopscope.profile(steps=model) as prof:
        with prof.step():
            model(torch.zeros(1))
            model(torch.zeros(1))
    s = prof.summary()
    assert [st["name"] for st in s["steps"]] == ["Step_0"]
    assert s["module_steps"]["calls"] == 2 and s["module_steps"]["skipped"] == 2
    assert s["module_steps"]["errors"]
    assert "steps=module: 2 of 2 calls made no step" in prof.report()


def test_the_users_step_inside_a_module_step_is_refused_naming_it(test_clock):
    """The module called outside the user's step, then the user's own
    prof.step(): the module's step is still open (its caller has not
    returned), so the user's is refused, and the error names the open step
    and steps=module (the user may not know the call made a step)."""
    model = Decoder()
    with loopscope.profile(steps=model) as prof:
        model(torch.zeros(1))
        with pytest.raises(RuntimeError) as raised:
            with prof.step("mine_{i}"):
                pass
        model(torch.zeros(1))
    message = str(raised.value)
    assert "step 'mine_{i}' started while step 'Step_0' is open" in message
    assert "steps do not nest" in message and "steps=module" in message
    assert [st["name"] for st in prof.summary()["steps"]] == ["Step_0", "Step_1"]


def test_calls_after_the_profile_make_no_step(test_clock):
    model = Block()
    with loopscope.profile(steps=model) as prof:
        model(torch.zeros(1))
    assert model(torch.zeros(1)) == 1  # the hooks are gone: nothing recorded, nothing raised
    assert hooks(model)[0] == {} and hooks(model)[1] == {}
    assert len(prof.summary()["steps"]) == 1


@pytest.mark.parametrize("bad", [object(), "model", 3])
def test_steps_must_be_a_module(bad):
    with pytest.raises(TypeError, match="steps must be a torch.nn.Module .each top-level call "
                                        "of it is a step., got"):
        loopscope.profile(steps=bad)


# -- where a step ends: the next call, or the caller's return ----------------
# A step ends at the module's next top-level call, or when the function that
# made the call returns, whichever comes first (the first frame outside
# torch's package; Python 3.12+'s sys.monitoring sees the return).  So the
# time after a decode loop (`generate()` returned, a server waiting for its
# next request) belongs to no step, and an idle spell never breaches a
# watch's budget.  Most tests run on every Python with a stand-in for
# sys.monitoring that the decode loop tells of its own return (the real
# event is what that stands in for); the last ones use the real one (3.12+).

N = 3
PY_RETURN = 1 << 1
AT = {}

# a C callable, so the sync's site is the Python line that calls it
one_sync = functools.partial(next, map(_testhooks._inject_calls, itertools.repeat(
    [("cudaMemcpyAsync", 1_000, 0), ("cudaStreamSynchronize", 1_000)])))


class FakeMonitoring:
    """The part of sys.monitoring that CallerReturns uses, with the tool ids
    `taken` held by another tool.  `returning()`, called by a function just
    before it returns, stands in for the PY_RETURN event."""

    class events:
        PY_RETURN = PY_RETURN

    def __init__(self, taken=()) -> None:
        self.tools = {t: "another tool" for t in taken}
        self.callbacks = {}
        self.local = {}
        self.returns = None

    def get_tool(self, tool):
        return self.tools.get(tool)

    def use_tool_id(self, tool, name):
        if tool in self.tools:
            raise ValueError(f"tool {tool} is already in use")
        self.tools[tool] = name

    def register_callback(self, tool, event, func):
        self.callbacks[(tool, event)] = func

    def set_local_events(self, tool, code, events):
        if events:
            self.local[(tool, code)] = events
        else:
            self.local.pop((tool, code), None)

    def free_tool_id(self, tool):
        del self.tools[tool]

    def returning(self) -> None:
        frame = sys._getframe(1)
        if any(code is frame.f_code and ev & PY_RETURN and self.callbacks.get((tool, PY_RETURN))
               for (tool, code), ev in self.local.items()):
            self.returns.returned(frame)


@pytest.fixture
def fake(monkeypatch):
    monitoring = FakeMonitoring()
    monitoring.returns = _module_steps.CallerReturns(monitoring)
    monkeypatch.setattr(_module_steps, "RETURNS", monitoring.returns)
    return monitoring


def decode(model, fake=None, tokens=N):
    """A decode loop: a forward, then a stopping check's sync, per token."""
    x = torch.zeros(1)
    for _ in range(tokens):
        x = model(x)
        AT["stop"] = here() + 1
        one_sync()
    if fake is not None:
        fake.returning()
    return x


def serve(model, fake, requests=2):
    """Requests one after another, with host work and a sync between them
    that belong to no step."""
    for _ in range(requests):
        decode(model, fake)
        AT["between"] = here() + 1
        one_sync()


def site_steps(summary, line):
    (site,) = [s for s in summary["syncs"]["sites"] if s["line"] == line]
    return site["steps"], site["count"]


def test_a_step_ends_when_its_caller_returns(test_clock, fake):
    model = Block()
    with loopscope.profile(steps=model) as prof:
        serve(model, fake)
    s = prof.summary()
    assert len(s["steps"]) == 2 * N
    assert s["module_steps"]["ends"] == "caller_return"
    assert s["module_steps"]["ended_by_return"] == 2
    # the stopping checks are in their steps; the syncs between requests in none
    assert site_steps(s, AT["stop"]) == (list(range(2 * N)), 2 * N)
    assert site_steps(s, AT["between"]) == ([], 2)
    steps = prof.model.steps()
    syncs = sorted(sync[0] for sync in prof.model.syncs())  # (start_ns, end_ns, ...)
    between = [t for t in syncs if not any(st["start_ns"] <= t <= st["end_ns"] for st in steps)]
    assert len(between) == 2
    assert steps[N - 1]["end_ns"] < between[0] < steps[N]["start_ns"]
    # only the decode loop's code was watched, and it is all given back
    assert fake.local == {} and fake.tools == {}
    assert _module_steps.RETURNS.listeners == ()


def test_a_return_from_another_frame_of_the_same_code_leaves_the_step_open(test_clock, fake):
    """A recursive call of the caller that returns while the outer frame's
    step is open: that step goes on until the outer frame returns."""
    model = Block()

    def loop(n, fake):
        if n:
            model(torch.zeros(1))
            loop(n - 1, fake)          # its return must not end the step opened above
            AT["after_inner"] = here() + 1
            one_sync()
        fake.returning()

    with loopscope.profile(steps=model) as prof:
        loop(1, fake)
        AT["outside"] = here() + 1
        one_sync()
    s = prof.summary()
    assert len(s["steps"]) == 1 and s["module_steps"]["ended_by_return"] == 1
    assert site_steps(s, AT["after_inner"]) == ([0], 1)
    assert site_steps(s, AT["outside"]) == ([], 1)


def test_torch_wrappers_are_looked_through(test_clock, fake):
    """The module called by a wrapper in torch (Sequential here, DDP or
    DataParallel alike): the caller is the user's function, so the step
    goes on after the wrapper's forward returns."""
    model = Block()
    wrapper = torch.nn.Sequential(model)

    def train(n, fake):
        for _ in range(n):
            wrapper(torch.zeros(1))
            AT["after_wrapper"] = here() + 1
            one_sync()
        fake.returning()

    with loopscope.profile(steps=model) as prof:
        train(2, fake)
    s = prof.summary()
    assert [code.co_name for (_, code) in fake.local] == []  # given back at the end
    assert site_steps(s, AT["after_wrapper"]) == ([0, 1], 2)
    assert s["module_steps"]["ended_by_return"] == 1


def test_the_watched_code_is_the_callers(test_clock, fake):
    model = Block()
    wrapper = torch.nn.Sequential(model)
    seen = []

    def train(fake):
        wrapper(torch.zeros(1))
        seen.extend(code.co_name for (_, code) in fake.local)
        fake.returning()

    with loopscope.profile(steps=model):
        train(fake)
    assert seen == ["train"]


def test_callers_at_other_depths_each_end_their_step(test_clock, fake):
    """The caller's depth is remembered from the last call: a call from
    another depth (through a wrapper, or directly again) finds its own
    caller, and each step ends at its own caller's return."""
    model = Block()
    wrapper = torch.nn.Sequential(model)

    def direct(fake):
        model(torch.zeros(1))
        fake.returning()

    def wrapped(fake):
        wrapper(torch.zeros(1))
        fake.returning()

    with loopscope.profile(steps=model) as prof:
        for call in (direct, wrapped, direct, direct):
            call(fake)
            AT["after_call"] = here() + 1
            one_sync()
    s = prof.summary()
    assert len(s["steps"]) == 4 and s["module_steps"]["ended_by_return"] == 4
    assert site_steps(s, AT["after_call"]) == ([], 4)


# -- a caller that returns into the next call's maker -------------------------
# transformers 5's generate() makes its first forward in a helper
# (`_prefill`) that returns into the decode loop (`_sample`), which then
# samples that token, runs its stopping check, and makes every later
# forward itself.  The helper's return must not end step 0 there: the
# loop's work on that token is step 0's.  A request handler that returns
# into a server loop looks the same when it returns; what tells them apart
# is who makes the next call: the function returned into (the decode loop),
# or another frame (the next request's handler), or none before that
# function returns.  So the step's end is marked at the helper's return
# and taken back only by a call from the function it returned into.

def prefill(model, fake):
    x = model(torch.zeros(1))
    if fake is not None:
        fake.returning()
    return x


def decode_after_prefill(model, fake=None, tokens=N):
    """generate() in transformers 5's shape: the first forward in a helper,
    each token's stopping check in the loop, the later forwards the loop's."""
    x = prefill(model, fake)
    for i in range(tokens):
        if i:
            x = model(x)
        AT["prefill_stop"] = here() + 1
        one_sync()
    if fake is not None:
        fake.returning()
    return x


def handle(model, fake):
    """A request handler: one forward, then back to the server loop."""
    x = model(torch.zeros(1))
    if fake is not None:
        fake.returning()
    return x


def test_a_helpers_first_forward_keeps_its_tokens_work(test_clock, fake):
    model = Block()
    with loopscope.profile(steps=model) as prof:
        decode_after_prefill(model, fake)
        AT["after_generate"] = here() + 1
        one_sync()
    s = prof.summary()
    assert len(s["steps"]) == N
    # every token's stopping check in its own step, step 0's included
    assert site_steps(s, AT["prefill_stop"]) == (list(range(N)), N)
    assert site_steps(s, AT["after_generate"]) == ([], 1)
    # the helper's return ended nothing; the decode loop's ended the last step
    assert s["module_steps"]["ended_by_return"] == 1
    assert fake.local == {} and fake.tools == {}


def test_a_handler_returning_into_a_server_loop_ends_its_step_there(test_clock, fake):
    """The same return, but the next call comes from the next request's
    handler: the step ended at the handler's return, so the server loop's
    work between requests (a sync here) is in no step."""
    model = Block()

    def server(requests, fake):
        for _ in range(requests):
            handle(model, fake)
            AT["between_requests"] = here() + 1
            one_sync()
        fake.returning()

    with loopscope.profile(steps=model) as prof:
        server(3, fake)
    s = prof.summary()
    assert len(s["steps"]) == 3
    assert site_steps(s, AT["between_requests"]) == ([], 3)
    assert s["module_steps"]["ended_by_return"] == 3
    steps = prof.model.steps()
    syncs = sorted(sync[0] for sync in prof.model.syncs())
    for step, sync in zip(steps, syncs):
        assert step["end_ns"] < sync  # ended at the return, before the loop's sync


def test_the_function_returned_into_returning_ends_the_step_at_the_first_return(test_clock, fake):
    model = Block()

    def once(fake):
        handle(model, fake)
        AT["after_handle"] = here() + 1
        one_sync()
        fake.returning()

    with loopscope.profile(steps=model) as prof:
        once(fake)
        AT["after_once"] = here() + 1
        one_sync()
    s = prof.summary()
    assert len(s["steps"]) == 1 and s["module_steps"]["ended_by_return"] == 1
    assert site_steps(s, AT["after_handle"]) == ([], 1)
    assert site_steps(s, AT["after_once"]) == ([], 1)


def test_a_held_step_ends_at_its_mark_when_the_profile_ends(test_clock, fake):
    """The handler returned into the profiled block itself, which makes no
    other call: the profile's end ends the step where the handler returned."""
    model = Block()
    with loopscope.profile(steps=model) as prof:
        handle(model, fake)
        AT["after_handle_in_block"] = here() + 1
        one_sync()
    s = prof.summary()
    assert len(s["steps"]) == 1 and s["module_steps"]["ended_by_return"] == 1
    assert site_steps(s, AT["after_handle_in_block"]) == ([], 1)
    (step,) = prof.model.steps()
    (sync,) = prof.model.syncs()
    assert step["end_ns"] < sync[0]


def test_a_marked_end_ends_the_step_and_a_mark_taken_back_does_not(test_clock):
    """The step's own calls: a mark is where its exit ends it; a mark taken
    back leaves it open (here to the profile's stop, as a step never exited)."""
    with loopscope.profile() as prof:
        kept = prof.step()
        kept.__enter__()
        assert kept._mark_end()
        AT["marked"] = here() + 1
        one_sync()
        kept.__exit__(None, None, None)
        taken_back = prof.step()
        taken_back.__enter__()
        assert taken_back._mark_end() and taken_back._unmark_end()
    taken_back.__exit__(None, None, None)  # after the profile: off this thread's stack
    assert not kept._mark_end()  # not open any more
    first, second = prof.model.steps()
    (sync,) = prof.model.syncs()
    assert first["end_ns"] < sync[0]
    assert second["end_ns"] == prof.capture.info()["stop_ns"]


def test_a_new_step_ends_a_marked_one_and_no_other(test_clock):
    """A step of the user's while a step's end is marked (held) opens: the
    held one ends at its mark and its own exit later closes nothing.  An
    open step not marked, or a marked one with a range open above it,
    still refuses it: steps do not nest."""
    with loopscope.profile() as prof:
        held = prof.step()
        held.__enter__()
        assert held._mark_end()
        AT["after_mark"] = here() + 1
        one_sync()
        with prof.step():
            pass
        assert not held._unmark_end()  # gone: a new step ended it
        held.__exit__(None, None, None)
        plain = prof.step()
        plain.__enter__()
        with pytest.raises(RuntimeError, match="steps do not nest"):
            prof.step().__enter__()
        plain.__exit__(None, None, None)
        covered = prof.step()
        covered.__enter__()
        assert covered._mark_end()
        with loopscope.range("above"):
            with pytest.raises(RuntimeError, match="steps do not nest"):
                prof.step().__enter__()
        covered.__exit__(None, None, None)
    s = prof.summary()
    assert s["overhead"]["range_mismatches"] == 0
    first, second, third, fourth = prof.model.steps()
    (sync,) = prof.model.syncs()
    assert first["end_ns"] < sync[0] < second["start_ns"]
    # the refused steps took no index
    assert [st["name"] for st in s["steps"]] == ["Step_0", "Step_1", "Step_2", "Step_3"]


def test_the_users_step_after_a_helper_returned_opens(test_clock, fake):
    """steps=model, a helper's forward, then the user's own prof.step() in
    the function it returned into, then that function's forward: the
    helper's step ended at its return, the user's step and the next
    forward's are steps of their own, and nothing is refused."""
    model = Block()

    def block(fake):
        handle(model, fake)
        AT["users_step"] = here() + 2
        with prof.step():
            one_sync()
        model(torch.zeros(1))
        fake.returning()

    with loopscope.profile(steps=model) as prof:
        block(fake)
    s = prof.summary()
    assert [st["name"] for st in s["steps"]] == ["Step_0", "Step_1", "Step_2"]
    assert site_steps(s, AT["users_step"]) == ([1], 1)
    assert s["module_steps"]["skipped"] == 0 and s["module_steps"]["ended_by_return"] == 2
    assert s["overhead"]["range_mismatches"] == 0


def test_a_watched_step_a_users_step_ended_keeps_its_host_time_to_the_mark(tmp_path, fake):
    model = Block()

    def block(w, fake):
        handle(model, fake)
        time.sleep(0.06)
        with w.step():
            pass
        model(torch.zeros(1))
        fake.returning()

    with loopscope.watch(dump_dir=tmp_path, steps=model, step_budget_ms=50, warmup_steps=0,
                         p99_factor=None, block_steps=2, min_dump_interval_s=0) as w:
        block(w, fake)
    # in step order, though the user's step 1 ended before step 0's exit
    assert [r["step"] for r in w.steps()] == [0, 1, 2]
    rows = {r["step"]: r for r in w.steps()}
    assert rows[0]["host_ms"] < 50 and not rows[0]["breach"]


def test_a_watched_handler_server_holds_no_idle_in_its_steps(tmp_path, fake):
    """A watched server whose handler makes one forward a request, 0.15 s
    apart (budget 50 ms): no step holds the wait, none breaches."""
    model = Block()
    with loopscope.watch(dump_dir=tmp_path, steps=model, step_budget_ms=50, warmup_steps=0,
                         p99_factor=None, block_steps=2) as w:
        for _ in range(3):
            handle(model, fake)
            time.sleep(0.15)
    rows = w.steps()
    assert len(rows) == 3 and [r["step"] for r in rows if r["breach"]] == []
    assert max(r["host_ms"] for r in rows) < 50
    assert w.summary()["module_steps"]["ended_by_return"] == 3


def test_a_watched_prefill_step_holds_its_tokens_work(tmp_path, fake):
    """The other side: step 0's token work after the helper returned (a 60
    ms stall here, budget 50 ms) is step 0's, so it breaches."""
    model = Block()

    def stalled(fake):
        prefill(model, fake)
        time.sleep(0.06)
        model(torch.zeros(1))
        fake.returning()

    with loopscope.watch(dump_dir=tmp_path, steps=model, step_budget_ms=50, warmup_steps=0,
                         p99_factor=None, block_steps=2, min_dump_interval_s=0) as w:
        stalled(fake)
    rows = w.steps()
    assert [r["step"] for r in rows] == [0, 1]
    assert rows[0]["host_ms"] >= 60 and rows[0]["breach"]
    assert not rows[1]["breach"]


def watched_from_the_first_call(tmp_path, body):
    """body() under a watch that gets its module (a Block) at the module's
    first call, through `run --watch-module`'s own global pre-hook."""
    from loopscope.surfaces._watch_cli import _FirstModule

    with loopscope.watch(dump_dir=tmp_path, block_steps=2) as w:
        finder = _FirstModule(w, "Block")
        try:
            body()
        finally:
            finder.remove()
    return w


def test_the_first_call_run_watch_module_finds_is_a_whole_step(tmp_path, fake):
    """`loopscope run --watch-module` hands the module over from a global
    pre-hook at its first call: loopscope's own frames there are not the
    caller, so step 0, as every step, lasts until decode() returns or the
    next call (it ended as the hook returned, before its forward ran)."""
    model = Block()
    seen = set()

    def loop(fake):
        decode(model, None)
        seen.update(code.co_name for (_, code) in fake.local)
        fake.returning()

    w = watched_from_the_first_call(tmp_path, lambda: loop(fake))
    assert seen == {"decode"}
    assert [r["syncs"] for r in w.steps()] == [1] * N


def test_taken_tool_ids_keep_steps_to_the_next_call(test_clock, monkeypatch):
    monitoring = FakeMonitoring(taken=(3, 4))
    monitoring.returns = _module_steps.CallerReturns(monitoring)
    monkeypatch.setattr(_module_steps, "RETURNS", monitoring.returns)
    model = Block()
    with loopscope.profile(steps=model) as prof:
        serve(model, monitoring)
    s = prof.summary()
    assert s["module_steps"]["ends"] == ("next_call: sys.monitoring tool ids 4, 3 are taken "
                                         "(another tool, another tool)")
    assert s["module_steps"]["ended_by_return"] == 0
    # the old rule: the sync after the first request is in its last step
    assert site_steps(s, AT["between"]) == ([N - 1, 2 * N - 1], 2)
    assert monitoring.tools == {3: "another tool", 4: "another tool"}


def test_the_rule_that_held_is_named_for_this_python(test_clock):
    model = Block()
    with loopscope.profile(steps=model) as prof:
        decode(model)
    ends = prof.summary()["module_steps"]["ends"]
    if sys.version_info >= (3, 12):
        assert ends == "caller_return"
    else:
        assert ends == "next_call: Python < 3.12 has no sys.monitoring"


def test_idle_between_calls_breaches_no_watch_budget(tmp_path, fake):
    """A server idle between requests (0.15 s, budget 50 ms): no step is
    over budget, as each request's last step ended with decode()."""
    model = Block()
    with loopscope.watch(dump_dir=tmp_path, steps=model, step_budget_ms=50, warmup_steps=0,
                         p99_factor=None, block_steps=2) as w:
        for _ in range(3):
            decode(model, fake)
            time.sleep(0.15)
    rows = w.steps()
    assert len(rows) == 3 * N
    assert [r["step"] for r in rows if r["breach"]] == []
    assert max(r["host_ms"] for r in rows) < 50
    assert w.summary()["breaches"] == 0
    assert w.summary()["module_steps"]["ends"] == "caller_return"
    assert w.summary()["module_steps"]["ended_by_return"] == 3
    assert not [n for n in w.summary()["notes"] if "next call" in n]


def test_idle_breaches_when_the_return_is_not_seen(tmp_path, monkeypatch):
    """The other side: with the return unseen (tool ids taken), each
    request's last step holds the idle time and breaches."""
    monitoring = FakeMonitoring(taken=(3, 4))
    monitoring.returns = _module_steps.CallerReturns(monitoring)
    monkeypatch.setattr(_module_steps, "RETURNS", monitoring.returns)
    model = Block()
    with loopscope.watch(dump_dir=tmp_path, steps=model, step_budget_ms=50, warmup_steps=0,
                         p99_factor=None, block_steps=2, min_dump_interval_s=0) as w:
        for _ in range(3):
            decode(model, monitoring)
            time.sleep(0.15)
    breached = [r["step"] for r in w.steps() if r["breach"]]
    assert N - 1 in breached and 2 * N - 1 in breached
    assert w.summary()["module_steps"]["ends"].startswith("next_call: sys.monitoring tool ids")
    # the notes say why the idle breached, naming the rule and the way out
    said = [n for n in w.summary()["notes"] if "next call" in n]
    assert len(said) == 1 and "sys.monitoring tool ids 4, 3 are taken" in said[0]
    assert "step_budget_ms" in said[0] and "w.step()" in said[0]


def test_no_step_end_note_without_a_host_time_rule(tmp_path, monkeypatch):
    """Without a budget or the p99 rule nothing judges a step's host time:
    the next-call rule then needs no note."""
    monitoring = FakeMonitoring(taken=(3, 4))
    monitoring.returns = _module_steps.CallerReturns(monitoring)
    monkeypatch.setattr(_module_steps, "RETURNS", monitoring.returns)
    model = Block()
    with loopscope.watch(dump_dir=tmp_path, steps=model, p99_factor=None, block_steps=2) as w:
        decode(model, monitoring)
    assert w.summary()["module_steps"]["ends"].startswith("next_call")
    assert not [n for n in w.summary()["notes"] if "next call" in n]


real = pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is Python 3.12+")


@real
@pytest.mark.parametrize("under_cprofile", [False, True])
def test_the_real_return_event_ends_the_step(test_clock, under_cprofile):
    """sys.monitoring itself, alone and beside cProfile (which takes
    PROFILER_ID, 2): each request's last step ends with decode(), and the
    tool id is given back."""
    model = Block()
    profiler = cProfile.Profile()
    if under_cprofile:
        profiler.enable()
    try:
        with loopscope.profile(steps=model) as prof:
            serve(model, None)
    finally:
        if under_cprofile:
            profiler.disable()
    s = prof.summary()
    assert s["module_steps"]["ends"] == "caller_return"
    assert s["module_steps"]["ended_by_return"] == 2
    assert site_steps(s, AT["between"]) == ([], 2)
    assert site_steps(s, AT["stop"]) == (list(range(2 * N)), 2 * N)
    assert all(sys.monitoring.get_tool(t) != _module_steps._TOOL_NAME for t in range(6))
    # the code object is no longer instrumented for the tool
    assert all(sys.monitoring.get_local_events(t, decode.__code__) == 0 for t in (3, 4))


@real
def test_the_real_return_event_keeps_run_watch_modules_first_step_whole(tmp_path):
    model = Block()
    w = watched_from_the_first_call(tmp_path, lambda: decode(model))
    assert [r["syncs"] for r in w.steps()] == [1] * N
    assert w.summary()["module_steps"]["ended_by_return"] == 1


@real
def test_the_real_return_event_spares_a_watched_server_its_idle(tmp_path):
    model = Block()
    with loopscope.watch(dump_dir=tmp_path, steps=model, step_budget_ms=50, warmup_steps=0,
                         p99_factor=None, block_steps=2) as w:
        for _ in range(3):
            decode(model)
            time.sleep(0.15)
    assert len(w.steps()) == 3 * N
    assert [r["step"] for r in w.steps() if r["breach"]] == []


@real
def test_the_real_return_event_keeps_a_prefill_helpers_token_work(test_clock):
    model = Block()
    with loopscope.profile(steps=model) as prof:
        decode_after_prefill(model)
        AT["after_generate"] = here() + 1
        one_sync()
    s = prof.summary()
    assert site_steps(s, AT["prefill_stop"]) == (list(range(N)), N)
    assert site_steps(s, AT["after_generate"]) == ([], 1)
    assert s["module_steps"]["ended_by_return"] == 1


@real
def test_the_real_return_event_ends_a_handlers_step_at_its_return(test_clock):
    model = Block()

    def server(requests):
        for _ in range(requests):
            handle(model, None)
            AT["between_requests"] = here() + 1
            one_sync()

    with loopscope.profile(steps=model) as prof:
        server(3)
    s = prof.summary()
    assert site_steps(s, AT["between_requests"]) == ([], 3)
    assert s["module_steps"]["ended_by_return"] == 3


@real
@pytest.mark.parametrize("torch_outside", [True, False])
def test_the_real_return_event_beside_torch_profilers_python_tracer(test_clock, torch_outside):
    """torch.profiler with with_stack=True (its Python tracer) around the
    profile, or inside it: both see what they see alone (torch its ops,
    loopscope each caller's return and the prefill helper's step taken
    back), and no sys.monitoring tool id is left claimed."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    model = Block()

    def requests_then_generate():
        for _ in range(3):
            handle(model, None)
        decode_after_prefill(model)

    def torch_profiled():
        return torch_profile(activities=[ProfilerActivity.CPU], with_stack=True)

    if torch_outside:
        with torch_profiled() as tp, loopscope.profile(steps=model) as prof:
            requests_then_generate()
    else:
        with loopscope.profile(steps=model) as prof, torch_profiled() as tp:
            requests_then_generate()
    s = prof.summary()
    assert len(s["steps"]) == 3 + N
    # three handlers' returns and decode_after_prefill's; _prefill's was taken back
    assert s["module_steps"]["ended_by_return"] == 4
    assert site_steps(s, AT["prefill_stop"]) == (list(range(3, 3 + N)), N)
    assert any(e.key == "aten::add" for e in tp.key_averages())  # Block's x + 1
    assert all(sys.monitoring.get_tool(t) is None for t in (3, 4))
