"""The ranks of a torch.distributed profile as report lines and HTML: the
straggler first, then a rank table and a rank x step table.  Reads
summary["rank"], ["world_size"], ["distributed"], ["ranks"] and ["skew"]
(_distributed.py, _ranks.py); derives nothing."""
from __future__ import annotations

import html
from typing import Any

from ..figures._names import clip
from ..figures._ranks import above_error, backlog_text, balance_text, straggler_text

# The step-name column of the per-step table: as wide as the longest name
# shown, at most STEP_NAME_MAX (a longer one is clipped with "..."; a name
# cut silently at 14 made "ProfilerStep#10" read "ProfilerStep#1").
STEP_NAME_MIN, STEP_NAME_MAX = 14, 40

MAX_STEP_ROWS = 24
MAX_RANK_COLUMNS = 8  # per-rank cells in the step table up to this many ranks


def _f(value: Any, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _skew(value: float | None, skew: dict[str, Any]) -> str:
    """A skew, or "~" when it is within the clocks' residual error."""
    if value is None:
        return "-"
    return f"{value:.1f}" if above_error(value, skew) else "~"


def _shown_steps(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    if len(rows) <= MAX_STEP_ROWS:
        return rows, 0
    return rows[: MAX_STEP_ROWS - 4] + rows[-4:], len(rows) - MAX_STEP_ROWS


def _gather_line(summary: dict[str, Any]) -> str:
    d = summary.get("distributed") or {}
    size = summary.get("world_size")
    line = f"Rank {summary['rank']}" + (f" of {size}" if size is not None
                                         else " (the trace does not say of how many)")
    if d.get("backend"):
        line += f" ({d['backend']})"
    if d.get("gather") is not None:  # a trace read offline gathered nothing
        line += f"; gathering: {d['gather']}"
    skew = summary.get("skew")
    if skew and skew["missing"]:
        by_reason: dict[str, list[int]] = {}
        for m in skew["missing"]:
            by_reason.setdefault(m["reason"], []).append(m["rank"])
        line += "; missing: " + "; ".join(
            f"rank{'s' if len(ranks) > 1 else ''} {rank_spans(ranks)} {why}"
            for why, ranks in by_reason.items())
    return line


def rank_spans(ranks: list[int]) -> str:
    """[0, 2, 3, 4, 9] -> "0, 2-4, 9" (a job of thousands of ranks)."""
    spans: list[list[int]] = []
    for r in sorted(ranks):
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def head_lines(summary: dict[str, Any]) -> list[str]:
    """Right under the report's title: the straggler, then how the ranks
    were gathered (nothing when not distributed)."""
    if summary.get("rank") is None:
        return []
    skew = summary.get("skew")
    lines = []
    far = (summary.get("job") or {}).get("apart")  # traces read offline of several runs
    if far:
        lines.append(f"WARNING: {far}")
    if skew and skew["straggler"]:
        lines.append("STRAGGLER: " + straggler_text(skew["straggler"]))
    elif skew and skew.get("balance"):
        lines.append("BALANCED: " + balance_text(skew["balance"]))
    elif skew and skew.get("backlog"):
        lines.append("NOT MEASURED: " + backlog_text(skew["backlog"]))
    lines.append(_gather_line(summary))
    return lines


def _cell(row: dict[str, Any], r: int) -> str:
    host = row["host_ms"][r]
    if host is None:
        return "-"
    wait = row["wait_ms"][r] if row["wait_ms"] is not None else None
    return _f(host) if wait is None else f"{host:.3f}/{wait:.3f}"


def table_lines(summary: dict[str, Any]) -> list[str]:
    """The rank table and the rank x step table (rank 0 of a gathered
    profile only)."""
    skew, ranks = summary.get("skew"), summary.get("ranks")
    if skew is None or ranks is None:
        return []
    error = skew["clock"]["error_us"]
    lines = ["", f"Ranks ({len(skew['ranks_present'])} of {skew['world_size']} gathered; clocks "
                 + (f"aligned to +-{error:g} us, skews within that shown as ~)" if error is not None
                    else "not aligned)")]
    if summary.get("job"):  # read from traces: say how their clocks were put together
        lines.append(f"Clocks: {skew['clock']['method']}")
    lines.append(f"{'rank':>5}  {'verdict':<19} {'own verdict':<17} {'host ms':>9} {'busy%':>6} "
                 f"{'comm%':>6} {'wait ms':>9} {'last':>5}  cause")
    missing: list[int] = []  # a run of missing ranks with one reason: one line
    for i, (entry, cross) in enumerate(zip(ranks, skew["per_rank"])):
        if cross is None:
            missing.append(entry["rank"])
            after = ranks[i + 1] if i + 1 < len(ranks) else None
            if after is None or "missing" not in after or after["missing"] != entry["missing"]:
                lines.append(f"{rank_spans(missing):>5}  MISSING: {entry.get('missing')}")
                missing = []
            continue
        lines.append(
            f"{entry['rank']:>5}  {cross['verdict'] or '-':<19} {entry['verdict'] or '-':<17} "
            f"{_f(entry['host_ms']):>9} {_f(entry['busy_pct'], '.1f'):>6} "
            f"{_f(entry['comm_pct'], '.1f'):>6} {_f(cross['wait_ms']):>9} "
            f"{cross['last_arrivals']:>5}  {entry['cause'] or '-'}"
            + (f"  (waits for rank {cross['waits_for']})" if cross["waits_for"] is not None else ""))
    rows = skew["steps"]
    if rows:
        per_rank = skew["world_size"] <= MAX_RANK_COLUMNS
        shown, hidden = _shown_steps(rows)
        width = min(max([STEP_NAME_MIN] + [len(str(r["name"])) for r in shown]), STEP_NAME_MAX)
        head = (f"{'step':>5} {'name':<{width}} {'start skew us':>13} {'end skew us':>11} "
                f"{'last start':>10} {'last end':>8} {'last arrival':>12}")
        if per_rank:
            head += "  " + " ".join(f"{'rank ' + str(r):>15}" for r in range(skew["world_size"]))
        lines += ["", "Per step" + (" (per rank: host ms, or host ms/wait ms with the collectives "
                                    "timed)" if per_rank else "") + ":", head]
        for i, row in enumerate(shown):
            if hidden and i == MAX_STEP_ROWS - 4:
                lines.append(f"{'...':>5} ({hidden} more steps)")
            line = (f"{row['index']:>5} {clip(str(row['name']), width):<{width}} "
                    f"{_skew(row['start_skew_us'], skew):>13} {_skew(row['end_skew_us'], skew):>11} "
                    f"{_f(row['last_start_rank'], 'd'):>10} {_f(row['last_end_rank'], 'd'):>8} "
                    f"{_f(row['last_arrival_rank'], 'd'):>12}")
            if per_rank:
                line += "  " + " ".join(f"{_cell(row, r):>15}" for r in range(skew["world_size"]))
            lines.append(line)
    for note in skew["not_measured"]:
        lines.append(f"Not measured: {note}")
    return lines


# -- trace ----------------------------------------------------------------------
RANK_PID = 1000  # + rank: one trace process per rank, after the host and the GPUs


def rank_trace_events(summary: dict[str, Any], t0_ns: int, profile: int) -> list[dict[str, Any]]:
    """Chrome trace events of every other rank's steps, aligned to this
    (rank 0's) profile clock, one process per rank; [] unless this summary
    gathered the ranks.  t0_ns: the trace's time zero on the same clock."""
    skew = summary.get("skew")
    if not skew:
        return []
    events: list[dict[str, Any]] = []
    error = skew["clock"]["error_us"]
    for row in skew["steps"]:
        for r, span in enumerate(row["aligned_ns"]):
            if span is None or r == 0:
                continue
            events.append({
                "ph": "X", "pid": RANK_PID + r, "tid": 1, "name": row["name"], "cat": "rank step",
                "ts": round((span[0] - t0_ns) / 1e3, 3), "dur": round((span[1] - span[0]) / 1e3, 3),
                "args": {"rank": r, "step": row["index"], "profile": profile,
                         "host_ms": row["host_ms"][r],
                         "wait_ms": None if row["wait_ms"] is None else row["wait_ms"][r]},
            })
    for r in sorted({e["args"]["rank"] for e in events}):
        events.append({"ph": "M", "name": "process_name", "pid": RANK_PID + r,
                       "args": {"name": f"rank {r}: steps on rank 0's clock (+-{error:g} us)"}})
    return events


# -- HTML -------------------------------------------------------------------------
_TABLE = "border-collapse:collapse;font-size:12px;margin:4px 0 10px 0"
_TH = "text-align:right;padding:2px 8px;border-bottom:1px solid #8a9ba8;font-weight:600"
_TD = "text-align:right;padding:1px 8px;border-bottom:1px solid #eef1f3;font-family:monospace"
_NOTE = "color:#5c7080;font-size:12px;margin:2px 0"


def _e(value: Any) -> str:
    return html.escape(str(value))


def _table(head: list[str], rows: list[list[str]]) -> str:
    out = [f'<table style="{_TABLE}"><tr>' + "".join(f'<th style="{_TH}">{_e(h)}</th>'
                                                      for h in head) + "</tr>"]
    out += ["<tr>" + "".join(f'<td style="{_TD}">{_e(c)}</td>' for c in row) + "</tr>"
            for row in rows]
    return "".join(out) + "</table>"


def ranks_head_html(summary: dict[str, Any]) -> str:
    """Above the verdict: the straggler, then how the ranks were gathered
    ("" when not distributed)."""
    if summary.get("rank") is None:
        return ""
    skew = summary.get("skew")
    out = []
    if skew and skew["straggler"]:
        out.append('<div style="border-left:6px solid #c23030;padding:4px 10px;margin:6px 0">'
                   f'<b>Straggler:</b> {_e(straggler_text(skew["straggler"]))}</div>')
    elif skew and skew.get("balance"):
        out.append(f'<div style="{_NOTE}"><b>Balanced:</b> '
                   f'{_e(balance_text(skew["balance"]))}</div>')
    elif skew and skew.get("backlog"):
        out.append(f'<div style="{_NOTE}"><b>Not measured:</b> '
                   f'{_e(backlog_text(skew["backlog"]))}</div>')
    out.append(f'<div style="{_NOTE}">{_e(_gather_line(summary))}</div>')
    return "".join(out)


def ranks_html(summary: dict[str, Any]) -> str:
    """The rank table and the rank x step table, as HTML (rank 0 of a
    gathered profile; "" elsewhere)."""
    skew, ranks = summary.get("skew"), summary.get("ranks")
    if skew is None or ranks is None:
        return ""
    out = []
    error = skew["clock"]["error_us"]
    out.append(f'<h4 style="margin:12px 0 2px 0">Ranks ({len(skew["ranks_present"])} of '
               f'{skew["world_size"]})</h4>')
    rows = []
    for entry, cross in zip(ranks, skew["per_rank"]):
        if cross is None:
            rows.append([str(entry["rank"]), "MISSING", entry.get("missing", ""), "", "", "", "",
                         "", ""])
            continue
        rows.append([str(entry["rank"]), cross["verdict"] or "-", entry["verdict"] or "-",
                     _f(entry["host_ms"]), _f(entry["busy_pct"], ".1f"), _f(entry["comm_pct"], ".1f"),
                     _f(cross["wait_ms"]), str(cross["last_arrivals"]),
                     (entry["cause"] or "-") + (f" (waits for rank {cross['waits_for']})"
                                                if cross["waits_for"] is not None else "")])
    out.append(_table(["rank", "verdict", "own verdict", "host ms", "busy %", "comm %", "wait ms",
                       "last arrivals", "cause"], rows))
    if skew["steps"]:
        width = skew["world_size"]
        per_rank = width <= MAX_RANK_COLUMNS
        shown, hidden = _shown_steps(skew["steps"])
        rows = []
        for i, row in enumerate(shown):
            if hidden and i == MAX_STEP_ROWS - 4:
                rows.append(["...", f"{hidden} more steps"] + [""] * (5 + (width if per_rank else 0)))
            cells = [str(row["index"]), row["name"], _skew(row["start_skew_us"], skew),
                     _skew(row["end_skew_us"], skew), _f(row["last_start_rank"], "d"),
                     _f(row["last_end_rank"], "d"), _f(row["last_arrival_rank"], "d")]
            if per_rank:
                cells += [_cell(row, r) for r in range(width)]
            rows.append(cells)
        head = ["step", "name", "start skew us", "end skew us", "last start", "last end",
                "last arrival"] + ([f"rank {r}" for r in range(width)] if per_rank else [])
        out.append('<h4 style="margin:12px 0 2px 0">Ranks per step</h4>')
        out.append(f'<div style="{_NOTE}">Clocks '
                   + (f"aligned to +-{error:g} us; skews within that shown as ~." if error is not None
                      else "not aligned.")
                   + (" Per rank: host ms, or host ms/wait ms with the collectives timed."
                      if per_rank else "") + "</div>")
        out.append(_table(head, rows))
    out += [f'<div style="{_NOTE}">Not measured: {_e(n)}</div>' for n in skew["not_measured"]]
    return "".join(out)
