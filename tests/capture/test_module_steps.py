"""profile(steps=module): each top-level call of the module is a step that
lasts until its next top-level call (or the profile's end), so a decode
loop with no step markers (generate()) gets one step per forward, each
with the syncs of its forward and of the host work after it.

The module is a real torch.nn.Module on the CPU; its GPU work and syncs are
injected (the syncs through the real switchboard from the module's own
Python lines)."""
from __future__ import annotations

import functools
import itertools
import sys

import pytest

import loopscope
from loopscope import _testhooks

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
    assert s["module_steps"] == {"calls": TOKENS, "skipped": 0, "errors": []}
    # a step lasts until the next call begins; the last until the profile's end
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
