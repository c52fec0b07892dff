"""The sync resolver's source cache (_syncs._Sources): the node at a frame's
position is the one a walk of the whole syntax tree gives, each file is
parsed once per version of its text, and a changed file is never answered
from its old tree."""
from __future__ import annotations

import ast
import linecache
import os
import sysconfig

import pytest

from loopscope.figures import _syncs
from loopscope.figures._syncs import Frame, _Sources

# Decorators (a def's own line is not its first), nested f-strings with
# format specs (Python 3.11 places their parts oddly), lambdas,
# comprehensions, truth tests, class bodies, multi-line expressions.
TRICKY = '''\
import functools


def deco(*args):
    return lambda f: f


@deco(1,
      2)
@functools.lru_cache(maxsize=None)
def decorated(t, width=3):
    if t and not t.flag:
        return f"{t:{width}d} {t!r:>{width + 1}}"
    values = [v.item() for v in t if v]
    return sorted(values, key=lambda v: (v.cpu(),
                                         v.tolist()))


class Holder:
    @staticmethod
    @deco(f"{1:{2}}")
    def method(x):
        while x:
            x = x.next
        return {k: v for k, v in x.items() if k} or (x
                                                     and x.item())
'''


def whole_walk(tree):
    """Every node by position (line, col, end line, end col) with its parent,
    the last in ast.walk's order winning: the plain walk of every node."""
    index = {}
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            position = (getattr(child, "lineno", None), getattr(child, "col_offset", None),
                        getattr(child, "end_lineno", None), getattr(child, "end_col_offset", None))
            if position[0] is not None:
                index[position] = (child, parent)
    return index


def _texts():
    stdlib = sysconfig.get_paths()["stdlib"]
    yield "tricky", TRICKY
    for name in ("ast.py", "argparse.py", "dataclasses.py"):
        path = os.path.join(stdlib, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                yield name, f.read()


@pytest.mark.parametrize("name, text", list(_texts()), ids=lambda v: v if len(v) < 40 else "")
def test_the_node_at_each_position_is_the_whole_walks(name, text):
    tree = ast.parse(text)
    index = whole_walk(tree)
    assert len(index) > 20
    for position, (node, parent) in index.items():
        got = _syncs._node_at(tree, position)
        assert got[0] is node and got[1] is parent, (name, position)
    # a position no node has: nothing
    assert _syncs._node_at(tree, (1, 999, 1, 1000)) == (None, None)


@pytest.fixture
def source(tmp_path, monkeypatch):
    """A source file of this test, with the cache emptied and ast.parse counted."""
    monkeypatch.setattr(_syncs, "_tree_cache", {})
    parses = []
    real_parse = ast.parse
    monkeypatch.setattr(_syncs.ast, "parse", lambda text: parses.append(text) or real_parse(text))
    path = tmp_path / "site.py"
    yield path, parses
    linecache.checkcache(str(path))


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    stat = path.stat()  # a new mtime, so linecache.checkcache sees a new version
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    linecache.checkcache(str(path))


def _frame(path, line, col, end_col):
    return Frame(str(path), "f", 1, line, line, col, end_col)


def test_a_file_is_parsed_once_while_its_text_is_unchanged(source):
    path, parses = source
    _write(path, "def f(t):\n    if t:\n        return t.item()\n")
    frame = _frame(path, 3, 15, 23)  # t.item()
    node, _ = _Sources().node_at(frame)
    again, _ = _Sources().node_at(frame)  # another summary's resolver
    assert isinstance(node, ast.Call) and again is node
    assert len(parses) == 1
    # read again from disk, the same text: the same tree, no new parse
    _write(path, "def f(t):\n    if t:\n        return t.item()\n")
    assert _Sources().node_at(frame)[0] is node
    assert len(parses) == 1


def test_a_changed_file_is_parsed_again(source):
    """Two versions of one file in one process: the second profile's sites
    read the new text, never the old tree."""
    path, parses = source
    _write(path, "def f(t):\n    if t:\n        return t.item()\n")
    first, _ = _Sources().node_at(_frame(path, 3, 15, 23))
    assert isinstance(first, ast.Call) and first.func.attr == "item"
    _write(path, "def f(t):\n    if t:\n        return t.cpu_()\n")
    second, _ = _Sources().node_at(_frame(path, 3, 15, 23))
    assert isinstance(second, ast.Call) and second.func.attr == "cpu_"
    assert len(parses) == 2
    # and a resolver's site follows the new text too
    site = _syncs.Resolver()._resolve({"frames": [tuple(_frame(path, 3, 15, 23).__dict__.values())],
                                       "wait_class": "stream"})
    assert (site.code, site.call) == ("return t.cpu_()", "t.cpu_()")


def test_a_file_that_does_not_parse_has_no_node(source):
    path, parses = source
    _write(path, "def f(t:\n    return t.item()\n")
    assert _Sources().node_at(_frame(path, 2, 11, 19)) == (None, None)
    assert _Sources().node_at(_frame(path, 2, 11, 19)) == (None, None)
    assert len(parses) == 1


def test_the_cache_holds_at_most_its_size(source, tmp_path):
    _, parses = source
    count = _syncs._TREE_CACHE_SIZE + 1
    for i in range(count):
        path = tmp_path / f"m{i}.py"
        _write(path, f"x = {i}\n")
        _Sources().node_at(_frame(path, 1, 0, 1))
        linecache.checkcache(str(path))
    assert len(_syncs._tree_cache) == _syncs._TREE_CACHE_SIZE
    assert str(tmp_path / "m0.py") not in _syncs._tree_cache  # the oldest went first
    assert len(parses) == count
