"""Counters by what the chip offers: the single-pass choice of PM metrics, on
the metric sets recorded per chip from CUPTI's own host API
(tests/data/chips/metric_sets.json, README there names each source).

The choice (csrc/common/ls_metric_choice.c over the product's order of
importance) is reached through a test hook with the recorded table as its
oracle. The expected set is found here independently, by brute force over
every recorded single-pass set: the one whose importance vector is greatest.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopscope import _testhooks

DATA = json.loads((Path(__file__).resolve().parents[1] / "data/chips/metric_sets.json").read_text())
METRICS = DATA["metrics"]  # the table order of the recorded masks
SM, DRAM, GR, READ, WRITE, ISSUE, OCC, PCIE_R, PCIE_W, TENSOR = METRICS
# loopscope's order of importance, as the issue asks: the tensor pipe before
# issue rate, occupancy and PCIe (a lesser metric is dropped first)
IMPORTANCE = [SM, DRAM, GR, READ, WRITE, TENSOR, ISSUE, OCC, PCIE_R, PCIE_W]
REQUIRED = {SM, DRAM}
CHIPS = {c["spec"]: c for c in DATA["chips"]}


def mask_of(names) -> int:
    return sum(1 << METRICS.index(n) for n in names)


def oracle(chip, asked: list | None = None):
    def fits(names: list[str]) -> int:
        if asked is not None:
            asked.append(list(names))
        # only sets holding the required two were recorded: a subset of a
        # single-pass set is single-pass, so ask with them added
        passes = chip["passes"].get(str(mask_of(set(names) | REQUIRED)))
        return -1 if passes is None or passes < 1 else int(passes == 1)
    return fits


def known(chip) -> list[str]:
    return [m for m, k in zip(METRICS, chip["known"]) if k]


def best_by_brute_force(chip) -> list[str]:
    single = [int(m) for m, p in chip["passes"].items() if p == 1]
    def importance(mask: int) -> list[int]:
        return [mask >> METRICS.index(n) & 1 for n in IMPORTANCE]
    best = max(single, key=importance)
    return [n for n in IMPORTANCE if best >> METRICS.index(n) & 1]


@pytest.mark.parametrize("spec", sorted(CHIPS))
def test_each_chip_gets_its_most_important_single_pass_set(spec):
    chip = CHIPS[spec]
    chosen = _testhooks._choose_metrics(known(chip), oracle(chip))
    assert chosen == best_by_brute_force(chip)
    assert chip["passes"][str(mask_of(chosen))] == 1
    assert REQUIRED <= set(chosen)


@pytest.mark.parametrize("spec", sorted(CHIPS))
def test_the_tensor_pipe_is_kept_wherever_the_chip_has_it(spec):
    chip = CHIPS[spec]
    assert TENSOR in known(chip)  # every recorded chip has it (Ampere to Blackwell)
    assert TENSOR in _testhooks._choose_metrics(known(chip), oracle(chip))


def test_the_h200_drops_only_warp_occupancy_as_its_live_profile_did():
    # the live H200 profile of 2026-11-29 00:23Z (benchmarks/stacks/stacks.sh) reported
    # "left out to fit one pass: sm__warps_active..." and tensor activity measured
    chip = CHIPS["device:0"]
    chosen = _testhooks._choose_metrics(known(chip), oracle(chip))
    assert set(METRICS) - set(chosen) == {OCC}


def test_a_lesser_metric_goes_before_a_more_important_one():
    # on the H200 all ten need two passes, and so do the nine without the tensor
    # pipe's neighbour in importance order: dropping from the end of the table (the
    # old rule) would have lost the tensor pipe, the last row of ls_metrics.h
    chip = CHIPS["device:0"]
    assert chip["passes"][str(mask_of(METRICS))] > 1
    assert chip["passes"][str(mask_of(set(METRICS) - {TENSOR}))] == 1
    assert chip["passes"][str(mask_of(set(METRICS) - {OCC}))] == 1


def test_names_the_chip_lacks_are_never_kept_nor_asked():
    chip = CHIPS["GB202"]  # Blackwell RTX 50: no dram__bytes_read/write.sum
    lacks = set(METRICS) - set(known(chip))
    assert lacks == {READ, WRITE}
    asked: list = []
    chosen = _testhooks._choose_metrics(known(chip), oracle(chip, asked))
    assert not lacks & set(chosen)
    assert not any(lacks & set(a) for a in asked)


def test_a_set_that_fits_whole_costs_one_question():
    asked: list = []
    everything = _testhooks._choose_metrics(METRICS, lambda names: asked.append(names) or 1)
    assert asked == [IMPORTANCE] and everything == IMPORTANCE


def test_an_oracle_that_cannot_tell_stops_the_choice():
    with pytest.raises(RuntimeError, match="could not tell"):
        _testhooks._choose_metrics(METRICS, lambda names: -1)
    calls: list = []

    def fails_later(names):
        calls.append(names)
        return 0 if len(calls) == 1 else -1
    with pytest.raises(RuntimeError):
        _testhooks._choose_metrics(METRICS, fails_later)
    assert len(calls) == 2


def test_an_oracle_that_raises_raises_through():
    def boom(names):
        raise ValueError("oracle broke")
    with pytest.raises(ValueError, match="oracle broke"):
        _testhooks._choose_metrics(METRICS, boom)
