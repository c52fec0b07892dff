/* ls_collectives: see ls_collectives.h. */
#include "ls_collectives.h"

#include <string.h>

static const char *const prefixes[] = {"nccl", "nvshmem", "rccl"};
static const char *const families[] = {"cross_device_reduce", "symmetric_memory", "userbuffers",
                                       "deep_ep"};

/* The identifier a name starts with, past "_Z", "_ZN" and a length, or a
 * demangled "void ". */
static const char *identifier(const char *name)
{
    if (strncmp(name, "void ", 5) == 0)
        return name + 5;
    if (name[0] != '_' || name[1] != 'Z')
        return name;
    const char *p = name + 2;
    if (*p == 'N')
        p++;
    while (*p >= '0' && *p <= '9')
        p++;
    return p;
}

int ls_collectives_is_comm(const char *name)
{
    if (name == NULL)
        return 0;
    const char *id = identifier(name);
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(id, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (strstr(name, families[i]) != NULL)
            return 1;
    return 0;
}
