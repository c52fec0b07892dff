"""Row dicts that share one key table (loopscope._rows), and _core._dicts
with a template: the same plain dicts, in less memory."""
from __future__ import annotations

import json
import platform
import sys

import pytest

from loopscope import _core, _rows

KEYS = ("index", "name", "host_ms", "gpu_ms", "gaps", "verdict", "samples", "fill_pct",
        "comm_ms", "compute_ms", "graph_readiness", "kernels", "memcpys", "syncs",
        "sm_active_pct", "dram_pct", "gr_active_pct", "fill_known_pct", "gpu_span_ms",
        "sm_active_busy_pct", "dram_busy_pct", "warp_occupancy_busy_pct")


def test_a_template_equals_its_values_in_their_order():
    values = {key: i for i, key in enumerate(KEYS)}
    template = _rows.template(values)
    assert type(template) is dict
    assert template == values and list(template) == list(KEYS)
    assert _rows.template({"b": 1, "a": 2}) == {"b": 1, "a": 2}
    assert list(_rows.template({"b": 1, "a": 2})) == ["b", "a"]


def test_rows_are_the_zipped_columns_each_its_own_dict():
    columns = [[f"{key}{row}" if row % 3 else None for row in range(50)] for key in KEYS]
    want = [dict(zip(KEYS, values)) for values in zip(*columns)]
    shared = _rows.dicts(KEYS, columns)
    assert shared == want
    assert all(type(row) is dict and list(row) == list(KEYS) for row in shared)
    assert json.dumps(shared) == json.dumps(want)
    # each row its own: a change to one (a new key too) leaves the others
    shared[4]["index"] = "changed"
    shared[5]["extra"] = 1
    assert shared[3] == want[3] and shared[6] == want[6] and "extra" not in shared[4]
    with pytest.raises(TypeError):
        _core._dicts(KEYS, columns, ["not", "a", "dict"])


@pytest.mark.skipif(platform.python_implementation() != "CPython",
                    reason="key-sharing dicts are CPython's")
def test_rows_from_a_template_share_their_keys():
    """The point of it: a copy of the template holds only its values."""
    template = _rows.template(dict.fromkeys(KEYS))
    row = template.copy()
    row["index"], row["name"] = 7, "Step_7"
    assert sys.getsizeof(row) < sys.getsizeof(dict(row)) / 2
