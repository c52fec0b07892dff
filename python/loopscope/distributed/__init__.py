"""torch.distributed: at a profile's exit every rank hands rank 0 its
compact summary (_distributed), and the ranks' table, skew and straggler
become report lines, HTML and trace events (_ranks_view).  The cross-rank
figures themselves are figures/_ranks.py: the verdict and the budgets read
them too.

Floor 3 (tests/house/test_import_graph.py): may import figures/, files/, _core
and _version."""
