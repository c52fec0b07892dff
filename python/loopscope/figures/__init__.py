"""The summary's figures and the judgements over them, from the analysed
model (the C core's Model): sync sites (_syncs), the verdict (_diagnosis;
every verdict with its action, colour and docs row declared in _verdicts),
what removing each cause would win (_projections), CUDA-graph readiness
(_readiness), the summary's self-checks (_checks), budgets (_budgets) and
the cross-rank figures of a torch.distributed job (_ranks); with what they
share: row dicts built in C (_rows), finite floats (_finite) and names as
a person reads them (_names).  Nothing here draws or prints a view.

Floor 2 (tests/house/test_import_graph.py): may import files/, _core and
_version."""
