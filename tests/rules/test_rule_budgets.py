"""A failed sync budget lists the five most costly sync sites and says how
many more there are: the pytest plugin and the CLI show this text."""
from __future__ import annotations

import loopscope
from loopscope.figures._budgets import evaluate, format_site

from fakes import c_callable


def test_a_failed_sync_budget_lists_five_sites_and_counts_the_rest():
    """Seven sites, site i blocking (i + 1) us: the five longest are listed,
    longest first, then '... 2 more sites'."""
    waits = [c_callable([("cudaDeviceSynchronize", 1_000 * (i + 1))]) for i in range(7)]
    with loopscope.profile() as prof:  # one line, seven calls: seven sites
        waits[0](), waits[1](), waits[2](), waits[3](), waits[4](), waits[5](), waits[6]()
    s = prof.summary()
    sites = s["syncs"]["sites"]
    assert [x["blocked_ms"] for x in sites] == [(7 - i) / 1_000 for i in range(7)]
    lines = evaluate(s, {"max_syncs": 0.0}).message().splitlines()
    at = lines.index("Top sync sites:")
    shown, more = 5, len(sites) - 5
    assert lines[at + 1:at + 1 + shown] == ["  " + format_site(x) for x in sites[:shown]]
    assert lines[at + 1 + shown] == f"  ... {more} more sites"
