"""The summary as text: verdict first, then the figures that back it, like a
compiler lists errors."""
from __future__ import annotations

from typing import Any

from ..figures._checks import MIN_COVERAGE_PCT, failed as failed_checks, warning_lines
from ..figures._names import clip, kernel_name

from ..distributed._ranks_view import head_lines as rank_head_lines, table_lines as rank_table_lines
from ..figures._readiness import first_line
from ..figures._syncs import format_site
from ._trace_info import trace_lines

MAX_SYNC_SITES = 10
MAX_PROJECTIONS = 5
MAX_KERNEL_ROWS = 8
MAX_BLOCKED_LINES = 4

MAX_STEP_ROWS = 24
MAX_RANGE_ROWS = 40
NAME_WIDTH = 44
HEAVIEST_HIDDEN = 5


class Said:
    """The summary's reasons for a missing section (gpu_error, syncs_error,
    metrics_error) given once each (issue 41, item 6): line(text, place)
    gives `text` back and notes `place` for each reason it gives; a later
    line that would end in a reason already given refers to its place
    instead ("SM/DRAM: see the WARNING (coverage) line above")."""

    def __init__(self, summary: dict[str, Any]) -> None:
        self.reasons = [r for r in dict.fromkeys(summary.get(key) for key in (
            "gpu_error", "syncs_error", "metrics_error")) if isinstance(r, str) and r]
        self.where: dict[str, str] = {}

    def line(self, text: str, place: str) -> str:
        for reason in self.reasons:
            if reason in self.where and text.endswith(reason) and text != reason:
                head = text[: -len(reason)].rstrip().rstrip(":")
                return f"{head}: see {self.where[reason]}"
        for reason in self.reasons:
            if reason in text:
                self.where.setdefault(reason, place)
        return text


def missing_sections(summary: dict[str, Any]) -> str:
    """The sections that gpu_error leaves out, for its one line."""
    gpu_error = summary.get("gpu_error")
    names = ["GPU time line"]
    if summary.get("syncs") is None and summary.get("syncs_error") == gpu_error:
        names.append("syncs")
    if summary.get("sm") is None and summary.get("metrics_error") == gpu_error:
        names.append("SM/DRAM")
    return ", ".join(names)


def _fmt(value: Any, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def describe_recording(summary: dict[str, Any]) -> str | None:
    """One plain line saying that a summary comes from a recording, or None."""
    rec = summary.get("recording")
    if not rec:
        return None
    what = f"`{rec['command']}`" if rec.get("command") else "a loopscope profile"
    device = rec.get("device") or "an unnamed device"
    return (f"RECORDING: this report analyses the records of {what}, made on {device} "
            f"on {rec['date']} with loopscope {rec['loopscope']}; nothing ran on a GPU now.")


def short_text(summary: dict[str, Any]) -> str:
    """The summary in one line (its IPython text form)."""
    d = summary["diagnosis"]
    gaps = summary["gaps"]
    text = f"<loopscope summary: {d['verdict']}, {len(summary['steps'])} steps"
    if gaps is not None:
        text += f", GPU busy {_fmt(gaps['busy_pct'], '.1f')}%, {gaps['severe']} severe gaps"
    bad = [c.get("name") for c in failed_checks(summary)]
    if bad:  # the one line must not hide a figure the summary cannot vouch for
        text += f", WARNING: check{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad))} failed"
    return text + "; a dict: summary['gaps'], ['syncs'], ['steps'], ... >"


def gap_stats_text(gaps: dict[str, Any]) -> str:
    """p50, p99 and max of a gaps dict, or "no gap statistics" where it has
    no gap (they are None there)."""
    if not gaps["count"]:
        return "no gap statistics"
    return (f"p50 {gaps['p50_us']:.2f} us, p99 {gaps['p99_us']:.2f} us, "
            f"max {gaps['max_us']:.2f} us")


def _verdict_line(summary: dict[str, Any]) -> str:
    d = summary["diagnosis"]
    verdict = d["verdict"].replace("_", " ")
    gaps = summary["gaps"]
    if gaps is None:
        return f"{verdict}: {d['reasons'][0]}"
    detail = (
        f"GPU busy {_fmt(gaps['busy_pct'], '.1f')}%, {gaps['severe']} severe gaps "
        f"(> {gaps['thresholds_us'][1]:g} us), "
        + (f"mean gap {gaps['mean_us']:.1f} us" if gaps["count"] else "no gap")
    )
    return f"{verdict}: {detail}; {d['actions'][0]}"


def _steps_table(steps: list[dict[str, Any]]) -> list[str]:
    head = f"{'step':>5} {'name':<18} {'host ms':>9} {'GPU ms':>9} {'busy%':>6} {'kernels':>7} " \
           f"{'gaps':>5} {'severe':>6} {'max gap us':>10} {'syncs':>5}  verdict"
    lines = [head]
    shown = steps if len(steps) <= MAX_STEP_ROWS else steps[: MAX_STEP_ROWS - 4] + steps[-4:]
    for i, s in enumerate(shown):
        if len(steps) > MAX_STEP_ROWS and i == MAX_STEP_ROWS - 4:
            lines.append(f"{'...':>5} ({len(steps) - MAX_STEP_ROWS} more steps)")
        g = s["gaps"] or {}
        lines.append(
            f"{s['index']:>5} {clip(s['name'], 18):<18} {_fmt(s['host_ms']):>9} {_fmt(s['gpu_ms']):>9} "
            f"{_fmt(g.get('busy_pct'), '.1f'):>6} {_fmt(s['kernels'], 'd'):>7} "
            f"{_fmt(g.get('count'), 'd'):>5} {_fmt(g.get('severe'), 'd'):>6} "
            f"{_fmt(g.get('max_us'), '.1f'):>10} {_fmt(s['syncs'], 'd'):>5}  {s['verdict'] or '-'}"
        )
    return lines


def _projection_lines(summary: dict[str, Any]) -> list[str]:
    """What removing each cause would win, right under the verdict."""
    projections = summary["diagnosis"].get("projections") or []
    if not projections:
        return []
    worth = [p for p in projections if p.get("notable", True)]  # a win, not a 1.00x
    little = len(projections) - len(worth)
    lines = ["What it would win:"]
    lines += [f"  * {p['text']}" for p in worth[:MAX_PROJECTIONS]]
    if len(worth) > MAX_PROJECTIONS:
        lines.append(f"  ... {len(worth) - MAX_PROJECTIONS} more in "
                     "summary['diagnosis']['projections']")
    if little:
        lines.append(f"  {'nothing notable: ' if not worth else ''}{little} "
                     f"{'change' if little == 1 else 'changes'} would win little "
                     "(summary['diagnosis']['projections'])")
    return lines


def _kernel_lines(summary: dict[str, Any]) -> list[str]:
    kernels = summary.get("top_kernels") or []
    if not kernels:
        return []
    gpu = summary.get("gpu") or {}
    fill = gpu.get("fill_pct")
    head = "Kernels by time" + (f" (their grids could fill {fill:.1f}% of the GPU, time-weighted)"
                                if fill is not None else "") + ":"
    shown = kernels[:MAX_KERNEL_ROWS]
    # launch shapes unknown for every row (a trace or recording without
    # them): no columns of dashes
    shaped = any(k.get("grid") or k["fill_pct"] is not None for k in shown)
    if not shaped:
        head = head[:-1] + " (launch shapes not recorded, so no grid or fill):"
    columns = f"  {'time':>12} {'share':>6} {'calls':<7} "
    columns += f"{'grid x block':<22} {'fill':>4}  kernel" if shaped else "kernel"
    lines = ["", head, columns]
    for k in shown:
        row = f"  {_fmt(k['total_ms']):>9} ms {_fmt(k['share_pct'], '.1f'):>5}% x{k['count']:<6} "
        if shaped:
            shape = ("x".join(map(str, k["grid"])) + " x " + "x".join(map(str, k["block"]))
                     if k.get("grid") else "-")
            fill = "-" if k["fill_pct"] is None else f"{k['fill_pct']:.0f}%"
            row += f"{shape:<22} {fill:>4}  "
        lines.append(row + clip(kernel_name(k["name"]) or "?", 60))
    return lines


def _readiness_lines(summary: dict[str, Any]) -> list[str]:
    r = summary.get("graph_readiness")
    if not r:
        return []
    parts = [f"{r['capturable']} of {r['steps']} steps can be captured as they are"]
    if r["replaying_graphs"]:
        parts.append(f"{r['replaying_graphs']} already replay a CUDA graph")
    if r["blocked"]:
        by = ", ".join(f"{k.replace('_', ' ')} {n}" for k, n in r["steps_blocked_by"].items() if n)
        parts.append(f"{r['blocked']} blocked ({by})")
    lines = ["", "CUDA graph readiness: " + "; ".join(parts)]
    seen: set[str] = set()
    for step in summary["steps"]:
        g = step.get("graph_readiness")
        if not g or g["status"] != "blocked":
            continue
        key = "; ".join(b["text"] for b in g["blockers"])
        if key in seen:
            continue
        seen.add(key)
        if len(seen) > MAX_BLOCKED_LINES:
            lines.append("  ... more blocked steps in summary['steps'][i]['graph_readiness']")
            break
        lines.append(f"  {first_line(step['name'], g)}")
    return lines


def _sync_lines(summary: dict[str, Any]) -> list[str]:
    syncs = summary.get("syncs")
    if syncs is None:
        return []
    lines = ["", f"Syncs: {syncs['count']} host-device syncs, host blocked {syncs['blocked_ms']:.3f} ms"
                 f" ({syncs['in_steps']} inside steps, {syncs['outside_steps']} outside)"]
    for site in syncs["sites"][:MAX_SYNC_SITES]:
        lines.append(f"  {format_site(site)}")
    if len(syncs["sites"]) > MAX_SYNC_SITES:
        lines.append(f"  ... {len(syncs['sites']) - MAX_SYNC_SITES} more sites in summary['syncs']['sites']")
    return lines


def _shown_ranges(ranges: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The ranges worth a line: whole levels from the top while they fit in
    MAX_RANGE_ROWS; if even the top level does not, its heaviest ones."""
    by_depth: dict[int, int] = {}
    for r in ranges:
        by_depth[r["depth"]] = by_depth.get(r["depth"], 0) + 1
    shown, deepest = 0, -1
    for depth in sorted(by_depth):
        if shown + by_depth[depth] > MAX_RANGE_ROWS:
            break
        shown += by_depth[depth]
        deepest = depth
    weight = "gpu_ms" if ranges[0]["gpu_ms"] is not None else "host_ms"
    if deepest >= 0:
        kept = [r for r in ranges if r["depth"] <= deepest]
        hidden = sorted((r for r in ranges if r["depth"] > deepest), key=lambda r: -r[weight])
        if not hidden:
            return kept, ""
        heaviest = ", ".join(f"{r['name']} {r[weight]:.3f}" for r in hidden[:HEAVIEST_HIDDEN])
        unit = "GPU ms" if weight == "gpu_ms" else "host ms"
        return kept, (f"  ({len(hidden)} deeper ranges not shown: depth > {deepest}; "
                      f"heaviest, {unit}: {heaviest})")
    top = sorted((r for r in ranges if r["depth"] == 0), key=lambda r: -r[weight])
    kept = top[:MAX_RANGE_ROWS]
    return kept, f"  ({len(ranges) - len(kept)} ranges not shown: top {len(kept)} by {weight})"


def _range_tree(ranges: list[dict[str, Any]], steps: int) -> list[str]:
    """The ranges as a tree (children under their parent, in order of first
    use), with totals over the steps."""
    kept, note = _shown_ranges(ranges)
    names = {r["name"] for r in kept}
    children: dict[Any, list[dict[str, Any]]] = {}
    for r in kept:
        parent = r["parent"] if r["parent"] in names else None
        children.setdefault(parent, []).append(r)
    over = f" over {steps} step{'s' if steps != 1 else ''}" if steps else ""
    lines = [f"Ranges (totals{over}; GPU: busy time of the kernels launched inside):"]

    def visit(parent: Any, indent: str) -> None:
        siblings = children.get(parent, [])
        for i, r in enumerate(siblings):
            last = i == len(siblings) - 1
            branch = "" if parent is None else ("└─ " if last else "├─ ")
            label = f"{indent}{branch}{r['name']}"
            if len(label) > NAME_WIDTH:
                label = label[: NAME_WIDTH - 3] + "..."
            kernels = "" if r["kernels"] is None else f"  kernels {r['kernels']}"
            lines.append(f"  {label:<{NAME_WIDTH}} x{r['count']:<5} host {r['host_ms']:.3f} ms  "
                         f"GPU {_fmt(r['gpu_ms'])} ms{kernels}")
            visit(r["name"], indent + ("" if parent is None else ("   " if last else "│  ")))

    visit(None, "")
    if note:
        lines.append(note)
    return lines


def _counter_lines(summary: dict[str, Any]) -> list[str]:
    sm, dram, pcie = summary.get("sm"), summary.get("dram"), summary.get("pcie")
    if sm is None or dram is None:
        return []
    lines = [
        "",
        f"SM: active {_fmt(sm['active_pct'], '.1f')}% (while busy {_fmt(sm['active_busy_pct'], '.1f')}%), "
        f"issue {_fmt(sm['issue_ipc'], '.2f')} inst/cycle, warp occupancy "
        f"{_fmt(sm['warp_occupancy_pct'], '.1f')}%, GR active {_fmt(sm['gr_active_pct'], '.1f')}%"
        + (f", tensor {_fmt(sm['tensor_active_pct'], '.1f')}%" if sm["tensor_active_pct"] is not None else "")
        + f"; {sm['samples']} samples",
        f"DRAM: {_fmt(dram['throughput_pct'], '.1f')}% of peak (while busy "
        f"{_fmt(dram['throughput_busy_pct'], '.1f')}%), read {_fmt(dram['read_gbps'], '.1f')} GB/s, "
        f"write {_fmt(dram['write_gbps'], '.1f')} GB/s",
    ]
    if pcie and (pcie["read_bytes"] is not None or pcie["write_bytes"] is not None):
        lines.append(f"PCIe: read {_fmt(pcie['read_bytes'], 'd')} B, write {_fmt(pcie['write_bytes'], 'd')} B")
    m = summary.get("metrics") or {}
    if m.get("dropped_metrics"):
        lines.append(f"Counters dropped to fit one pass: {m['dropped_metrics']}")
    if m.get("overflows"):
        lines.append(f"WARNING: the PM sampling buffer overflowed {m['overflows']} time(s): samples "
                     "were lost; raise metrics_buffer_mb or metrics_interval_us")
    coverage = sm.get("coverage_pct")
    said = any(c.get("name") == "coverage" for c in failed_checks(summary))  # WARNING on top
    if coverage is not None and coverage < MIN_COVERAGE_PCT and not said:
        lines.append(f"WARNING: the counter samples cover only {coverage:.0f}% of the loop; the "
                     "figures above describe that part")
    return lines


def _graph_replay_lines(gpu: dict[str, Any]) -> list[str]:
    """One line when CUDA-graph replays were traced whole (graph-level
    mode): what the kernel figures then leave out."""
    replays = gpu.get("graph_replays")
    if not replays:
        return []
    return [f"CUDA graphs: {replays} replays traced whole ({gpu['graph_replay_ms']:.3f} ms, "
            "graph-level mode): kernel counts, the kernel table and fill cover only kernels "
            "launched outside graphs"]


def format_report(summary: dict[str, Any]) -> str:
    out = ["loopscope report"]
    gpu, gaps = summary["gpu"], summary["gaps"]
    device = gpu["device"] if gpu and gpu["device"] else ("synthetic records" if summary["source"] == "injected" else None)
    out[0] += f" - {device}" if device else ""
    out[0] += f" - {len(summary['steps'])} steps, host {summary['host_ms']:.3f} ms"
    said = Said(summary)  # each reason once; a later line refers to the first
    for line in warning_lines(summary):  # a failed self-check before any figure
        out.append(said.line(line, f"the {line.split(':', 1)[0]} line above"))
    out.extend(rank_head_lines(summary))  # torch.distributed: the straggler first
    out.append(said.line(_verdict_line(summary), "the verdict line above"))
    out.extend(_projection_lines(summary))
    reasons = summary["diagnosis"]["reasons"]
    # without a GPU time line the verdict line gives the first reason: not again here
    for reason in reasons[1:] if gaps is None and reasons else reasons:
        out.append(said.line(f"  - {reason}", "the verdict's reasons above"))
    if gaps is not None:
        out.append("")
        out.append(
            f"GPU: {gpu['kernels']} kernels, {gpu['memcpys']} memcpys, {gpu['memsets']} memsets; "
            f"busy {gpu['busy_ms']:.3f} ms of {gpu['span_ms']:.3f} ms ({_fmt(gpu['busy_pct'], '.1f')}%)"
            + (f"; {gpu['replay_idle_ms']:.3f} ms between the kernels of graph replays, "
               "neither busy nor a gap, left out" if gpu.get("replay_idle_ms") else "")
        )
        out.extend(_graph_replay_lines(gpu))
        out.append(
            f"Gaps: {gaps['count']} (normal {gaps['normal']}, warning {gaps['warning']}, "
            f"severe {gaps['severe']}); {gap_stats_text(gaps)}; idle {gaps['idle_ms']:.3f} ms"
        )
        if gaps["worst"]:
            out.append("Worst gaps:")
            for g in gaps["worst"][:5]:
                where = f"step {g['step_name']}" if g["step_name"] else "outside steps"
                before = f" before {clip(kernel_name(g['before']) or '', 60)}" if g["before"] else ""
                out.append(f"  {g['duration_us']:>10.1f} us  [{g['cause']}] {where}, stream {g['stream']}{before}")
    out.extend(_counter_lines(summary))
    out.extend(_kernel_lines(summary))
    out.extend(_sync_lines(summary))
    out.extend(_readiness_lines(summary))
    if summary["steps"]:
        out.append("")
        out.extend(_steps_table(summary["steps"]))
    out.extend(rank_table_lines(summary))  # torch.distributed: ranks, and ranks x steps
    if summary["ranges"]:
        out.append("")
        out.extend(_range_tree(summary["ranges"], len(summary["steps"])))
    out.append("")
    mismatches = summary["overhead"].get("instrument_mismatches", 0)
    if mismatches:
        out.append(
            f"Note: instrument() saw {mismatches} nesting mismatches (a module call left by "
            "a BaseException such as KeyboardInterrupt, or a backward hook that never ran): "
            "those ranges end where it passed, so their times may be short")
    module_steps = summary.get("module_steps")
    if module_steps and module_steps["skipped"]:
        out.append(
            f"Note: steps=module: {module_steps['skipped']} of {module_steps['calls']} calls made "
            f"no step ({'; '.join(module_steps['errors'][:1])})")
    if summary.get("cupti_note"):
        out.append(f"Note: {summary['cupti_note']}")
    if summary.get("non_finite_note"):
        out.append(f"Note: {summary['non_finite_note']}")
    # one line per reason: without a driver, one reason stops all three
    # sections; a reason given above is referred to, not said again
    gpu_error = summary["gpu_error"]
    if gpu_error:
        out.append(said.line(f"GPU sections missing ({missing_sections(summary)}): {gpu_error}",
                             "the GPU sections missing line"))
    if summary.get("syncs") is None and summary.get("syncs_error") \
            and summary["syncs_error"] != gpu_error:
        out.append(said.line(f"Syncs: not watched: {summary['syncs_error']}",
                             "the Syncs line above"))
    if summary["sm"] is None and summary["metrics_error"] != gpu_error:
        out.append(said.line(f"SM/DRAM: {summary['metrics_error']}", "the SM/DRAM line"))
    o = summary["overhead"]
    if summary.get("trace"):  # read from a file: no profiler ran, say what was read
        out.extend(trace_lines(summary))
        return "\n".join(out)
    out.append(
        f"Records: {o['records']}, dropped {summary['dropped_records']}; profiler cost: "
        f"drains {o['drain_ms']:.3f} ms, stop {o['stop_ms']:.3f} ms, summary {o['summary_ms']:.3f} ms"
    )
    return "\n".join(out)
