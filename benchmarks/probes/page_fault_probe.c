/* What a fresh page costs on this machine: maps 1 GiB four times, touches
 * one byte per 4 KiB page, unmaps; with an argument, each mapping is first
 * advised for 2 MiB pages (MADV_HUGEPAGE), as csrc/platform/ls_bulk.c does.  Issue
 * 14's summary writes ~1 GB of fresh memory at 10M kernels, so this cost
 * is part of it (benchmarks/history/results-2026-11.md, 2026-11-26).
 *
 *   cc -O2 -o /tmp/page_fault_probe benchmarks/probes/page_fault_probe.c
 *   /tmp/page_fault_probe; /tmp/page_fault_probe huge */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    (void)argv;
    const size_t bytes = (size_t)1 << 30;
    for (int round = 0; round < 4; round++) {
        double start = seconds();
        char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        if (argc > 1)
            (void)madvise(p, bytes, MADV_HUGEPAGE);
        for (size_t i = 0; i < bytes; i += 4096)
            p[i] = 1;
        double touched = seconds();
        munmap(p, bytes);
        printf("%s pages: touching 1 GiB %.3f s, unmapping %.3f s\n",
               argc > 1 ? "2 MiB" : "4 KiB", touched - start, seconds() - touched);
    }
    return 0;
}
