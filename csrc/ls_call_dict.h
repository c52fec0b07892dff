/* ls_call_dict: a recorded blocking call (ls_calls) as a Python dict, with
 * its Python stack read through the code table it points into. */
#ifndef LS_CALL_DICT_H
#define LS_CALL_DICT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ls_records.h"

/* {api, driver, wait_class, enter_ns, exit_ns, thread_id, correlation_id,
 * launches_before, frames: [(file, function, first_line, line, end_line,
 * col, end_col, truth_test)]}, innermost frame first; file and function None
 * when the code table had no room; truth_test a bool (ls_frame).  A new reference, or NULL with an exception set. */
PyObject *ls_call_dict(const ls_call *call, const ls_code_table *codes);

#endif
