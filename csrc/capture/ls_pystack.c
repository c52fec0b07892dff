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
#include <string.h>

#if PY_VERSION_HEX >= 0x030B0000
#include <opcode.h>
#endif

#if PY_VERSION_HEX >= 0x030B0000
static int16_t clamp16(int v)
{
    return (int16_t)(v < 0 ? -1 : v > INT16_MAX ? INT16_MAX : v);
}
#endif

/* 1 when the instruction at `byte_offset` of `code` is one that tests an
 * object's truth (calls its __bool__): the jumps of if / while / assert /
 * and / or / a comprehension's if and `not` (3.11, 3.12), TO_BOOL (3.13+).
 * The source position cannot say so everywhere: 3.11 gives a comprehension's
 * if the position of the whole comprehension, 3.12 gives `if t.any():` that
 * of the call `t.any()`.  An instruction replaced by line or instruction
 * instrumentation (a debugger, coverage) reads as no truth test. */
static int truth_test_at(PyCodeObject *code, int byte_offset)
{
#if PY_VERSION_HEX >= 0x030B0000
    if (byte_offset < 0 || byte_offset >= (int)(Py_SIZE(code) * (Py_ssize_t)sizeof(_Py_CODEUNIT)))
        return 0;
    int op = _Py_OPCODE(_PyCode_CODE(code)[byte_offset / (int)sizeof(_Py_CODEUNIT)]);
    switch (op) {
#if PY_VERSION_HEX < 0x030C0000
    case POP_JUMP_FORWARD_IF_FALSE:
    case POP_JUMP_FORWARD_IF_TRUE:
    case POP_JUMP_BACKWARD_IF_FALSE:
    case POP_JUMP_BACKWARD_IF_TRUE:
    case JUMP_IF_FALSE_OR_POP:
    case JUMP_IF_TRUE_OR_POP:
    case UNARY_NOT:
        return 1;
#elif PY_VERSION_HEX < 0x030D0000
    case POP_JUMP_IF_FALSE:
    case POP_JUMP_IF_TRUE:
    case INSTRUMENTED_POP_JUMP_IF_FALSE:
    case INSTRUMENTED_POP_JUMP_IF_TRUE:
    case UNARY_NOT:
        return 1;
#else
    case TO_BOOL: /* its specialised forms are for exact bool, int, str, ... */
        return 1;
#endif
    default:
        return 0;
    }
#else
    (void)code;
    (void)byte_offset;
    return 0;
#endif
}

/* Fills one frame from a code object and a byte offset into its code. */
static void describe(ls_frame *out, PyCodeObject *code, int byte_offset)
{
    memset(out, 0, sizeof *out);
    out->code = ls_pycodes_intern(code);
    out->truth_test = (uint8_t)truth_test_at(code, byte_offset);
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
