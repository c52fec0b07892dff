"""Where a person meets loopscope outside Python code: the command line
(`loopscope run`, `diff` and the demo's no-GPU path in _cli; `analyze` in
_analyze_cli; `merge` in _merge_cli) and before/after comparison
(`loopscope.compare`, `loopscope diff`: _compare).  The pytest plugin is
loopscope.pytest_plugin, at the top: pytest's entry point names it.

Floor 7 (tests/house/test_import_graph.py): may import every floor below; only
the package's doors (loopscope/__init__.py, __main__.py, pytest_plugin.py)
import it."""
