"""The report's lines about a trace file a summary came from (loopscope
.analyze): what was read, what was skipped and why, what the file lacks."""
from __future__ import annotations

from typing import Any

FORMAT_NAMES = {"kineto": "torch.profiler (Kineto) trace", "nsys": "Nsight Systems export"}


def trace_lines(summary: dict[str, Any]) -> list[str]:
    t = summary.get("trace")
    if not t:
        return []
    what = FORMAT_NAMES.get(t["format"], t["format"])
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
    syncs = summary.get("syncs") or {}
    if syncs.get("sites_unknown"):
        lines.append(f"Sync sites unknown: {syncs['sites_unknown']}")
    elif syncs.get("site_lines"):
        lines.append(f"Sync site lines are {syncs['site_lines']}")
    return lines
