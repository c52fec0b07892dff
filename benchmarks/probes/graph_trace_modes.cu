// Probe (issue 27): what CUPTI's graph-level trace (CUPTI_ACTIVITY_KIND_GRAPH_TRACE, one
// record per replay) allows, beyond ../shared/GPU_FACTS.md's first table (enabled before
// capture: works, +2%; replaying a graph exec instantiated while it was off: segfault).
// Each mode is its own process; it prints one line.
//   7: GRAPH_TRACE enabled before the process's first CUDA call (before the context exists)
//   8: GRAPH_TRACE on while instantiating, then off, CONCURRENT_KERNEL on for the replays
//      (can a per-kernel profile follow in a process that traces graph replays?)
//   9: as 8, then CONCURRENT_KERNEL off and GRAPH_TRACE on again for more replays
//  10: GRAPH_TRACE and CONCURRENT_KERNEL on while instantiating, GRAPH_TRACE off for the
//      replays (kernel records per replay with the kind off?)
//  11: GRAPH_TRACE on from before the context; 200 untimed replays whose records pile up
//      before a flush (records of replays outside any profile)
// Build: nvcc -O2 -arch=sm_90 graph_trace_modes.cu -o gtm -lcupti -L$CUDA_HOME/extras/CUPTI/lib64
#include <cuda_runtime.h>
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define CK(x) do { CUptiResult r_ = (x); if (r_ != CUPTI_SUCCESS) { const char *m; cuptiGetResultString(r_, &m); printf("[%s -> %s] ", #x, m); } } while (0)
__global__ void k(float *x) { x[threadIdx.x] += 1.0f; }
static unsigned long long kernels, graphs, gspan;
static void CUPTIAPI req(uint8_t **b, size_t *sz, size_t *mx) { *sz = 16 << 20; *b = (uint8_t *)aligned_alloc(8, *sz); *mx = 0; }
static void CUPTIAPI done(CUcontext c, uint32_t s, uint8_t *b, size_t sz, size_t valid) {
  (void)c; (void)s; (void)sz;
  CUpti_Activity *r = NULL;
  while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) kernels++;
    if (r->kind == CUPTI_ACTIVITY_KIND_GRAPH_TRACE) { CUpti_ActivityGraphTrace2 *g = (CUpti_ActivityGraphTrace2 *)r; gspan += g->end - g->start; graphs++; }
  }
  free(b);
}
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static double replays(cudaGraphExec_t ge, cudaStream_t s, int n) {
  double t = now();
  for (int i = 0; i < n; i++) cudaGraphLaunch(ge, s);
  cudaStreamSynchronize(s);
  return (now() - t) / n * 1e6;
}
static void report(const char *what) {
  CK(cuptiActivityFlushAll(1));
  printf("%s: graph records %llu (mean span %.1f us), kernel records %llu; ", what, graphs,
         graphs ? gspan / 1e3 / graphs : 0.0, kernels);
  graphs = kernels = gspan = 0;
}
int main(int argc, char **argv) {
  int mode = argc > 1 ? atoi(argv[1]) : 7;
  const CUpti_ActivityKind G = CUPTI_ACTIVITY_KIND_GRAPH_TRACE, K = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  CK(cuptiActivityRegisterCallbacks(req, done));
  if (mode == 7 || mode == 11) CK(cuptiActivityEnable(G));  // no CUDA call yet
  float *x; cudaMalloc(&x, 1024 * 4); cudaStream_t s; cudaStreamCreate(&s);
  if (mode == 8 || mode == 9) CK(cuptiActivityEnable(G));
  if (mode == 10) { CK(cuptiActivityEnable(G)); CK(cuptiActivityEnable(K)); }
  cudaGraph_t g; cudaGraphExec_t ge;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  for (int i = 0; i < 1000; i++) k<<<1, 32, 0, s>>>(x);
  cudaStreamEndCapture(s, &g);
  if (cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) { printf("instantiate failed\n"); return 1; }
  printf("mode %d: ", mode);
  fflush(stdout);
  if (mode == 8 || mode == 9) { CK(cuptiActivityDisable(G)); CK(cuptiActivityEnable(K)); }
  if (mode == 10) CK(cuptiActivityDisable(G));
  if (mode == 11) { replays(ge, s, 200); }
  double us = replays(ge, s, 20);
  report("first");
  printf("%.1f us a replay; ", us);
  if (mode == 9) {
    CK(cuptiActivityDisable(K)); CK(cuptiActivityEnable(G));
    us = replays(ge, s, 20);
    report("after switching back");
    printf("%.1f us a replay; ", us);
  }
  printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
