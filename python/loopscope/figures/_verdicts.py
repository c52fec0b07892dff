"""Every verdict loopscope gives, each declared once with all that is said
about it: its name, the function of _diagnosis whose rule gives it, its
next action, its colour in the notebook view, its row of docs/reference.md
and the projection kinds (_projections) that say what removing its cause
would win.  The rules read the action here, the views the colour, the docs
check the anchor, and the tests all of it (tests/house/test_reference_page.py).

A declaration without a colour, an action or an anchor cannot be made
(TypeError or ValueError at import), and a view asked for a verdict not
declared here raises instead of drawing it grey: adding a verdict is one
entry below, a rule that returns it and a row of docs/reference.md."""
from __future__ import annotations

import re
from dataclasses import dataclass

DOCS_PAGE = "reference.md"  # under docs/: one table row per verdict
_COLOUR = re.compile(r"#[0-9a-f]{6}")


@dataclass(frozen=True)
class VerdictKind:
    name: str
    rule: str                     # the function of figures/_diagnosis.py that returns it
    action: str                   # the next action; diagnose() may refine it with figures
    colour: str                   # the views' accent, "#rrggbb"
    anchor: str                   # its row's <a id> on docs/DOCS_PAGE
    projections: tuple[str, ...]  # projection kinds that price its cause; () for none

    def __post_init__(self) -> None:
        if not _COLOUR.fullmatch(self.colour or ""):
            raise ValueError(f"verdict {self.name}: colour {self.colour!r} is not #rrggbb")
        for field in ("name", "rule", "action", "anchor"):
            if not getattr(self, field):
                raise ValueError(f"verdict {self.name}: no {field}")


def _declare(*kinds: VerdictKind) -> dict[str, VerdictKind]:
    """The declarations by name; a name declared twice is refused."""
    out: dict[str, VerdictKind] = {}
    for kind in kinds:
        if kind.name in out:
            raise ValueError(f"verdict {kind.name} is declared twice")
        out[kind.name] = kind
    return out


_ORANGE, _RED, _VIOLET, _GREEN, _GREY = "#d9822b", "#c23030", "#7157d9", "#0f9960", "#5c7080"
_BLUE = "#137cbd"  # a set-up, not a bottleneck: none of the bottlenecks' colours

VERDICTS = _declare(
    VerdictKind(
        "CPU_LAUNCH_BOUND", "traced_verdicts",
        "capture the step in a CUDA graph (torch.cuda.CUDAGraph, or torch.compile("
        "mode='reduce-overhead')) or fuse small kernels, so the GPU stops waiting for Python",
        _ORANGE, "cpu_launch_bound", ("launch_gaps", "replay_gaps")),
    VerdictKind(
        "SYNC_BOUND", "traced_verdicts",
        "remove the host-device syncs inside the loop (.item(), print(tensor), .cpu())",
        _RED, "sync_bound", ("sync_site",)),
    VerdictKind(
        "MEMORY_BOUND", "_counter_verdict",
        "move fewer bytes: compress the weights (bf16 -> fp8/int8/int4), fuse elementwise ops "
        "so intermediates stay on chip, and keep hot weights resident in L2 (persisting L2 "
        "access policy window) where an MLP's weights fit",
        _VIOLET, "memory_bound", ("memory_bound",)),
    VerdictKind(
        "COMPUTE_BOUND", "_counter_verdict",
        "the SMs are saturated: use tensor cores at lower precision (bf16/fp8, "
        "torch.backends.cuda.matmul.allow_tf32), avoid recomputation, or do fewer steps",
        _GREEN, "compute_bound", ()),
    VerdictKind(
        "GPU_BOUND", "traced_verdicts",
        "the GPU is the bottleneck: profile kernels (ncu) to tell compute from memory bound",
        _GREEN, "gpu_bound", ()),
    VerdictKind(
        "BALANCED", "traced_verdicts",
        "no single bottleneck: look at the worst gaps and the longest kernels",
        _GREY, "balanced", ()),
    VerdictKind(
        "NO_GPU_WORK", "traced_verdicts",
        "no kernel, memcpy or memset ran inside the profile",
        _GREY, "no_gpu_work", ()),
    VerdictKind(
        "UNKNOWN", "_diagnose",
        "run on a machine with an NVIDIA GPU and CUPTI to get a verdict",
        _GREY, "unknown", ()),
    VerdictKind(
        "COMMUNICATION_WAIT", "diagnose_ranks",
        "make the slowest rank arrive sooner at the collectives (its cause is named above)",
        _ORANGE, "communication_wait", ()),
    VerdictKind(
        "GRAPH_CAPTURE", "capture_verdicts",
        "this profile recorded a CUDA-graph capture, not the loop: profile the loop of graph "
        "replays that runs after it (start the profiler once warm-up and capture are done, e.g. "
        "torch.profiler's schedule(wait=, warmup=)); the capture's own time is a one-time set-up "
        "that no replay pays again",
        _BLUE, "graph_capture", ()),
    VerdictKind(
        "UNDER_FILLED", "traced_verdicts",
        "the kernels are too small to fill the GPU: give each launch more work (a larger "
        "batch, several steps or requests at once), fuse small kernels (torch.compile), or run "
        "independent work on parallel CUDA streams",
        _ORANGE, "under_filled", ()),
)


def verdict_kind(name: str) -> VerdictKind:
    """The declaration of `name`; LookupError for a verdict not declared."""
    try:
        return VERDICTS[name]
    except KeyError:
        raise LookupError(f"verdict {name!r} is not declared in figures/_verdicts.py") from None
