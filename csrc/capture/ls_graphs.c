/* ls_graphs: see ls_graphs.h. */
#include "ls_graphs.h"

#include "ls_activity.h"
#include "ls_buffers.h"
#include "ls_clock.h"
#include "ls_cuda.h"
#include "ls_cupti.h"

#include <stdio.h>

/* The pool while no profile has configured it: one 4 MiB buffer holds
 * ~65,000 replay records, and it does not grow between profiles. */
#define LS_GRAPHS_BUFFER_BYTES (4u << 20)
#define LS_GRAPHS_MAX_BUFFERS 64

int ls_graphs_prepare(const char *const *cupti_paths, size_t n, char *why, size_t why_size)
{
    if (ls_activity_graph_trace_on())
        return 0;
    if (!ls_cuda_driver_present()) {
        snprintf(why, why_size, "no NVIDIA GPU driver on this machine (libcuda.so.1 cannot be "
                 "opened)");
        return -1;
    }
    int context = ls_cuda_context_exists();
    if (context != 0) {
        snprintf(why, why_size, "%s: call loopscope.prepare() before the process's first CUDA "
                 "call (before any tensor goes to the GPU and before torch.cuda is used), since "
                 "CUPTI crashes the process when it replays a CUDA graph made before the "
                 "graph-level trace was on",
                 context > 0 ? "CUDA has already started in this process"
                             : "the CUDA driver cannot say whether CUDA has started");
        return -1;
    }
    if (ls_cupti_load(cupti_paths, n) != 0) {
        snprintf(why, why_size, "%s", ls_cupti_error());
        return -1;
    }
    /* Before any kind is on: CUPTI's timestamps in ns of the host's clock
     * (ls_clock.h), as every profile asks. */
    ls_clock_own_cupti_timestamps();
    if (ls_buffers_configure(LS_GRAPHS_BUFFER_BYTES, 1, LS_GRAPHS_MAX_BUFFERS, 1) != 0) {
        snprintf(why, why_size, "could not allocate CUPTI activity buffers");
        return -1;
    }
    ls_buffers_hold(1);
    if (ls_activity_enable_graph_trace(1, why, why_size) != 0) {
        ls_buffers_hold(0);
        return -1;
    }
    return 0;
}

int ls_graphs_prepared(void) { return ls_activity_graph_trace_on(); }
