"""The notebook view: a summary (or a finished Profile) as HTML.

Order: the verdict and its evidence, the headline figures, the per-step
table, the user's ranges, the sync sites, the worst gaps, then the
pictures people would rather look at than read (_pictures.py): the gap
histogram; with a Profile the time line of the whole run and a zoom on
the slowest and on a typical step; GPU busy/idle per step with SM and
DRAM where sampled.  Without matplotlib the view is text and tables, with
one note saying so.

Like every view it only reads the summary and the analysed model, and
shows a bounded number of rows and pictures whatever the run's size."""
from __future__ import annotations

import html
import re
from typing import Any

from ..figures._budgets import step_list
from ..figures._checks import warning_lines
from ..figures._names import demangled_name, display_path, kernel_name
from ..figures._verdicts import verdict_kind
from ._pictures import SEVERE, histogram_picture, timeline_of, timeline_pictures
from ._report import (Said, _shown_ranges, describe_recording, gap_stats_text,
                      missing_sections, short_text)

from ..distributed._ranks_view import ranks_head_html, ranks_html

MAX_STEP_ROWS = 60
MAX_SITES = 20
MAX_WORST_GAPS = 10

# A kernel name breaks only between its parts, never inside an identifier
# (issue 41, item 8: `overflow-wrap:anywhere` made `vectorized_elementwise_kerne`
# / `l<...>` at 900 px): a break chance (<wbr>) after `::` and `,`, before
# `<` and `(`.  Its box takes at most 30% of the window (two name columns and
# the figures beside them fit 900 px); a part wider than that ends in an
# ellipsis there (the whole name is the box's title): at 1,400 px the demo's
# names are whole on one line each.
_NAME_BOX = "max-width:30vw;overflow:hidden;text-overflow:ellipsis"
_NAME_SPLIT = re.compile(r"(::|,|<|\()")


def breakable_name(name: str) -> str:
    """`name` as HTML that a narrow page breaks only between its parts."""
    out = []
    for k, piece in enumerate(_NAME_SPLIT.split(name)):
        if k % 2:  # a separator
            out.append(f"{_e(piece)}<wbr>" if piece in ("::", ",") else f"<wbr>{_e(piece)}")
        else:
            out.append(_e(piece))
    return "".join(out)


_TABLE = "border-collapse:collapse;font-size:12px;margin:4px 0 10px 0"
_TH = "text-align:right;padding:2px 8px;border-bottom:1px solid #8a9ba8;font-weight:600"
_TD = "text-align:right;padding:1px 8px;border-bottom:1px solid #eef1f3;font-family:monospace"
_NOTE = "color:#5c7080;font-size:12px;margin:2px 0"


def _e(value: Any) -> str:
    return html.escape(str(value))


def _f(value: Any, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _matplotlib():
    """matplotlib's Figure class, or None when matplotlib is not installed."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return Figure


def _h(title: str) -> str:
    return f'<h4 style="margin:12px 0 2px 0">{_e(title)}</h4>'


def _table(head: list[str], rows: list[list[str]], left: tuple[int, ...] = (),
           wrap: tuple[int, ...] = ()) -> str:
    """A table; `left`: its left-aligned columns; `wrap`: columns of long
    names that may break anywhere, so a narrow page keeps the table whole."""
    def cell(tag: str, style: str, text: str, i: int) -> str:
        if i in left:
            style = style.replace("text-align:right", "text-align:left")
        if i in wrap and tag == "td":
            style += ";overflow-wrap:anywhere"
        return f'<{tag} style="{style}">{text}</{tag}>'

    # a table wider than the page scrolls inside its own box, never past it
    out = [f'<div style="overflow-x:auto;max-width:100%"><table style="{_TABLE}"><tr>']
    out += [cell("th", _TH, _e(h), i) for i, h in enumerate(head)]
    out.append("</tr>")
    for row in rows:
        out.append("<tr>" + "".join(cell("td", _TD, c, i) for i, c in enumerate(row)) + "</tr>")
    out.append("</table></div>")
    return "".join(out)


# -- sections ------------------------------------------------------------
def _verdict(summary: dict[str, Any], said: Said | None = None) -> str:
    said = said or Said(summary)
    d = summary["diagnosis"]
    colour = verdict_kind(d["verdict"]).colour  # an undeclared verdict raises, never grey
    out = [
        f'<div style="border-left:6px solid {colour};padding:4px 10px;margin:6px 0">',
        f'<div style="font-size:18px;font-weight:700;color:{colour}">'
        f'{_e(d["verdict"].replace("_", " "))}</div>',
    ]
    if d.get("actions"):
        out.append(f'<div style="margin:2px 0"><b>Next:</b> {_e(d["actions"][0])}</div>')
    projections = [p for p in d.get("projections") or [] if p.get("notable", True)]
    if projections:  # wins worth the name only (a 1.00x is no win)
        out.append('<div style="margin:2px 0"><b>What it would win:</b> '
                   + "; ".join(_e(p["text"]) for p in projections[:3]) + "</div>")
    out.append('<ul style="margin:2px 0 2px 18px;padding:0">')
    out += [f"<li>{_e(said.line(r, 'the verdict above'))}</li>" for r in d["reasons"]]
    out.append("</ul></div>")
    return "".join(out)


def _figures(summary: dict[str, Any]) -> str:
    gpu, gaps, syncs = summary["gpu"], summary["gaps"], summary["syncs"]
    rows = []
    if gpu is not None:
        rows.append(["GPU", f"busy {_f(gpu['busy_pct'], '.1f')}% of {gpu['span_ms']:.3f} ms; "
                            f"{gpu['kernels']} kernels, {gpu['memcpys']} memcpys, "
                            f"{gpu['memsets']} memsets"
                            + (f", {gpu['graph_replays']} CUDA-graph replays traced whole "
                               "(not in the kernel figures)" if gpu.get("graph_replays")
                               else "")])
    if gaps is not None:
        rows.append(["Gaps", f"{gaps['count']}: {gaps['normal']} normal, {gaps['warning']} warning, "
                             f"<b>{gaps['severe']} severe</b> (&gt; {gaps['thresholds_us'][1]:g} us); "
                             f"{gap_stats_text(gaps)}; idle {gaps['idle_ms']:.3f} ms"])
    if syncs is not None:
        kinds = ", ".join(f"{_e(k)} {v}" for k, v in syncs.get("by_kind", {}).items())
        rows.append(["Syncs", f"{syncs['count']}, host blocked {syncs['blocked_ms']:.3f} ms"
                              + (f" ({kinds})" if kinds else "")])
    if summary["sm"] is not None:
        dram = summary["dram"] or {}
        rows.append(["SM / DRAM", f"SM active {_f(summary['sm'].get('active_pct'), '.1f')}%, "
                                  f"DRAM {_f(dram.get('throughput_pct'), '.1f')}% "
                                  f"(read {_f(dram.get('read_gbps'), '.1f')} GB/s, "
                                  f"write {_f(dram.get('write_gbps'), '.1f')} GB/s)"])
    if not rows:
        return ""
    body = "".join(f'<tr><td style="padding:1px 10px 1px 0;font-weight:600">{k}</td>'
                   f'<td style="padding:1px 0">{v}</td></tr>' for k, v in rows)
    return f'<table style="font-size:13px;margin:4px 0">{body}</table>'


def _steps(summary: dict[str, Any]) -> str:
    steps = summary["steps"]
    if not steps:
        return ""
    shown = steps if len(steps) <= MAX_STEP_ROWS else steps[: MAX_STEP_ROWS - 5] + steps[-5:]
    rows = []
    for i, s in enumerate(shown):
        if len(steps) > MAX_STEP_ROWS and i == MAX_STEP_ROWS - 5:
            rows.append(["...", f"{len(steps) - MAX_STEP_ROWS} more steps"] + [""] * 11)
        g = s["gaps"] or {}
        severe = g.get("severe")
        severe_cell = _f(severe, "d")
        if severe:
            severe_cell = f'<b style="color:{SEVERE}">{severe}</b>'
        rows.append([
            str(s["index"]), _e(s["name"]), _f(s["host_ms"]), _f(s["gpu_ms"]),
            _f(g.get("busy_pct"), ".1f"), _f(s["kernels"], "d"), _f(g.get("count"), "d"),
            severe_cell, _f(g.get("max_us"), ".1f"), _f(s.get("syncs"), "d"),
            _f(s.get("sm_active_pct"), ".1f"), _f(s.get("dram_pct"), ".1f"), _e(s["verdict"] or "-"),
        ])
    head = ["step", "name", "host ms", "GPU ms", "busy %", "kernels", "gaps", "severe",
            "max gap us", "syncs", "SM %", "DRAM %", "verdict"]
    note = ""
    if summary.get("steps_from") == "ranges":
        note = f'<div style="{_NOTE}">Steps are the ranges whose names matched the step pattern.</div>'
    return _h(f"Steps ({len(steps)})") + note + _table(head, rows, left=(1, 12))


def _ranges(summary: dict[str, Any]) -> str:
    """The user's ranges, totals per name over the run (the summary's
    range entries, nested by depth; the same rows the text report keeps)."""
    ranges = summary["ranges"]
    if not ranges:
        return ""
    kept, note = _shown_ranges(ranges)
    rows = []
    for r in kept:
        indent = "&nbsp;&nbsp;" * r["depth"]
        rows.append([indent + _e(r["name"]), str(r["count"]), _f(r["host_ms"]), _f(r["gpu_ms"]),
                     _f(r["kernels"], "d"), _f(r.get("sm_active_pct"), ".1f"),
                     _f(r.get("dram_pct"), ".1f")])
    head = ["range", "count", "host ms", "GPU ms", "kernels", "SM %", "DRAM %"]
    steps = len(summary["steps"])
    over = f" over {steps} step{'s' if steps != 1 else ''}" if steps else ""
    gpu = "; GPU: busy time of the kernels launched inside" if summary["gpu"] else ""
    out = [_h(f"Ranges ({len(ranges)})"),
           f'<div style="{_NOTE}">Totals per name{over}{gpu}.</div>',
           _table(head, rows, left=(0,))]
    if note:
        out.append(f'<div style="{_NOTE}">{_e(note.strip())}</div>')
    return "".join(out)


def _sites(summary: dict[str, Any], said: Said | None = None) -> str:
    said = said or Said(summary)
    syncs = summary["syncs"]
    if syncs is None:
        reason = summary.get("syncs_error") or "sync detection is not available in this build"
        return _h("Sync sites") + (f'<div style="{_NOTE}">'
                                   f'{_e(said.line(f"Not measured: {reason}", "Sync sites"))}</div>')
    sites = syncs.get("sites") or []
    if not sites:
        return _h("Sync sites") + f'<div style="{_NOTE}">No host-device sync inside the profile.</div>'
    rows = []
    for s in sites[:MAX_SITES]:
        file = display_path(s["file"]) if s.get("file") else "?"
        where = _e(f"{file}:{s.get('line') if s.get('line') is not None else '?'}")
        rows.append([
            where, _e(s.get("function") or "-"), f"<code>{_e(s.get('code') or s.get('call') or '?')}</code>",
            _e(s.get("kind", "?")), str(s.get("count", 0)), _f(s.get("blocked_ms")),
            _e(step_list(s["steps"]) if s.get("steps") else "outside steps"),
        ])
    more = f'<div style="{_NOTE}">... {len(sites) - MAX_SITES} more sites</div>' if len(sites) > MAX_SITES else ""
    head = ["file:line", "function", "code", "kind", "count", "blocked ms", "steps"]
    return (_h(f"Sync sites ({syncs['count']} syncs)")
            + _table(head, rows, left=(0, 1, 2, 3, 6), wrap=(0, 1, 2)) + more)


def _worst_gaps(summary: dict[str, Any]) -> str:
    """The longest gaps, with the ops on either side (short names; the whole
    demangled name on hover)."""
    worst = (summary["gaps"] or {}).get("worst") or []
    if not worst:
        return ""

    def op(name: str | None) -> str:
        if not name:
            return "-"
        return (f'<div title="{_e(demangled_name(name))}" style="{_NAME_BOX}">'
                f'{breakable_name(kernel_name(name) or name)}</div>')

    rows = [[_f(g["duration_us"], ".1f"), _e(g["cause"]), _e(g["step_name"] or "outside steps"),
             _e(g["stream"]), op(g.get("after")), op(g.get("before"))]
            for g in worst[:MAX_WORST_GAPS]]
    head = ["gap us", "cause", "step", "stream", "after", "before"]
    return _h("Worst gaps") + _table(head, rows, left=(1, 2, 4, 5))  # names: breakable_name


def _histogram_table(gaps: dict[str, Any]) -> str:
    edges, counts = gaps["histogram"]["edges_us"], gaps["histogram"]["counts"]
    rows = []
    for i, c in enumerate(counts):
        hi = f"{edges[i + 1]:g}" if i + 1 < len(edges) else "inf"
        rows.append([f"{edges[i]:g} - {hi}", str(c)])
    return _table(["gap us", "count"], rows)


def _notes(summary: dict[str, Any], extra: list[str], said: Said | None = None) -> str:
    said = said or Said(summary)
    notes = list(extra)
    gpu_error = summary.get("gpu_error")
    if gpu_error:
        notes.append(said.line(f"GPU sections missing ({missing_sections(summary)}): {gpu_error}",
                               "the GPU sections missing note"))
    if summary.get("cupti_note"):
        notes.append(f"Note: {summary['cupti_note']}")
    if summary["sm"] is None and summary.get("metrics_error") \
            and summary["metrics_error"] != gpu_error:
        notes.append(said.line(f"SM/DRAM: {summary['metrics_error']}", "the SM/DRAM note"))
    if summary.get("dropped_records"):
        notes.append(f"{summary['dropped_records']} records were dropped: the figures miss them")
    return "".join(f'<div style="{_NOTE}">{_e(n)}</div>' for n in notes)


def render(summary: dict[str, Any], timeline: dict[str, Any] | None = None) -> str:
    """The HTML view of a summary dict; `timeline` (_pictures.timeline_of a
    Profile) adds the time line of the whole run and the zooms on steps."""
    gpu = summary["gpu"]
    device = gpu.get("device") if gpu else None
    title = "loopscope" + (f" - {device}" if device else "")
    title += f" - {len(summary['steps'])} steps, host {summary['host_ms']:.3f} ms"
    out = ['<div class="loopscope" style="font-family:sans-serif;max-width:1100px">',
           f'<div style="font-size:13px;color:#5c7080">{_e(title)}</div>']
    recording = describe_recording(summary)
    if recording:
        out.append(f'<div style="background:#fff3cd;padding:3px 8px;font-size:12px">{_e(recording)}</div>')
    said = Said(summary)  # each reason once; a later line refers to the first
    for line in warning_lines(summary):  # a failed self-check before any figure
        said.line(line, f"the {line.split(':', 1)[0]} line at the top")
        out.append(f'<div style="background:#f8d7da;color:#721c24;padding:3px 8px;'
                   f'font-size:13px;font-weight:bold">{_e(line)}</div>')
    out.append(ranks_head_html(summary))  # torch.distributed: the straggler first
    out.append(_verdict(summary, said))
    out.append(_figures(summary))
    out.append(_steps(summary))
    out.append(_ranges(summary))
    out.append(ranks_html(summary))  # torch.distributed: ranks, and ranks x steps
    out.append(_sites(summary, said))
    out.append(_worst_gaps(summary))
    Figure = _matplotlib()
    notes = []
    gaps = summary["gaps"]
    if gaps is not None and gaps["count"]:
        out.append(_h("Gap histogram"))
        out.append(histogram_picture(Figure, gaps) if Figure else _histogram_table(gaps))
    if Figure is not None:
        for heading, picture in timeline_pictures(Figure, summary, timeline):
            out.append(_h(heading))
            out.append(picture)
    elif gaps is not None:
        notes.append("matplotlib is not installed, so the gap histogram and the time line are "
                     "shown as tables or left out (pip install matplotlib for the pictures)")
    if Figure is not None and timeline is None and summary["steps"]:
        notes.append("no time line: a summary on its own does not hold the records; display "
                     "the profile (prof) for the time line and the zooms")
    out.append(_notes(summary, notes, said))
    out.append("</div>")
    return "".join(out)


def profile_html(prof) -> str:
    if not prof.is_finished:
        state = "running" if prof.is_running else "not started"
        return f"<div class='loopscope'>loopscope profile: {state}</div>"
    return render(prof.summary(), timeline_of(prof))
