"""The notebook view's pictures, drawn with matplotlib (no pyplot, so no
global state) into PNGs embedded in the page:

- the gap histogram;
- the whole run: GPU busy share per pixel column (a loop busy 23% of the
  time reads as a low bar, not a solid one), severe gaps marked in red,
  each step's host time and the span of the GPU work it launched, the
  user's ranges at least a pixel wide, and where the zooms are;
- a zoom on the slowest step (by host time) and on a typical one (the
  median): each busy interval, each warning (orange) and severe (red) gap
  of the step with the longest one labelled, the ranges inside it by
  depth, and the host's waits (syncs);
- per step: GPU busy and idle time, SM and DRAM where sampled.

A CPU-only run gets the same pictures without the GPU lanes: its steps
and ranges on the host.

Like every view this only reads the analysed model and the summary: the
model's busy_bins, gap_bins, step_table and window hand over at most a
fixed number of items, so the pictures cost the same for 1,000 ops or
10M (and for 10 steps or 1M)."""
from __future__ import annotations

import base64
import html
import io
import zlib
from typing import Any

BUSY, IDLE, SEVERE, WARNING, SM, DRAM = ("#2b95d6", "#e1e8ed", "#c23030", "#d9822b", "#0f9960",
                                         "#7157d9")
OTHER_SEVERE, OTHER_WARNING = "#eab0b0", "#f2d0ad"  # gaps of the neighbouring steps, faded
WAIT = "#394b59"                                     # the host waiting in a sync
ZOOMED = "#e0a800"                                   # where the zooms are, on the whole run
STEP_SHADES = ("#a7b6c2", "#ced9e0")
RANGE_SHADES = ("#9bd4c4", "#c3b4ec", "#f5c98c", "#a9cdef", "#e9b4d2", "#c9dd9c", "#f0b9a6",
                "#b5c4d6")

TIMELINE_BINS = 800    # slices of the whole-run picture: about one per pixel column
ZOOM_BINS = 800        # slices of a zoom drawn as busy share (too many intervals to draw)
ZOOM_LIMIT = 2000      # items of each kind a zoom asks the model for
MAX_SPANS_DRAWN = 300  # more busy intervals than this: gaps between them would not show
MAX_BANDS = 100        # more steps than this: step starts as ticks, not labelled bands
MAX_BARS = 200         # more steps than this: the per-step chart shows groups of steps
MAX_LANES = 6          # lanes of ranges in one picture
MAX_DEVICE_LANES = 4   # more GPUs than this share one lane
# A zoom's label on the whole run: within this share of the axis from an
# edge it is aligned to that edge (centred it would be cut off); labels
# closer than LABEL_APART of the axis go on rows of their own.
LABEL_EDGE, LABEL_APART = 0.15, 0.3
INCHES_PER_LANE = 0.42
WIDTH_IN, DPI = 10.0, 100
LEFT_IN, RIGHT_IN, BOTTOM_IN = 1.35, 0.25, 0.5  # fixed margins: the time axes line up
AXES_PX = int((WIDTH_IN - LEFT_IN - RIGHT_IN) * DPI)  # a time axis in pixels


def _place(fig, axes, plot_in: float, title_lines: int = 1, left_in: float = LEFT_IN,
           right_in: float = RIGHT_IN, width_in: float = WIDTH_IN) -> None:
    """Sizes the figure around a plot area `plot_in` inches high with fixed
    margins (cheaper than a tight bounding box, which draws twice)."""
    top_in = 0.12 + 0.19 * title_lines
    height = BOTTOM_IN + plot_in + top_in
    fig.set_size_inches(width_in, height)
    for ax in axes:
        ax.set_position((left_in / width_in, BOTTOM_IN / height,
                         1 - (left_in + right_in) / width_in, plot_in / height))


def png(fig, alt: str) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    # as wide as the page allows, never wider than drawn: a 900 px window
    # shrinks it instead of cutting its right side off
    return (f'<img alt="{html.escape(alt)}" style="max-width:100%;height:auto;display:block" '
            f'src="data:image/png;base64,{data}"/>')


# -- the gap histogram ---------------------------------------------------------

def histogram_picture(Figure, gaps: dict[str, Any]) -> str:
    edges, counts = gaps["histogram"]["edges_us"], gaps["histogram"]["counts"]
    normal, severe = gaps["thresholds_us"]
    labels = [f"{e:g}" for e in edges]
    colours = [SEVERE if e >= severe else (WARNING if e >= normal else BUSY) for e in edges]
    fig = Figure(dpi=DPI)
    ax = fig.add_subplot()
    _place(fig, [ax], 1.7, left_in=0.7, width_in=7.5)
    bars = ax.bar(range(len(counts)), counts, color=colours)
    ax.bar_label(bars, labels=[str(c) if c else "" for c in counts], fontsize=8)
    ax.set_xticks(range(len(counts)), labels, fontsize=8)
    ax.set_xlabel("gap length, us (bin lower edge)")
    ax.set_ylabel("gaps")
    ax.set_title(f"Gap histogram: {gaps['normal']} normal (< {normal:g} us), {gaps['warning']} "
                 f"warning, {gaps['severe']} severe (> {severe:g} us)", fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    return png(fig, f"Gap histogram: {_count(gaps['count'], 'gap')}, {gaps['severe']} severe")


# -- what the time line pictures read --------------------------------------------

def _numpy():
    import numpy  # matplotlib's own dependency: here only when matplotlib is

    return numpy


def _zoom_rows(columns: dict[str, Any]) -> list[tuple[str, int]]:
    """The rows of the slowest step by host time (the first of equals) and
    of the typical one (the lower median by host time, equals in step
    order), each once."""
    np = _numpy()
    start, end = columns["start_ns"], columns["end_ns"]
    host = np.where(end > start, end - start, np.uint64(0))
    if len(host) == 0:
        return []
    slowest = int(np.argmax(host))
    typical = int(np.lexsort((np.arange(len(host)), host))[(len(host) - 1) // 2])
    return [("slowest", slowest)] + ([("typical", typical)] if typical != slowest else [])


def _zoom_of(model, role: str, step: dict[str, Any], columns: dict[str, Any], row: int,
             gpu: bool) -> dict[str, Any]:
    """What the zoom on one step draws: its window (the step's host time and
    its GPU work, with a little room) and what the model has in it."""
    start, end = int(columns["start_ns"][row]), int(columns["end_ns"][row])
    first, last = int(columns["first_ns"][row]), int(columns["last_ns"][row])
    lo, hi = start, max(end, start + 1)
    if gpu and last > 0:
        lo, hi = min(lo, first), max(hi, last)
    pad = max((hi - lo) // 40, 1)
    lo, hi = max(lo - pad, 0), hi + pad
    px = max((hi - lo) // AXES_PX, 1)
    window = model.window(lo, hi, ZOOM_LIMIT, "warning", px)
    if window["gap_count"] > ZOOM_LIMIT:  # too many warnings: mark the severe ones only
        window.update(model.window(lo, hi, ZOOM_LIMIT, "severe", kinds=("gaps",)),
                      severe_only=True)
    zoom = {"role": role, "step": step, "lo": lo, "hi": hi, "host": (start, end),
            "thread": None, "window": window, "dense": None}
    for r in window["ranges"]:
        if r[5] == step["index"]:
            zoom["thread"] = r[4]
    if gpu and window["busy_count"] > MAX_SPANS_DRAWN:
        zoom["dense"] = {d["device"]: model.busy_bins(lo, hi, ZOOM_BINS, device=d["device"])
                         for d in model.devices()}
    return zoom


def timeline_of(prof) -> dict[str, Any] | None:
    """What the time line pictures of a finished Profile draw, read from its
    model: None without matplotlib, or when there is neither GPU work nor
    a range to show."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None
    model = prof.model
    if model is None:
        return None
    np = _numpy()
    gpu = model.op_count > 0  # the model holds GPU work (a trace, or records put in)
    names = ("index", "start_ns", "end_ns", "first_ns", "last_ns")
    table = model.step_table(names + (("busy_ns", "idle_ns") if gpu else ()))
    columns = {name: np.frombuffer(view, dtype=np.uint64)  # one pass over the steps
               for name, view in table.items()}
    info = prof.capture.info()
    if not gpu and info["ranges"] == 0:
        return None
    # The whole run: the profile's host window (the capture's), the GPU's
    # time line (the model's total line: first op start to last op end) and
    # the steps' host spans (the model's step lines, reduced as summary["loop"]).
    t0, t1 = info["start_ns"], max(info["stop_ns"], info["start_ns"] + 1)
    if gpu:
        total = model.total()
        t0, t1 = min(t0, total["first_ns"]), max(t1, total["last_ns"])
    if len(columns["index"]):
        t0 = min(t0, int(columns["start_ns"].min()))
        t1 = max(t1, int(columns["end_ns"].max()))
    px = max((t1 - t0) // AXES_PX, 1)
    out: dict[str, Any] = {"t0": t0, "t1": t1, "gpu": gpu, "steps": columns}
    if gpu:
        out["bins"] = TIMELINE_BINS
        out["devices"] = max(1, len(model.devices()))
        out["busy"] = model.busy_bins(t0, t1, TIMELINE_BINS)
        out["severe"] = model.gap_bins(t0, t1, TIMELINE_BINS, "severe")
    # the user's ranges at least a pixel wide (steps have their own lanes)
    window = model.window(t0, t1, ZOOM_LIMIT, min_range_ns=px, kinds=("ranges",))
    out["ranges"] = [r for r in window["ranges"] if r[5] is None]
    out["ranges_hidden"] = info["ranges"] - len(columns["index"]) - len(out["ranges"])
    # the summary has a step per row of the model's step columns, in order
    steps = prof.summary()["steps"]
    out["zooms"] = [_zoom_of(model, role, steps[row], columns, row, gpu)
                    for role, row in _zoom_rows(columns)
                    if row < len(steps) and steps[row]["index"] == int(columns["index"][row])]
    return out


# -- drawing helpers -------------------------------------------------------------

def _stairs(ax, edges, top, base: float, colour: str) -> None:
    """A filled step curve from `base` up to top[i] over [edges[i],
    edges[i + 1]): one polygon, added without rescaling the axes (Axes.stairs
    walks every segment to update the data limits, a tenth of a second for
    800 steps)."""
    from matplotlib.collections import PolyCollection

    np = _numpy()
    xs = np.repeat(np.asarray(edges, dtype=np.float64), 2)
    ys = np.concatenate(([base], np.repeat(np.asarray(top, dtype=np.float64), 2), [base]))
    ax.add_collection(PolyCollection([np.column_stack((xs, ys))], facecolors=colour,
                                     linewidths=0), autolim=False)


def _f(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}" + ("" if n == 1 else "s")


def _range_colour(name: str | None) -> str:
    """One colour per range name, the same in every picture and run; a
    range is coloured by its group's name (Model.window: the name without
    its step's prefix), so "Step_3/Layer_0" is Layer_0's colour in every
    step."""
    return RANGE_SHADES[zlib.crc32((name or "").encode()) % len(RANGE_SHADES)]


def _lanes(ranges: list[tuple], thread: int | None) -> tuple[dict[tuple[int, int], int], int]:
    """A lane per (thread, depth) of the ranges, keyed (thread id, depth),
    `thread`'s first and then in order of appearance, at most MAX_LANES;
    and how many pairs did not get one."""
    threads = [] if thread is None else [thread]
    for r in ranges:
        if r[4] not in threads:
            threads.append(r[4])
    order = {t: i for i, t in enumerate(threads)}
    keys = sorted({(r[4], r[3]) for r in ranges}, key=lambda k: (order[k[0]], k[1]))
    return {k: i for i, k in enumerate(keys[:MAX_LANES])}, max(len(keys) - MAX_LANES, 0)


def _clip(text: str, width_px: float) -> str | None:
    """`text` shortened to fit width_px at font size 7, or None when even a
    few letters would not."""
    room = int(width_px / 5.2)
    if room < 4:
        return None
    return text if len(text) <= room else text[: room - 1] + "…"


def _draw_ranges(ax, ranges: list[tuple], thread: int | None, top: float, to_x, px: float,
                 labels: list[tuple[float, str]]) -> float:
    """The ranges as bars, a lane per (thread, depth) from y = top downwards,
    each labelled with its name where it fits; returns the y below them."""
    lane_of, hidden = _lanes(ranges, thread)
    threads = {t for t, _ in lane_of}
    bars: dict[int, tuple[list, list]] = {}
    plain = set()  # lanes holding a range that is not a step
    for r in ranges:
        lane = lane_of.get((r[4], r[3]))
        if lane is None:
            continue
        if r[5] is None:
            plain.add(lane)
        a, b = to_x(r[1]), to_x(r[2])
        colour = STEP_SHADES[r[5] % 2] if r[5] is not None else _range_colour(r[7] or r[6])
        rects, colours = bars.setdefault(lane, ([], []))
        rects.append((a, max(b - a, px)))
        colours.append(colour)
        name = _clip(str(r[6]), (b - a) / px)
        if name:
            ax.text((a + b) / 2, top - 0.2 - lane * 0.4, name, ha="center", va="center",
                    fontsize=7, clip_on=True, parse_math=False)
    for lane, (rects, colours) in bars.items():
        ax.broken_barh(rects, (top - 0.35 - lane * 0.4, 0.3), facecolors=colours,
                       edgecolor="white", linewidth=0.4)
    numbers = {t: i + 1 for i, t in enumerate(dict.fromkeys(t for t, _ in lane_of))}
    for (t, depth), lane in lane_of.items():
        who = "" if len(threads) == 1 else f" (thread {numbers[t]})"
        what = f"ranges, depth {depth}" if lane in plain else "step (host)"
        labels.append((top - 0.2 - lane * 0.4, what + who))
    if hidden:
        labels.append((top - 0.2 - len(lane_of) * 0.4, f"+{hidden} deeper lanes not shown"))
    return top - 0.4 * (len(lane_of) + (1 if hidden else 0))


def _time_axis(span_ns: int) -> tuple[float, str]:
    """Scale and unit of a time axis `span_ns` long."""
    if span_ns < 5_000_000:
        return 1e3, "us"
    if span_ns < 20_000_000_000:
        return 1e6, "ms"
    return 1e9, "s"


def _finish(fig, ax, labels: list[tuple[float, str]], bottom: float, top: float, title: str,
            fontsize: int) -> None:
    """Lane labels, the title, and the figure sized to its lanes."""
    ax.set_ylim(bottom, top)
    ax.set_yticks([y for y, _ in labels], [t for _, t in labels], fontsize=8)
    ax.tick_params(axis="y", length=0)
    ax.spines[["top", "right", "left"]].set_visible(False)
    ax.set_title(title, fontsize=fontsize, parse_math=False)  # user names may hold "$"
    _place(fig, [ax], (top - bottom) * INCHES_PER_LANE / 0.4, title.count("\n") + 1)


# -- the whole run ---------------------------------------------------------------

def _overview_picture(Figure, t: dict[str, Any], summary: dict[str, Any]) -> str:
    fig = overview_figure(Figure, t)
    gpu = summary.get("gpu") or {}
    alt = (f"Time line of the whole run: GPU busy {_f(gpu.get('busy_pct'), '.1f')}%, "
           if t["gpu"] else "Host time line of the whole run: ") + _count(fig.steps, "step")
    return png(fig, alt + f", {len(t['ranges'])} ranges drawn")


def overview_figure(Figure, t: dict[str, Any]):
    """The whole run (see the module's doc); returns the figure (its
    `steps`: how many steps it shows)."""
    np = _numpy()
    t0, span = t["t0"], t["t1"] - t["t0"]
    scale, unit = _time_axis(span)

    def to_x(ns):
        return (ns - t0) / scale

    px = span / scale / AXES_PX
    steps = t["steps"]
    n_steps = len(steps["index"])
    fig = Figure(dpi=DPI)
    ax = fig.add_subplot()
    labels: list[tuple[float, str]] = []
    y = 0.0
    notes = []
    if t["gpu"]:
        bins = t["bins"]
        edges = t0 + span * np.arange(bins + 1, dtype=np.float64) / bins
        width = np.diff(edges) * t["devices"]
        busy = np.minimum(np.frombuffer(t["busy"], dtype=np.uint64) / width, 1.0)
        severe = np.frombuffer(t["severe"], dtype=np.uint64) > 0
        x = np.append((edges[:-1] - t0) / scale, span / scale)
        if severe.any():  # a strip of its own: where severe gaps are, however short
            _stairs(ax, x, np.where(severe, y - 0.05, y - 0.17), y - 0.17, SEVERE)
            labels.append((y - 0.11, "severe gaps"))
            y -= 0.2
        ax.broken_barh([(0, span / scale)], (y - 0.35, 0.3), color=IDLE)
        _stairs(ax, x, y - 0.35 + 0.3 * busy, y - 0.35, BUSY)
        labels.append((y - 0.2, "GPU busy share"))
        y -= 0.4
    if n_steps:
        rows = [("steps: host", "start_ns", "end_ns")]
        if t["gpu"]:
            rows.insert(0, ("steps: GPU work", "first_ns", "last_ns"))
        for label, a_key, b_key in rows:
            a, b = steps[a_key], steps[b_key]  # uint64; b is 0 for a step without ops
            if n_steps <= MAX_BANDS:
                shown = [k for k in range(n_steps) if b[k] > 0]
                ax.broken_barh([(to_x(int(a[k])), max(to_x(int(b[k])) - to_x(int(a[k])), px))
                                for k in shown], (y - 0.35, 0.3),
                               facecolors=[STEP_SHADES[int(steps["index"][k]) % 2]
                                           for k in shown])
                for k in shown:
                    if (int(b[k]) - int(a[k])) / scale / px > 14:
                        ax.text(to_x((int(a[k]) + int(b[k])) / 2), y - 0.2,
                                str(int(steps["index"][k])), ha="center", va="center", fontsize=7)
            else:  # a tick in each pixel column where a step starts
                width = max(span // AXES_PX, 1)
                marked = np.zeros(AXES_PX + 1, dtype=bool)
                marked[(a[b > 0] - np.uint64(t0)) // np.uint64(width)] = True
                ax.vlines(to_x(t0 + (np.flatnonzero(marked) + 0.5) * width), y - 0.35, y - 0.05,
                          color="#5c7080", linewidth=0.6)
            labels.append((y - 0.2, label))
            y -= 0.4
        if n_steps > MAX_BANDS:
            notes.append(f"{n_steps} steps: a tick where steps start")
    if t["ranges"]:
        y = _draw_ranges(ax, t["ranges"], None, y, to_x, px, labels)
    if t["ranges_hidden"] > 0:
        notes.append(f"{t['ranges_hidden']} ranges shorter than a pixel not drawn")
    top = 0.45 if t["zooms"] else 0.05
    placed: list[float] = []
    for zoom in t["zooms"]:  # a bracket over the window each zoom shows
        a, b = to_x(zoom["lo"]), to_x(zoom["hi"]) + px
        ax.broken_barh([(a, b - a)], (0.02, 0.08), color=ZOOMED)
        ax.vlines([a, b], y, 0.1, color=ZOOMED, linewidth=0.8, linestyles=":")
        # the label stays inside the axes (a bracket at an edge is labelled
        # from that edge inwards) and above an earlier label it would touch
        where = (a + b) / 2 / (span / scale)
        x, ha = ((min(b, span / scale), "right") if where > 1 - LABEL_EDGE
                 else (max(a, 0), "left") if where < LABEL_EDGE else ((a + b) / 2, "center"))
        row = sum(abs(where - w) < LABEL_APART for w in placed)
        placed.append(where)
        ax.text(x, 0.14 + 0.16 * row, f"zoom: {zoom['role']} ({zoom['step']['name']})",
                ha=ha, va="bottom", fontsize=7, parse_math=False)
        top = max(top, 0.45 + 0.16 * row)
    ax.set_xlim(0, span / scale)
    ax.set_xlabel(f"time since profile start, {unit}")
    parts = (["steps"] if n_steps else []) + (["ranges"] if t["ranges"] else [])
    title = ("Whole run: GPU busy (blue) and idle (grey) per pixel column, severe gaps (red)"
             if t["gpu"] else "Whole run on the host")
    title += (", " if t["gpu"] else ": ") + ", ".join(parts) if parts else ""
    if t["zooms"]:
        title += "; brackets: the zooms below"
    elif not n_steps:
        notes.append("no steps: mark them (prof.step(), or steps= when loading a trace) for a "
                     "zoom on the slowest and a typical one")
    if notes:
        title += "\n" + "; ".join(notes)
    _finish(fig, ax, labels, y, top, title, 10)
    fig.steps = n_steps
    return fig


# -- a zoom on one step ------------------------------------------------------------

def _own_ranges(ranges: list[tuple], zoom: dict[str, Any]) -> list[tuple]:
    """The ranges a zoom on one step draws: the steps in its window (the
    neighbours give context) and the ranges that began inside the step's
    host time.  The padding around a long step can hold whole later steps
    (a first step of 80 ms, then steps of 0.2 ms): their ranges are theirs,
    not this step's."""
    start, end = zoom["host"]
    return [r for r in ranges if r[5] is not None or start <= r[1] <= end]


def _zoom_picture(Figure, zoom: dict[str, Any], gpu: bool) -> tuple[str, dict[str, int]]:
    """The picture of one zoom, and what it marked: busy intervals drawn,
    the step's severe and warning gaps."""
    np = _numpy()
    step, window = zoom["step"], zoom["window"]
    lo, hi = zoom["lo"], zoom["hi"]
    host_start = zoom["host"][0]
    scale, unit = _time_axis(hi - lo)

    def to_x(ns):
        return (ns - host_start) / scale

    px = (hi - lo) / scale / AXES_PX
    devices = sorted({b[2] for b in window["busy"]} | {g["device"] for g in window["gaps"]}
                     | set(zoom["dense"] or ()))
    device_lanes = devices if len(devices) <= MAX_DEVICE_LANES else [None]
    lane_of_device = {d: (i if device_lanes != [None] else 0) for i, d in enumerate(devices)}
    fig = Figure(dpi=DPI)
    ax = fig.add_subplot()
    labels: list[tuple[float, str]] = []
    marked = {"spans": 0, "severe": 0, "warning": 0}
    y = 0.0
    if gpu:
        for i, d in enumerate(device_lanes):
            ax.broken_barh([(to_x(lo), (hi - lo) / scale)], (y - 0.35 - 0.4 * i, 0.3), color=IDLE)
            labels.append((y - 0.2 - 0.4 * i, "GPU" if d is None or len(devices) == 1
                           else f"GPU {d}"))
        if zoom["dense"] is None:
            rects: dict[int, list] = {}
            for a, b, d in window["busy"]:
                rects.setdefault(lane_of_device[d], []).append((to_x(a), max((b - a) / scale, px)))
            for lane, r in rects.items():
                ax.broken_barh(r, (y - 0.35 - 0.4 * lane, 0.3), color=BUSY)
                marked["spans"] += len(r)
        else:
            edges = lo + (hi - lo) * np.arange(ZOOM_BINS + 1, dtype=np.float64) / ZOOM_BINS
            x = (edges - host_start) / scale
            for d, busy in zoom["dense"].items():
                share = np.minimum(np.frombuffer(busy, dtype=np.uint64) / np.diff(edges), 1.0)
                base = y - 0.35 - 0.4 * lane_of_device[d]
                _stairs(ax, x, base + 0.3 * share, base, BUSY)
        longest = None
        for g in window["gaps"]:
            mine = g["step"] == step["index"]
            severe = g["class"] == "severe"
            a, b = max(g["start_ns"], lo), min(g["start_ns"] + g["duration_ns"], hi)
            colour = (SEVERE if severe else WARNING) if mine else (
                OTHER_SEVERE if severe else OTHER_WARNING)
            base = y - 0.35 - 0.4 * lane_of_device[g["device"]]
            ax.broken_barh([(to_x(a), max((b - a) / scale, 1.5 * px))], (base, 0.3), color=colour)
            if mine:
                marked["severe" if severe else "warning"] += 1
                if longest is None or g["duration_ns"] > longest["duration_ns"]:
                    longest = g
        if longest is not None:
            a = max(longest["start_ns"], lo)
            b = min(longest["start_ns"] + longest["duration_ns"], hi)
            ax.annotate(f"{longest['duration_ns'] / 1e3:.1f} us gap ({longest['cause']})",
                        (to_x((a + b) / 2), y - 0.05), xytext=(0, 6), textcoords="offset points",
                        ha="center", va="bottom", fontsize=7, color="#182026",
                        arrowprops={"arrowstyle": "-", "color": "#5c7080", "linewidth": 0.6})
        y -= 0.4 * len(device_lanes)
    if window["syncs"]:
        ax.broken_barh([(to_x(max(s[0], lo)), max((min(s[1], hi) - max(s[0], lo)) / scale, px))
                        for s in window["syncs"]], (y - 0.35, 0.3), color=WAIT)
        labels.append((y - 0.2, "host waits (syncs)"))
        y -= 0.4
    own = _own_ranges(window["ranges"], zoom)
    y = _draw_ranges(ax, own, zoom["thread"], y, to_x, px, labels)
    ax.axvline(to_x(zoom["host"][0]), color="#5c7080", linewidth=0.6, linestyle=":")
    ax.axvline(to_x(zoom["host"][1]), color="#5c7080", linewidth=0.6, linestyle=":")
    ax.set_xlim(to_x(lo), to_x(hi))
    ax.set_xlabel(f"time since the step began on the host, {unit}")
    role = "Slowest step" if zoom["role"] == "slowest" else "Typical step (median host time)"
    title = f"{role}: {step['name']}, host {_f(step['host_ms'], '.3f')} ms"
    g = step.get("gaps")
    if gpu and g is not None:
        title += (f", GPU busy {_f(step['gpu_ms'], '.3f')} ms ({_f(g['busy_pct'], '.1f')}%); "
                  f"{_count(g['count'], 'gap')}: {g['severe']} severe (red), {g['warning']} "
                  "warning (orange)")
    notes = []
    if gpu and zoom["dense"] is not None:
        notes.append(f"{window['busy_count']} busy intervals: blue is the busy share of each "
                     "pixel column")
    elif gpu:
        notes.append("blue: GPU busy, grey: idle; faded marks: gaps of the steps around it")
    if window.get("severe_only"):
        notes.append(f"{window['gap_count']} severe gaps marked, warnings not")
    elif window["gap_count"] > len(window["gaps"]):
        notes.append(f"{window['gap_count'] - len(window['gaps'])} more gaps not marked")
    if window["range_count"] > len(window["ranges"]):
        notes.append(f"{window['range_count'] - len(window['ranges'])} more ranges not drawn")
    if notes:
        title += "\n" + "; ".join(notes)
    _finish(fig, ax, labels, min(y, -0.4), 0.18, title, 9)
    alt = f"Zoom on the {zoom['role']} step {step['name']}: "
    if gpu:
        alt += (f"{marked['spans']} busy intervals drawn, {marked['severe']} severe and "
                f"{marked['warning']} warning gaps of the step marked, ")
    alt += f"{len(own)} ranges"
    return png(fig, alt), marked


# -- per step ----------------------------------------------------------------------

def _steps_picture(Figure, summary: dict[str, Any], columns: dict[str, Any] | None) -> str:
    fig = steps_figure(Figure, summary, columns)
    return png(fig, f"Per step: GPU busy and idle time of {_count(fig.bars, 'step')}")


def steps_figure(Figure, summary: dict[str, Any], columns: dict[str, Any] | None):
    """Busy and idle time per step (a bar per group of steps beyond
    MAX_BARS), from the model's step columns where there are, else from
    the summary; SM and DRAM from the summary where sampled.  The legend
    sits above the plot, never over a bar.  Returns the figure (its `bars`:
    how many steps it shows)."""
    np = _numpy()
    steps = summary["steps"]
    if columns is not None:
        index = columns["index"].astype(np.int64)
        busy = columns["busy_ns"] / 1e6
        idle = columns["idle_ns"] / 1e6
    else:
        steps = [s for s in steps if s["gaps"] is not None]
        index = np.array([s["index"] for s in steps], dtype=np.int64)
        busy = np.array([s["gaps"]["busy_ms"] for s in steps], dtype=np.float64)
        idle = np.array([s["gaps"]["idle_ms"] for s in steps], dtype=np.float64)
    sampled = summary.get("sm") is not None or summary.get("dram") is not None
    curves = [(np.array([np.nan if s.get(key) is None else s[key] for s in steps],
                        dtype=np.float64), colour, marker, label)
              for key, colour, marker, label in (("sm_active_pct", SM, "o", "SM active %"),
                                                 ("dram_pct", DRAM, "s", "DRAM %"))
              if sampled and any(s.get(key) is not None for s in steps)]
    size = max(-(-len(busy) // MAX_BARS), 1)  # steps per bar

    def grouped(values):
        """The mean of each run of `size` values (NaN left out)."""
        padded = np.full(-(-len(values) // size) * size, np.nan)
        padded[: len(values)] = values
        rows = padded.reshape(-1, size)
        counts = (~np.isnan(rows)).sum(axis=1)
        return np.where(counts > 0, np.nansum(rows, axis=1) / np.maximum(counts, 1), np.nan)

    busy, idle = grouped(busy), grouped(idle)
    fig = Figure(dpi=DPI)
    ax = fig.add_subplot()
    axes = [ax]
    x = np.arange(len(busy))
    ax.bar(x, busy, color=BUSY, label="GPU busy")
    ax.bar(x, idle, bottom=busy, color=IDLE, edgecolor="#8a9ba8",
           linewidth=0.5 if size == 1 and len(x) <= MAX_BARS else 0, label="idle (gaps)")
    ax.set_ylabel("ms")
    if size == 1:
        ax.set_xlabel("step")
        if len(x) <= 40:
            ax.set_xticks(x, [str(i) for i in index], fontsize=8)
    else:
        ax.set_xlabel(f"steps, {size} to a bar (their mean)")
        ticks = x[:: max(len(x) // 8, 1)]
        ax.set_xticks(ticks, [str(index[k * size]) for k in ticks], fontsize=8)
    title = "Per step: GPU busy and idle time"
    handles, names = ax.get_legend_handles_labels()
    if curves:
        twin = ax.twinx()
        for values, colour, marker, label in curves:
            twin.plot(x, grouped(values), color=colour, marker=marker, markersize=3, label=label)
        twin.set_ylim(0, 100)
        twin.set_ylabel("%")
        more, more_names = twin.get_legend_handles_labels()
        handles, names = handles + more, names + more_names
        axes.append(twin)
        title += ", SM and DRAM"
    else:
        title += " (SM/DRAM curves: not sampled)"
    # one legend in a row above the plot, under the title: inside it would
    # cover the first or the last bars
    axes[-1].legend(handles, names, loc="lower left", bbox_to_anchor=(0.0, 1.0),
                    ncol=len(handles), fontsize=7, frameon=False, borderaxespad=0.2)
    ax.set_title(title, fontsize=10, pad=20)
    ax.spines[["top"]].set_visible(False)
    _place(fig, axes, 1.5, title_lines=2, left_in=0.8,
           right_in=0.6 if len(axes) > 1 else RIGHT_IN)
    fig.bars = len(index)
    return fig


# -- the section -------------------------------------------------------------------

def timeline_pictures(Figure, summary: dict[str, Any],
                      timeline: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(heading, picture) pairs: the whole run and the zooms (with a
    Profile's time line), then the per-step chart."""
    out = []
    if timeline is not None:
        out.append(("Time line", _overview_picture(Figure, timeline, summary)))
        for zoom in timeline["zooms"]:
            picture, _ = _zoom_picture(Figure, zoom, timeline["gpu"])
            heading = ("Zoom: the slowest step" if zoom["role"] == "slowest"
                       else "Zoom: a typical step")
            out.append((f"{heading} ({zoom['step']['name']})", picture))
    if timeline is not None and timeline["gpu"] and len(timeline["steps"]["index"]):
        out.append(("Per step", _steps_picture(Figure, summary, timeline["steps"])))
    elif timeline is None and any(s["gaps"] is not None for s in summary["steps"]):
        out.append(("Per step", _steps_picture(Figure, summary, None)))
    return out
