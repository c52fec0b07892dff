"""`loopscope.watch()`, always on for long jobs: the watch and its steps
(_watch), the rows and breach rules (_rules), the dump folders (_dumps).
A composition of the public machinery below it: light and full profiles
(_profile), the budgets (figures/_budgets), the views and files a Profile
writes.

Floor "watching" (tests/house/test_import_graph.py): above the model and
the session ("top"), which it drives; may import every floor below;
imported by surfaces/ (`loopscope run --watch`) and the doors."""
