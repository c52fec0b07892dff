"""The notebook view's time line pictures (_pictures.py): the whole run
shows how busy the GPU was (a mostly idle loop is not a solid bar), a zoom
on the slowest step and on a typical one shows each gap with the step's
severe ones in red, a CPU-only run shows the user's ranges, and the view
stays bounded whatever the run's size.

Expected figures come from the synthetic records themselves (plain Python
over the injected kernels and the scripted clock) and from the summary;
what a picture shows is read back from its PNG pixels."""
from __future__ import annotations

import base64
import io
import os
import re
from pathlib import Path

import pytest

import loopscope
from loopscope import _core, _testhooks
from loopscope.files import _recording
from loopscope.readers import _replay
from loopscope.views import _pictures

np = pytest.importorskip("numpy", reason="needs matplotlib (the test extra) for the pictures")
pytest.importorskip("matplotlib", reason="needs matplotlib (the test extra) for the pictures")
from matplotlib import image  # noqa: E402

TICK = 50_000      # ns per clock read: a step's host time is its reads times this
KERNEL = 10_000    # ns
# per step: extra clock reads (host time) and the device gaps between its 4 kernels, us
EXTRA_READS = [0, 3, 8, 1, 2]
INNER_GAPS_US = [[5, 5, 5], [80, 30, 5], [80, 60, 90], [30, 30, 5], [60, 5, 25]]
SLOWEST, TYPICAL = 2, 4  # most extra reads; the median of [0, 3, 8, 1, 2] is 2 (step 4)


def run_steps(prof, device1_step: int = 2) -> list[tuple]:
    """The synthetic loop: each step launches 4 kernels (one clock read
    each), its first kernel 5 us after its first launch, then the step's
    inner gaps; step `device1_step` also runs two kernels 100 us apart on
    device 1.  Returns (kernel record, step) pairs."""
    kernels, apis, corr = [], [], 1
    for i, gaps in enumerate(INNER_GAPS_US):
        with prof.step():
            launches = [_core.now_ns() for _ in range(4)]
            for _ in range(EXTRA_READS[i]):
                _core.now_ns()
            t = launches[0] + 5_000
            for j, launch in enumerate(launches):
                apis.append((launch, launch + 1, corr))
                kernels.append(((t, t + KERNEL, 0, 7, corr, f"k{j}"), i))
                corr += 1
                t += KERNEL + (gaps[j] * 1_000 if j < 3 else 0)
            if i == device1_step:
                for start in (launches[0] + 20_000, launches[0] + 130_000):
                    apis.append((launches[0], launches[0] + 1, corr))
                    kernels.append(((start, start + KERNEL, 1, 3, corr, "other_gpu"), i))
                    corr += 1
    _testhooks._inject("api", apis)
    _testhooks._inject("kernel", [k for k, _ in kernels])
    return kernels


def severe_per_step(kernels: list[tuple], steps: int) -> list[int]:
    """Severe gaps (> 50 us) per step, in plain Python: per device, the gaps
    between consecutive kernels (none overlap here), each counted for the
    step of the kernel that ends it."""
    out = [0] * steps
    for device in (0, 1):
        mine = sorted((k, step) for k, step in kernels if k[2] == device)
        for (prev, _), (nxt, step) in zip(mine, mine[1:]):
            if nxt[0] - prev[1] > 50_000:
                out[step] += 1
    return out


def pictures(h: str) -> dict[str, bytes]:
    return {alt: base64.b64decode(data) for alt, data in
            re.findall(r'<img alt="([^"]*)"[^>]* src="data:image/png;base64,([^"]+)"', h)}


def rgb_of(png: bytes):
    return (image.imread(io.BytesIO(png))[:, :, :3] * 255).round().astype(int)


def near(rgb, hex_colour: str, tolerance: int = 6):
    want = [int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]
    return (abs(rgb - want) <= tolerance).all(axis=2)


def patches(mask) -> int:
    """Connected areas (4-neighbour) of True pixels."""
    seen = np.zeros_like(mask, dtype=bool)
    count = 0
    for y, x in zip(*np.nonzero(mask)):
        if seen[y, x]:
            continue
        count += 1
        todo = [(y, x)]
        seen[y, x] = True
        while todo:
            cy, cx = todo.pop()
            for ny, nx in ((cy + 1, cx), (cy - 1, cx), (cy, cx + 1), (cy, cx - 1)):
                if (0 <= ny < mask.shape[0] and 0 <= nx < mask.shape[1] and mask[ny, nx]
                        and not seen[ny, nx]):
                    seen[ny, nx] = True
                    todo.append((ny, nx))
    return count


@pytest.fixture
def loop(test_clock):
    test_clock.set(1_000_000_000, TICK)
    with loopscope.profile() as prof:
        kernels = run_steps(prof)
    return prof, kernels


def test_the_zooms_show_the_slowest_and_a_typical_step(loop):
    prof, kernels = loop
    s = prof.summary()
    host = [st["host_ms"] for st in s["steps"]]
    # the synthetic clock: 4 launches and the extra reads make each step's host time
    assert host == [pytest.approx((5 + extra) * TICK / 1e6) for extra in EXTRA_READS]
    assert max(range(5), key=host.__getitem__) == SLOWEST
    assert sorted(range(5), key=host.__getitem__)[2] == TYPICAL
    h = prof._repr_html_()
    assert (h.index(">Time line<") < h.index(f">Zoom: the slowest step (Step_{SLOWEST})<")
            < h.index(f">Zoom: a typical step (Step_{TYPICAL})<") < h.index(">Per step<"))
    severe = severe_per_step(kernels, 5)
    assert [st["gaps"]["severe"] for st in s["steps"]] == severe
    assert severe[SLOWEST] == 5  # the gap into it, 80, 60, 90 us, and device 1's 90 us
    shown = pictures(h)
    for role, index in (("slowest", SLOWEST), ("typical", TYPICAL)):
        alt = next(a for a in shown if a.startswith(f"Zoom on the {role} step Step_{index}:"))
        step = s["steps"][index]
        assert (f"{step['gaps']['severe']} severe and {step['gaps']['warning']} warning gaps of "
                "the step marked") in alt
        # the picture itself: one red patch per severe gap of the step, no other red
        assert patches(near(rgb_of(shown[alt]), _pictures.SEVERE)) == severe[index]
        # each busy interval of the window drawn: the zoom is not a solid bar
        assert int(re.search(r"(\d+) busy intervals drawn", alt).group(1)) >= 4


def test_the_whole_run_shows_how_busy_the_gpu_was():
    """The bundled recording is 22.8% busy: in the whole-run picture the
    GPU lane is about that much blue, the rest idle grey (it used to be an
    almost solid blue bar)."""
    data = _recording.bundled_demo()
    if data is None:
        pytest.skip("no bundled demo recording in this checkout")
    prof = _replay.replay(data)
    busy = prof.summary()["gpu"]["busy_pct"] / 100
    shown = pictures(prof._repr_html_())
    alt = next(a for a in shown if a.startswith("Time line of the whole run"))
    rgb = rgb_of(shown[alt])
    blue, grey = near(rgb, _pictures.BUSY, 40), near(rgb, _pictures.IDLE, 4)
    lane = blue | grey | near(rgb, _pictures.SEVERE, 40)
    assert lane.sum() > 10_000
    assert abs(blue.sum() / lane.sum() - busy) < 0.08


def test_a_cpu_run_shows_the_users_ranges(test_clock):
    """No GPU: the ranges table, and the host's time line with the ranges
    of the slowest step in its zoom."""
    with loopscope.profile() as prof:
        for i in range(3):
            with prof.step():
                with loopscope.range("data"):
                    pass
                with loopscope.range("forward"):
                    for j in range(2):
                        with loopscope.range(f"layer_{j}"):
                            pass
                if i == 1:
                    with loopscope.range("slow"):
                        for _ in range(20):
                            _core.now_ns()
                    with loopscope.range("cost $x_{$ b"):  # not read as TeX by matplotlib
                        pass
    s = prof.summary()
    assert s["gpu"] is None
    h = prof._repr_html_()
    rows = re.findall(r"<tr><td[^>]*>(?:&nbsp;)*([a-z_0-9]+)</td><td[^>]*>(\d+)</td>", h)
    assert rows == [("data", "3"), ("forward", "3"), ("layer_0", "3"), ("layer_1", "3"),
                    ("slow", "1")]
    assert "cost $x_{$ b</td>" in h
    assert ">Time line<" in h and ">Zoom: the slowest step (Step_1)<" in h
    timeline = _pictures.timeline_of(prof)
    slowest = timeline["zooms"][0]
    names = [r[6] for r in slowest["window"]["ranges"]]
    for name in ("Step_1", "data", "forward", "layer_0", "layer_1", "slow", "cost $x_{$ b"):
        assert name in names
    shown = pictures(h)
    alt = next(a for a in shown if a.startswith("Zoom on the slowest step Step_1:"))
    assert alt.endswith(f"{len(names)} ranges")
    assert near(rgb_of(shown[alt]), _pictures._range_colour("slow"), 2).sum() > 500
    whole = next(a for a in shown if a.startswith("Host time line of the whole run"))
    assert whole == "Host time line of the whole run: 3 steps, 14 ranges drawn"


@pytest.mark.parametrize("shape", ["10 steps x 20k kernels", "20k steps x 1 kernel"])
def test_the_view_is_bounded_whatever_the_size(test_clock, shape):
    """Many ops or many steps: the model hands over at most ZOOM_LIMIT items
    of each kind, dense zooms draw busy share per pixel column, the
    per-step chart groups steps, and the page stays the same size."""
    steps, per_step = (10, 20_000) if shape.startswith("10 ") else (20_000, 1)
    # a step's device time is 0.9 ms of its 2 ms on the host: 20 ns kernels 25 ns apart, or one
    length, pitch = (20, 45) if per_step > 1 else (900_000, 900_000)
    test_clock.set(1_000_000_000, 1_000_000)
    apis, kernels, corr = [], [], 1
    with loopscope.profile() as prof:
        for _ in range(steps):
            with prof.step():
                t = _core.now_ns()
                for _ in range(per_step):
                    apis.append((t, t + 1, corr))
                    kernels.append((t, t + length, 0, 7, corr, "k"))
                    t += pitch
                    corr += 1
        _testhooks._inject("api", apis)
        _testhooks._inject("kernel", kernels)
    timeline = _pictures.timeline_of(prof)
    for zoom in timeline["zooms"]:
        for kind in ("busy", "gaps", "ranges", "syncs"):
            assert len(zoom["window"][kind]) <= _pictures.ZOOM_LIMIT
        assert (zoom["dense"] is not None) == (per_step > _pictures.MAX_SPANS_DRAWN)
    h = prof._repr_html_()
    shown = pictures(h)
    assert len(shown) == 5 and len(h) < 1_000_000
    per_step_alt = next(a for a in shown if a.startswith("Per step"))
    assert per_step_alt == f"Per step: GPU busy and idle time of {steps} steps"
    whole = rgb_of(shown[next(a for a in shown if a.startswith("Time line"))])
    assert near(whole, _pictures.BUSY, 40).sum() > 1_000
    if os.environ.get("LOOPSCOPE_KEEP_PICTURES"):  # for a look: the pictures as files
        for i, png in enumerate(shown.values()):
            Path(os.environ["LOOPSCOPE_KEEP_PICTURES"], f"{steps}x{per_step}_{i}.png").write_bytes(png)


def test_gpu_work_without_steps_gets_the_whole_run_only(test_clock):
    """No step marked: the whole run is drawn (its ranges too), and there
    is no step to zoom on nor a per-step chart."""
    with loopscope.profile() as prof:
        with loopscope.range("generate"):
            launch = _core.now_ns()
        _testhooks._inject("api", [(launch, launch + 1, 1), (launch, launch + 1, 2)])
        _testhooks._inject("kernel", [(launch + 1_000, launch + 2_000, 0, 7, 1, "a"),
                                 (launch + 90_000, launch + 91_000, 0, 7, 2, "b")])
    h = prof._repr_html_()
    busy = 100 * 2 * 1_000 / 90_000  # two 1 us kernels from the first start to the last end
    assert list(pictures(h)) == [
        "Gap histogram: 1 gap, 1 severe",
        f"Time line of the whole run: GPU busy {busy:.1f}%, 0 steps, 1 ranges drawn"]
    assert ">Zoom" not in h and ">Per step<" not in h


# -- issue 28: the per-step legend, a zoom's own ranges, one colour a layer -------

def test_the_per_step_legend_covers_no_bar(loop):
    """The legend (GPU busy, idle, SM %, DRAM %) sits above the plot: its box
    meets no bar, the first and the last included, and stays in the figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    prof, _ = loop
    summary = prof.summary()
    for s in summary["steps"]:  # curves too, as where SM/DRAM were sampled
        s["sm_active_pct"], s["dram_pct"] = 40.0, 90.0
    summary["sm"] = summary["sm"] or {"active_pct": 40.0}
    fig = _pictures.steps_figure(Figure, summary, None)
    renderer = FigureCanvasAgg(fig).get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert len(legends) == 1
    legend = legends[0].get_window_extent(renderer)
    assert [t.get_text() for t in legends[0].get_texts()] == ["GPU busy", "idle (gaps)",
                                                              "SM active %", "DRAM %"]
    bars = [p.get_window_extent(renderer) for p in fig.axes[0].patches]
    assert len(bars) == 2 * len(summary["steps"])        # busy and idle, per step
    assert not any(legend.overlaps(bar) for bar in bars)
    curves = [line.get_window_extent(renderer) for line in fig.axes[1].lines]
    assert not any(legend.overlaps(c) for c in curves)
    width, height = fig.bbox.width, fig.bbox.height
    assert 0 <= legend.x0 and legend.x1 <= width and 0 <= legend.y0 and legend.y1 <= height
    title = fig.axes[0].title.get_window_extent(renderer)
    assert not legend.overlaps(title) and title.y1 <= height


def test_a_zoom_on_a_long_first_step_draws_only_its_own_ranges(test_clock):
    """A first step of 2,000 reads, then four of 10: the zoom's padding
    around the first (a 40th of it, 50 reads) holds all the later steps; their "Optimizer.step" ranges are
    not drawn under the first step."""
    test_clock.set(1_000_000, 50_000)
    with loopscope.profile() as prof:
        for i in range(5):
            with prof.step():
                for _ in range(2000 if i == 0 else 1):
                    _core.now_ns()
                with loopscope.range("Optimizer.step"):   # 6 reads: over a pixel
                    for _ in range(5):
                        _core.now_ns()
    timeline = _pictures.timeline_of(prof)
    slowest = timeline["zooms"][0]
    assert slowest["step"]["index"] == 0
    host_start, host_end = slowest["host"]
    window = slowest["window"]["ranges"]
    in_window = [r for r in window if r[6] == "Optimizer.step"]
    assert len(in_window) == 5                         # the padding holds them all
    own = [r for r in in_window if host_start <= r[1] <= host_end]
    assert len(own) == 1
    shown = pictures(prof._repr_html_())
    alt = next(a for a in shown if a.startswith("Zoom on the slowest step Step_0:"))
    drawn = len(own) + sum(1 for r in window if r[5] is not None)  # its range and the steps
    assert alt.endswith(f"{drawn} ranges")


def test_one_layer_keeps_one_colour_in_every_step(test_clock):
    """Ranges named with their step's prefix ("Step_0/Layer_0", as
    loopscope.instrument names them) are coloured by the layer, not by the
    whole name: the same colour in every step."""
    import zlib

    shades = _pictures.RANGE_SHADES
    by_name = {n: shades[zlib.crc32(n.encode()) % len(shades)]
               for n in ("Layer_0", "Step_0/Layer_0", "Step_1/Layer_0", "Step_2/Layer_0")}
    assert len({by_name[f"Step_{i}/Layer_0"] for i in range(3)} - {by_name["Layer_0"]}) >= 1
    with loopscope.profile() as prof:
        for i in range(3):
            with prof.step():
                with loopscope.range(f"Step_{i}/Layer_0"):
                    for _ in range(10):
                        _core.now_ns()
    window = prof.model.window(0, 2**62, kinds=("ranges",))["ranges"]
    assert sorted({r[7] for r in window if r[5] is None}) == ["Layer_0"]
    shown = pictures(prof._repr_html_())
    whole = rgb_of(next(v for a, v in shown.items() if "time line of the whole run" in a.lower()))
    assert near(whole, by_name["Layer_0"], 2).sum() > 300
    for i in range(3):
        other = by_name[f"Step_{i}/Layer_0"]
        if other != by_name["Layer_0"]:
            assert near(whole, other, 2).sum() == 0


def zoom_labels(test_clock, reads):
    """A CPU run whose step i takes reads[i] extra clock reads; the whole
    run's figure, drawn, and its zoom labels with their brackets' centres
    (pixels): [(text, label box, bracket centre x)], and the axes' box."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    test_clock.set(1_000_000, 50_000)
    with loopscope.profile() as prof:
        for n in reads:
            with prof.step():
                for _ in range(n):
                    _core.now_ns()
    t = _pictures.timeline_of(prof)
    fig = _pictures.overview_figure(Figure, t)
    renderer = FigureCanvasAgg(fig).get_renderer()
    ax = fig.axes[0]
    out = []
    for zoom in t["zooms"]:
        text = next(x for x in ax.texts if x.get_text().startswith(f"zoom: {zoom['role']} "))
        scale, _ = _pictures._time_axis(t["t1"] - t["t0"])
        centre = ((zoom["lo"] + zoom["hi"]) / 2 - t["t0"]) / scale
        out.append((text.get_text(), text.get_window_extent(renderer),
                    ax.transData.transform((centre, 0))[0]))
    return out, ax.get_window_extent(renderer)


def test_zoom_labels_at_the_edges_stay_inside_on_one_row(test_clock):
    """Slowest step first, typical step last: both labels inside the axes
    (a centred label at an edge would be cut), on one row (far apart)."""
    reads = [50, 1, 1, 1, 40, 40, 40, 3]  # slowest: step 0; typical (lower median): step 7
    labels, axes = zoom_labels(test_clock, reads)
    assert [t for t, _, _ in labels] == ["zoom: slowest (Step_0)", "zoom: typical (Step_7)"]
    for _, box, _ in labels:
        assert axes.x0 - 1 <= box.x0 and box.x1 <= axes.x1 + 1
    assert labels[0][1].y0 == labels[1][1].y0


def test_a_zoom_label_in_the_middle_is_centred_over_its_bracket(test_clock):
    reads = [2, 2, 30, 2, 2, 2, 2, 2, 2]      # slowest: step 2, a third of the way in
    labels, axes = zoom_labels(test_clock, reads)
    text, box, centre = labels[0]
    assert text == "zoom: slowest (Step_2)"
    assert 0.2 < (centre - axes.x0) / axes.width < 0.45   # well clear of the edges
    assert abs((box.x0 + box.x1) / 2 - centre) < 2


def test_close_zoom_labels_go_on_rows_of_their_own(test_clock):
    """The slowest and the typical step side by side: their labels would
    overlap on one row."""
    reads = [3] * 5 + [16, 10] + [14] * 5    # slowest: step 5; typical: step 6
    labels, _ = zoom_labels(test_clock, reads)
    assert [t for t, _, _ in labels] == ["zoom: slowest (Step_5)", "zoom: typical (Step_6)"]
    (_, a, centre_a), (_, b, centre_b) = labels
    assert abs(centre_a - centre_b) < a.width      # one row would not hold both
    assert not a.overlaps(b) and a.y0 != b.y0
