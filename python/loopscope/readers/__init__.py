"""Traces a user already has, read into the same C analysis as a live
profile: what kind a file is (_sniff), torch.profiler / Kineto JSON
(_kineto) and Nsight Systems SQLite (_nsys) into records, a saved recording
back into a FinishedProfile (_replay), `loopscope.analyze()` / `load()` over one
file (_analyze) and over a folder or list of per-rank traces (_job).  Each
format is registered once (files/_formats), the built-in ones in _builtin,
imported here so that every use of a reader finds them registered.

Floor 6 (tests/house/test_import_graph.py): above the model and the session (a
trace read becomes a FinishedProfile, built by its constructor); may import them and every
floor below them."""
from . import _builtin  # noqa: F401  (registers the built-in formats)
