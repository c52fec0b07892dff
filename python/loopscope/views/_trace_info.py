"""The report's lines about a trace file a summary came from (loopscope
.analyze): what was read, what was skipped and why, what the file lacks."""
from __future__ import annotations

from typing import Any

from ..files import _formats


def trace_lines(summary: dict[str, Any]) -> list[str]:
    t = summary.get("trace")
    if not t:
        return []
    fmt = _formats.get(t["format"])  # its name and where its SM figures come from
    what = fmt.name if fmt is not None else t["format"]
    version = f", schema {t['schema_version']}" if t.get("schema_version") is not None else ""
    lines = [f"Trace: {what} {t['path']}{version}: {t['events']:,} events read in "
             f"{t['read_s']:.2f} s; steps: {t['steps_found']} ranges matching {t['steps']!r}"]
    if t.get("device") is not None:
        lines.append(f"Device: only GPU {t['device']} analysed (GPUs in the trace: "
                     f"{', '.join(map(str, t['devices']))})")
    skipped = t.get("skipped") or {}
    if skipped:
        parts = [f"{cls} {n} ({t['skip_reasons'].get(cls, '?')})" for cls, n in skipped.items()]
        lines.append(f"Skipped {sum(skipped.values()):,} events with missing or unusable fields: "
                     + "; ".join(parts))
    if t.get("missing_tables"):
        lines.append("Tables not in the export: " + ", ".join(t["missing_tables"]))
    if t.get("duplicate_string_ids"):
        lines.append(f"StringIds holds {t['duplicate_string_ids']:,} ids more than once: each "
                     "name read once (the least of its values)")
    lines += _device_match_lines(t.get("device_match"))
    merged = (summary.get("gaps") or {}).get("merged_below_resolution")
    if merged:
        lines.append(f"Gaps: {merged:,} idle intervals of {t.get('merge_idle_upto_ns')} ns or "
                     "less (below the trace's time resolution) merged, not counted as gaps")
    lines += _fill_lines(summary, t, fmt)
    syncs = summary.get("syncs") or {}
    if syncs.get("sites_unknown"):
        lines.append(f"Sync sites unknown: {syncs['sites_unknown']}")
    elif syncs.get("site_lines"):
        lines.append(f"Sync site lines are {syncs['site_lines']}")
    return lines


def _device_match_lines(match: dict[str, Any] | None) -> list[str]:
    """How deviceProperties were tied to the GPUs the ops ran on, when not
    simply by id (see _kineto.match_devices)."""
    if not match:
        return []
    lines = []
    only = match.get("only_entry")
    if only:
        lines.append(f"Device: the trace's only deviceProperties entry (id {only['entry_id']}) "
                     f"describes GPU {only['device']}, the only GPU its operations ran on")
    if match.get("unmatched"):
        gpus = ", ".join(map(str, match["unmatched"]))
        listed = ", ".join(map(str, match.get("listed") or [])) or "none"
        lines.append(f"Device unmatched: GPU {gpus} has no deviceProperties entry (ids listed: "
                     f"{listed}): its name and SM figures are unknown")
    return lines


def _fill_lines(summary: dict[str, Any], t: dict[str, Any],
                fmt: _formats.TraceFormat | None) -> list[str]:
    """Why some kernels' fill is unknown: no usable launch geometry, or a
    GPU whose SM figures the file does not give."""
    lines = []
    g = t.get("kernel_geometry") or {}
    missing, bad = g.get("missing", 0), g.get("bad", 0)
    if missing or bad:
        parts = ([f"{missing:,} without a launch geometry in the trace"] if missing else []) + \
                ([f"{bad:,} with one that cannot be used ({g.get('why')})"] if bad else [])
        lines.append(f"Kernel fill unknown for {missing + bad:,} of {g.get('kernels', 0):,} "
                     "kernels: " + "; ".join(parts))
    blind = [str(d["id"]) for d in (summary.get("gpu") or {}).get("devices", [])
             if d.get("kernels") and (d.get("sm_count") is None or
                                      d.get("max_threads_per_sm") is None)]
    if blind:
        where = fmt.device_facts if fmt is not None and fmt.device_facts else "device table"
        lines.append(f"Kernel fill unknown on GPU {', '.join(blind)}: the trace's {where} gives "
                     "no SM count and threads per SM for it")
    if t.get("device_facts_not_understood"):
        lines.append(f"Device properties not understood: {t['device_facts_not_understood']:,} "
                     "values, left unknown")
    return lines
