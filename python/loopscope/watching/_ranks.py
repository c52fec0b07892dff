"""`loopscope.watch(all_ranks=True)`: under torch.distributed, one rank's
breach arms every rank's full profile for the same steps.

Through the job's c10d store, never a collective.  A collective in the
default process group would be a sync every time it runs, and it blocks
for good (or until the group's timeout, 30 min by default) when a rank
never reaches it: a rank that ended its loop, or one that steps a
different number of times; worse, it would pair with the job's own
collectives.  The store answers at once whatever the other ranks do.

Arms are slots "arm/0", "arm/1", ... under "loopscope/watch/<n>" (n counts
this process's watches that joined a job, so the ranks' n-th watches
share keys).  A slot holds one arm as JSON: {start, steps, rank, step,
rules, source}.  A rank publishes an arm into the first free slot
(compare_set on a missing key: two ranks publishing at once take two
slots).  Every rank reads the slots in order, one store round trip per
`check_steps` steps (when its next step's index is a multiple of it), and
accepts an arm unless it starts within the last arm it accepted: every
rank reads the same slots in the same order by the same rule, so every
rank accepts the same arms and the ranks' n-th gathered profiles (matched
by order, distributed/_distributed.py) are the same steps.

The steps: a rank whose next step is n publishes start = (n // K + 2) x K
(K = check_steps), a multiple of K at least K + 1 steps ahead.  A rank
reads the slot at its first check after the publication; a rank whose next
step then is m checks next at (m // K + 1) x K, so it sees the arm in time
when m // K <= n // K + 1: ranks up to K steps ahead of the publisher (and
every rank behind it) profile the same steps.  A rank further ahead starts
at once, late (counted; the gathered profiles then cover different step
indices).  The publisher itself waits for the same start.

A rank that leaves its watch adds 1 to "left": a rank that starts a shared
profile while another has left runs it ungathered (gathering would wait a
timeout for a rank that never comes)."""
from __future__ import annotations

import json
from typing import Any

from ..distributed import _distributed

SLOTS_TRIED = 64  # a publisher racing this many others for slots gives up (said, no arm)


def arm_start(next_step: int, check_steps: int) -> int:
    """The first step of an arm published when the next step is next_step:
    a multiple of check_steps, at least check_steps + 1 steps ahead."""
    return (next_step // check_steps + 2) * check_steps


class RankArms:
    """One watch's part in arming the ranks (see the module's text).  Every
    method may raise what the store raises; the watch turns that off."""

    def __init__(self, store: Any, rank: int, world_size: int, check_steps: int) -> None:
        self.store = store
        self.rank = rank
        self.world_size = world_size
        self.check_steps = check_steps
        self.seen = 0                # slots read
        self.last_end = -1           # the last step of the last arm accepted
        self.queued: list[dict[str, Any]] = []   # accepted, not started
        self.own_unread = 0          # arms this rank published and has not read back
        self.counts = {"checks": 0, "published": 0, "accepted": 0, "merged": 0, "late": 0}

    def due(self, next_step: int) -> bool:
        """True when a rank whose next step is next_step reads the slots."""
        return next_step % self.check_steps == 0

    def busy(self) -> bool:
        """An arm of this rank's or an accepted one is on its way: a breach
        now goes into its dump."""
        return bool(self.queued) or self.own_unread > 0

    def publish(self, next_step: int, steps: int, step: int, rules: list[str],
                source: str) -> dict[str, Any]:
        """Publishes an arm of `steps` steps for step `step`'s breach; returns it."""
        arm = {"start": arm_start(next_step, self.check_steps), "steps": steps,
               "rank": self.rank, "step": step, "rules": rules, "source": source}
        value = json.dumps(arm).encode()
        for slot in range(self.seen, self.seen + SLOTS_TRIED):
            if self.store.compare_set(f"arm/{slot}", "", value) == value:
                self.counts["published"] += 1
                self.own_unread += 1
                return arm
        raise RuntimeError(f"no free arm slot in {SLOTS_TRIED} tries")

    def poll(self, next_step: int) -> list[dict[str, Any]]:
        """Reads the slots published since the last poll; returns each with
        "accepted" (bool) and, when accepted, "late" (its start already
        passed: it starts at next_step instead)."""
        self.counts["checks"] += 1
        read = []
        while self.store.check([f"arm/{self.seen}"]):
            arm = json.loads(self.store.get(f"arm/{self.seen}").decode())
            self.seen += 1
            if arm["rank"] == self.rank:
                self.own_unread = max(0, self.own_unread - 1)
            arm["accepted"] = arm["start"] > self.last_end
            if arm["accepted"]:
                self.last_end = arm["start"] + arm["steps"] - 1
                arm["late"] = arm["start"] < next_step
                self.counts["accepted"] += 1
                self.counts["late"] += arm["late"]
                self.queued.append(arm)
            else:
                self.counts["merged"] += 1
            read.append(arm)
        return read

    def someone_left(self) -> bool:
        """True when a rank has left its watch (one store round trip)."""
        return int(self.store.add("left", 0)) > 0

    def leave(self) -> None:
        self.store.add("left", 1)


NOT_INITIALISED = ("off: torch.distributed is not initialised (no default process group), so "
                   "each rank watches itself; the watch joins one initialised later")
_joined = 0  # watches of this process that joined a job: their store namespace


def join(check_steps: int) -> tuple[RankArms | None, str]:
    """This watch's RankArms when the process is a rank of an initialised
    torch.distributed job of several ranks, else None; and the status in
    words.  May raise what the store raises."""
    global _joined
    found = _distributed.detect()
    if found is None:
        return None, NOT_INITIALISED
    dist, rank, world, backend = found
    if world == 1:
        return None, "off: a world of one rank, no other rank to arm"
    store = _distributed.job_store(dist, f"{_distributed.PREFIX}/watch/{_joined}")
    _joined += 1
    return RankArms(store, rank, world, check_steps), \
        f"on: rank {rank} of {world} ({backend}), the store read every {check_steps} steps"
