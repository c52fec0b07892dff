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
#include <pthread.h>
#include <stdatomic.h>
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

#if PY_VERSION_HEX >= 0x030B0000
/* PyCode_Addr2Location walks the code's location table from its start:
 * ~3 us a frame at the end of a 400-line function (CPU, 2026-11-30), and a
 * kept call reads up to 16 frames, nearly all of them (code, offset) pairs
 * seen before (GPT-2 generate(): 134 syncs from 6 sites).  So positions
 * found are kept, direct-mapped, each with a copy of the line table it came
 * from: a position is a function of that table, the first line and the
 * offset alone, so an entry is used only when all three are equal (a code
 * object freed and another made at its address, as torch.compile does,
 * cannot read another's lines).  Only the position is kept: a truth test
 * is read live, since instrumentation can rewrite the instruction.  The
 * table is taken with a try-lock, so a callback never waits (a busy table
 * is a miss), and a fork child empties it (ls_pystack_prepare registers
 * that outside any callback: pthread_atfork may allocate). */
#define LS_LOC_SLOTS 1024
#define LS_LOC_ARENA (256 * 1024) /* the line tables' copies; full: all entries go */
typedef struct {
    const void *code;     /* the hash's key and a quick filter */
    const char *table;    /* copy in loc_arena; NULL: an empty slot */
    Py_ssize_t table_size;
    int first_line, byte_offset;
    int line, end_line;
    int16_t col, end_col;
} ls_loc_slot;

static ls_loc_slot locs[LS_LOC_SLOTS];
static char loc_arena[LS_LOC_ARENA];
static size_t loc_arena_used;
static atomic_flag locs_busy = ATOMIC_FLAG_INIT;
static pthread_once_t locs_once = PTHREAD_ONCE_INIT;

static void locs_empty(void)
{
    memset(locs, 0, sizeof locs);
    loc_arena_used = 0;
}
static void locs_empty_in_child(void)
{
    locs_empty();
    atomic_flag_clear(&locs_busy);
}
static void locs_watch_forks(void) { pthread_atfork(NULL, NULL, locs_empty_in_child); }

/* The source position of `byte_offset` in `code`, kept under the address
 * `key` (the code's own but in the test hooks): 1, or 0 when CPython gives
 * none. */
static int locate_as(const void *key, PyCodeObject *code, int byte_offset, int *line, int *col,
                     int *end_line, int *end_col)
{
    const char *table = PyBytes_AS_STRING(code->co_linetable);
    Py_ssize_t size = PyBytes_GET_SIZE(code->co_linetable);
    uint64_t h = (uint64_t)(uintptr_t)key ^ ((uint64_t)(uint32_t)byte_offset * 0x9e3779b97f4a7c15ULL);
    ls_loc_slot *slot = &locs[(h ^ (h >> 29)) & (LS_LOC_SLOTS - 1)];
    int held = !atomic_flag_test_and_set_explicit(&locs_busy, memory_order_acquire);
    if (held && slot->table != NULL && slot->code == key && slot->byte_offset == byte_offset &&
        slot->first_line == code->co_firstlineno && slot->table_size == size &&
        memcmp(slot->table, table, (size_t)size) == 0) {
        *line = slot->line;
        *end_line = slot->end_line;
        *col = slot->col;
        *end_col = slot->end_col;
        atomic_flag_clear_explicit(&locs_busy, memory_order_release);
        return 1;
    }
    int found = PyCode_Addr2Location(code, byte_offset, line, col, end_line, end_col);
    if (held) {
        if (found && (size_t)size <= LS_LOC_ARENA) {
            if (loc_arena_used + (size_t)size > LS_LOC_ARENA)
                locs_empty();
            memcpy(loc_arena + loc_arena_used, table, (size_t)size);
            *slot = (ls_loc_slot){key, loc_arena + loc_arena_used, size, code->co_firstlineno,
                                  byte_offset, *line, *end_line, clamp16(*col), clamp16(*end_col)};
            loc_arena_used += (size_t)size;
        }
        atomic_flag_clear_explicit(&locs_busy, memory_order_release);
    }
    return found;
}

void ls_pystack_prepare(void) { pthread_once(&locs_once, locs_watch_forks); }

int ls_pystack_locate_as(const void *key, void *code, int byte_offset, int position[4])
{
    ls_pystack_prepare();
    if (!PyCode_Check((PyObject *)code))
        return 0;
    return locate_as(key, (PyCodeObject *)code, byte_offset, &position[0], &position[1],
                     &position[2], &position[3]);
}
#else
void ls_pystack_prepare(void) {}

int ls_pystack_locate_as(const void *key, void *code, int byte_offset, int position[4])
{
    (void)key;
    (void)code;
    (void)byte_offset;
    (void)position;
    return 0;
}
#endif

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
    if (locate_as(code, code, byte_offset, &line, &col, &end_line, &end_col)) {
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
