// ls_demangle: see ls_demangle.h.  __cxa_demangle is the demangler of the C++
// runtime itself (libstdc++ or libc++), so names read as the compiler meant.
#include "ls_demangle.h"

#include <cxxabi.h>

#include <stdlib.h>
#include <string.h>

extern "C" char *ls_demangle(const char *mangled)
{
    // Only "_Z..." symbols: __cxa_demangle also reads bare type manglings,
    // which would turn a plain name like "f" into "float".
    if (mangled == nullptr || strncmp(mangled, "_Z", 2) != 0)
        return nullptr;
    int status = 0;
    char *plain = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    if (status != 0) {
        free(plain);
        return nullptr;
    }
    return plain;
}
