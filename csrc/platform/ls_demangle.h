/* ls_demangle: C++ symbol names (Itanium ABI, as nvcc, g++ and clang write
 * kernel names) made readable by the C++ runtime's abi::__cxa_demangle.
 * Written in C++ (ls_demangle.cpp) only for <cxxabi.h>; this interface is C. */
#ifndef LS_DEMANGLE_H
#define LS_DEMANGLE_H

#ifdef __cplusplus
extern "C" {
#endif

/* The demangled text of the NUL-terminated `mangled`, malloc'ed (the caller
 * frees it); NULL when `mangled` is not a mangled C++ name (no "_Z" prefix:
 * nvjet_..., triton_..., plain C names), the runtime cannot demangle it, or
 * memory ran out.  Thread-safe, needs no GIL, never throws. */
char *ls_demangle(const char *mangled);

#ifdef __cplusplus
}
#endif

#endif
