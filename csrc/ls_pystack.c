/* ls_pystack: see ls_pystack.h.  The only file that includes CPython's
 * internal frame header. */
#include "ls_pycodes.h"
#include "ls_pystack.h"

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030F0000 && !defined(Py_GIL_DISABLED)
#define LS_INTERPRETER_FRAMES 1
#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <internal/pycore_frame.h>
#pragma GCC diagnostic pop
#undef Py_BUILD_CORE
#endif

#include <limits.h>

#if PY_VERSION_HEX >= 0x030B0000
static int16_t clamp16(int v)
{
    return (int16_t)(v < 0 ? -1 : v > INT16_MAX ? INT16_MAX : v);
}
#endif

/* Fills one frame from a code object and a byte offset into its code. */
static void describe(ls_frame *out, PyCodeObject *code, int byte_offset)
{
    out->code = ls_pycodes_intern(code);
    out->line = out->end_line = -1;
    out->col = out->end_col = -1;
#if PY_VERSION_HEX >= 0x030B0000
    int line, col, end_line, end_col;
    if (PyCode_Addr2Location(code, byte_offset, &line, &col, &end_line, &end_col)) {
        out->line = line;
        out->end_line = end_line;
        out->col = clamp16(col);
        out->end_col = clamp16(end_col);
    }
#else
    out->line = out->end_line = PyCode_Addr2Line(code, byte_offset);
#endif
}

#ifdef LS_INTERPRETER_FRAMES
static _PyInterpreterFrame *innermost(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x030D0000
    return ts->current_frame;
#else
    return ts->cframe ? ts->cframe->current_frame : NULL;
#endif
}

static PyCodeObject *code_of(_PyInterpreterFrame *f)
{
#if PY_VERSION_HEX >= 0x030D0000
    return _PyFrame_GetCode(f);
#else
    return f->f_code;
#endif
}

int ls_pystack_capture(ls_frame *frames, int max)
{
    PyThreadState *ts = PyGILState_GetThisThreadState();
    if (ts == NULL)
        return 0;
    int n = 0;
    for (_PyInterpreterFrame *f = innermost(ts); f != NULL && n < max; f = f->previous) {
#if PY_VERSION_HEX >= 0x030C0000
        if (f->owner >= FRAME_OWNED_BY_CSTACK) /* C entry shims carry no user code */
            continue;
#endif
        if (_PyFrame_IsIncomplete(f))
            continue;
        PyCodeObject *code = code_of(f);
        if (code == NULL || !PyCode_Check(code))
            continue;
        describe(&frames[n++], code,
                 _PyInterpreterFrame_LASTI(f) * (int)sizeof(_Py_CODEUNIT));
    }
    return n;
}

#elif PY_VERSION_HEX < 0x030B0000 /* 3.10: frame objects are the stack */
#include <frameobject.h>

int ls_pystack_capture(ls_frame *frames, int max)
{
    PyThreadState *ts = PyGILState_GetThisThreadState();
    if (ts == NULL)
        return 0;
    int n = 0;
    for (PyFrameObject *f = ts->frame; f != NULL && n < max; f = f->f_back)
        describe(&frames[n++], f->f_code, f->f_lasti * (int)sizeof(_Py_CODEUNIT));
    return n;
}

#else /* a Python whose frame layout this file does not know: no stacks */
int ls_pystack_capture(ls_frame *frames, int max)
{
    (void)frames;
    (void)max;
    return 0;
}
#endif
