/* ls_metrics: the one table of the PM figures loopscope samples, in pure C
 * (a header of data only).  Each row: the figure's id, its output name
 * (summary and test hooks, named like Nsight Systems' GPU metrics), the
 * CUPTI metric it is evaluated from, and whether that metric is a byte
 * count to turn into GB/s over the sample (1) or a value to keep as it is
 * (0).  Every value is a percentage, a ratio or a rate, so that averaging
 * over time (weighted by overlap) is meaningful.
 *
 * Rows are in order of importance: when the figures do not fit one pass of
 * the counters, PM sampling drops them from the end (GPU_FACTS: all but
 * the tensor pipe fit on GH100). */
#ifndef LS_METRICS_H
#define LS_METRICS_H

#define LS_METRIC_TABLE(X)                                                                      \
    X(LS_M_SM_ACTIVE, "sm_active_pct", "sm__cycles_active.avg.pct_of_peak_sustained_elapsed", 0) \
    X(LS_M_DRAM_THROUGHPUT, "dram_throughput_pct",                                              \
      "dram__throughput.avg.pct_of_peak_sustained_elapsed", 0)                                  \
    X(LS_M_GR_ACTIVE, "gr_active_pct", "gr__cycles_active.avg.pct_of_peak_sustained_elapsed", 0) \
    X(LS_M_DRAM_READ_GBPS, "dram_read_gbps", "dram__bytes_read.sum", 1)                         \
    X(LS_M_DRAM_WRITE_GBPS, "dram_write_gbps", "dram__bytes_write.sum", 1)                      \
    X(LS_M_SM_ISSUE, "sm_issue", "sm__inst_executed.avg.per_cycle_active", 0)                   \
    X(LS_M_WARP_OCCUPANCY, "warp_occupancy_pct",                                                \
      "sm__warps_active.avg.pct_of_peak_sustained_active", 0)                                   \
    X(LS_M_PCIE_READ_GBPS, "pcie_read_gbps", "pcie__read_bytes.sum", 1)                         \
    X(LS_M_PCIE_WRITE_GBPS, "pcie_write_gbps", "pcie__write_bytes.sum", 1)                      \
    X(LS_M_TENSOR_ACTIVE, "tensor_active_pct",                                                  \
      "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", 0)

#define LS_METRIC_ID(id, name, cupti, rate) id,
enum { LS_METRIC_TABLE(LS_METRIC_ID) LS_METRICS };
#undef LS_METRIC_ID

#endif
