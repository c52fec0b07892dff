/* ls_trace_export: the Python face of the trace export, Model's
 * write_trace_events: reads the numbering the caller chose (Chrome's small
 * pid/tid ints, shared by the profiles of one file), the op names and the
 * syncs' sites, and hands ls_trace_json's text to a Python write().
 *
 *   write_trace_events(write, t0_ns, profile, threads, host_pid=1, gpu_pid=100,
 *                      names=None, gpu_pids=None, stream_tids=None, lanes=(2, 0),
 *                      sync_sites=None, sync_base=0, site_base=0, call_sites=None,
 *                      call_site_base=0)
 *
 * threads {thread id: tid}: every thread of a range, API record, sync or
 * recorded call not in it yet is added in order of first appearance
 * (ranges, then API records, then syncs, then calls): thread 0 (unknown) gets tid 1, the others the next
 * tid above every tid in use and the lanes.  gpu_pids {device: pid}: the
 * device of the PM samples is added (the next pid) when missing.
 * stream_tids {(device, stream): tid}.  lanes: (sync-record lane tid, gaps
 * lane tid).  names(raw) -> (display, signature, mangled), each a str or
 * None, called once per distinct kernel name.  sync_sites (site_of,
 * site_names, site_args): per sync of the model (in order) the index of its
 * site or -1, and per site the slice's name and its args as JSON members
 * (no braces).  call_sites: per recorded call (in order) the index of its
 * site in the file's call site list, or -1 (written for the calls outside
 * syncs).  sync_base, site_base, call_site_base: numbers taken by earlier
 * profiles of the same file. */
#ifndef LS_TRACE_EXPORT_H
#define LS_TRACE_EXPORT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ls_model.h"
#include "ls_records.h"

/* write_trace_events of the Model whose records and model these are.
 * Returns None, or NULL with an exception set (what write() or names()
 * raised, TypeError/ValueError for bad arguments, MemoryError). */
PyObject *ls_trace_export_write(const ls_records *r, const ls_model *m, PyObject *args,
                                PyObject *kwargs);

#endif
