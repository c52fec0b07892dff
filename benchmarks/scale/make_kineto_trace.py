"""Writes a Kineto-shaped (torch.profiler) Chrome trace of any size, for the
trace-reading benchmarks: the event mix and layout of a real GPU training or
denoise loop, streamed to disk so multi-GB files need no memory.

Per kernel: the kernel (args as Kineto writes them: device, stream,
correlation, grid, block, occupancy...), its cudaLaunchKernel call, the
cpu_op that launched it, a flow pair (ac2g s/f); every 4th kernel a
python_function frame; every 50th op a memcpy or memset with its runtime
call; per step a ProfilerStep#N annotation, user annotations per layer and a
cudaStreamSynchronize with its python_function stack.  Timestamps are
relative to baseTimeNanoseconds with 3 decimals, as new traces have them.

    python benchmarks/scale/make_kineto_trace.py --kernels 3000000 /tmp/big.json
    python benchmarks/scale/make_kineto_trace.py --kernels 300000 --gzip /tmp/mid.json.gz
"""
from __future__ import annotations

import argparse
import gzip
import random
import sys

KERNELS = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<c10::BFloat16> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<c10::BFloat16> const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<c10::BFloat16> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<c10::BFloat16> const&)::{lambda(int)#1})",
]
OPS = ["aten::gelu", "aten::mm", "aten::native_layer_norm", "aten::add"]


def ts(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


SHORT_KERNELS = [
    "void at::native::vectorized_elementwise_kernel<4, GeluFunctor<c10::BFloat16>>(int)",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas",
    "void at::native::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float)",
    "void at::native::elementwise_kernel<128, 2, CUDAFunctor_add<c10::BFloat16>>(int)",
]


def generate(out, kernels: int, steps: int, seed: int = 0, flows: bool = True,
             long_names: bool = True) -> dict[str, int]:
    rng = random.Random(seed)
    names = KERNELS if long_names else SHORT_KERNELS
    w = out.write
    w('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {\n      "id": 0, "name": '
      '"NVIDIA H200", "totalGlobalMem": 150011559936,\n      "computeMajor": 9, '
      '"computeMinor": 0,\n      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": '
      '2048,\n      "regsPerBlock": 65536, "warpSize": 32,\n      "sharedMemPerBlock": 49152, '
      '"numSms": 132\n    }\n  ],\n  "with_stack": 1,\n  "displayTimeUnit": "ms",\n'
      '  "baseTimeNanoseconds": 1790000000000000000,\n  "traceEvents": [\n')
    first = True

    def event(text: str) -> None:
        nonlocal first
        w(text if first else ",\n" + text)
        first = False

    counts = {"kernels": 0, "events": 0}
    per_step = max(1, kernels // steps)
    t = 1_000_000
    gpu = t
    corr = 1
    ext = 1
    pid, tid = 4242, 4242
    done = 0
    step = 0
    while done < kernels:
        step_start = t
        n = min(per_step, kernels - done)
        layer_start = t
        for k in range(n):
            i = done + k
            kind = i % 4
            ext += 1
            corr += 1
            gap = rng.choice((1200, 1500, 2500, 4000, 9000, 60000)) if i % 7 == 0 else 1800
            op_start = t
            launch = t + 600
            event(f'  {{\n    "ph": "X", "cat": "cpu_op", "name": "{OPS[kind]}", "pid": {pid}, '
                  f'"tid": {tid},\n    "ts": {ts(op_start)}, "dur": {ts(1500)},\n    "args": {{\n'
                  f'      "External id": {ext},"Record function id": 0, "Sequence number": {i}, '
                  f'"Fwd thread id": 0, "Ev Idx": {i}\n    }}\n  }}')
            event(f'  {{\n    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", '
                  f'"pid": {pid}, "tid": {tid},\n    "ts": {ts(launch)}, "dur": {ts(700)},\n'
                  f'    "args": {{\n      "External id": {ext},  "cbid": 211, "correlation": '
                  f'{corr}\n    }}\n  }}')
            start = max(gpu, launch + 2500) + gap
            dur = (1000, 5200, 2100, 1300)[kind] + rng.randrange(200)
            gpu = start + dur
            event(f'  {{\n    "ph": "X", "cat": "kernel", "name": "{names[kind]}", "pid": 0, '
                  f'"tid": 7,\n    "ts": {ts(start)}, "dur": {ts(dur)},\n    "args": {{\n'
                  f'      "queued": 0, "device": 0, "context": 1,\n      "stream": 7, '
                  f'"correlation": {corr},\n      "registers per thread": 32,\n      '
                  f'"shared memory": 0,\n      "blocks per SM": 0.5,\n      "warps per SM": 2,\n'
                  f'      "grid": [66, 1, 1],\n      "block": [128, 1, 1],\n      '
                  f'"est. achieved occupancy %": 3\n    }}\n  }}')
            if flows:
                event(f'  {{\n    "ph": "s", "id": {corr}, "pid": {pid}, "tid": {tid}, "ts": '
                      f'{ts(launch)},\n    "cat": "ac2g", "name": "ac2g"\n  }}')
                event(f'  {{\n    "ph": "f", "id": {corr}, "pid": 0, "tid": 7, "ts": {ts(start)},\n'
                      f'    "cat": "ac2g", "name": "ac2g", "bp": "e"\n  }}')
                counts["events"] += 2
            counts["kernels"] += 1
            counts["events"] += 3
            if i % 4 == 0:
                event(f'  {{\n    "ph": "X", "cat": "python_function", "name": '
                      f'"torch/nn/modules/linear.py(124): forward", "pid": {pid}, "tid": {tid},\n'
                      f'    "ts": {ts(op_start - 300)}, "dur": {ts(2200)},\n    "args": {{\n'
                      f'      "Python parent id": {i}, "Python id": {i + 1}, "Ev Idx": {i}\n'
                      f'    }}\n  }}')
                counts["events"] += 1
            if i % 50 == 49:
                corr += 1
                copy = t + 2200
                event(f'  {{\n    "ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", '
                      f'"pid": {pid}, "tid": {tid},\n    "ts": {ts(copy)}, "dur": {ts(900)},\n'
                      f'    "args": {{\n      "cbid": 41, "correlation": {corr}\n    }}\n  }}')
                cstart = max(gpu, copy + 2000)
                gpu = cstart + 1500
                event(f'  {{\n    "ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> '
                      f'Device)", "pid": 0, "tid": 7,\n    "ts": {ts(cstart)}, "dur": {ts(1500)},\n'
                      f'    "args": {{\n      "device": 0, "context": 1,\n      "stream": 7, '
                      f'"correlation": {corr},\n      "bytes": 1048576, "memory bandwidth (GB/s)": '
                      f'699.05\n    }}\n  }}')
                counts["events"] += 2
                t += 1000
            if i % 18 == 17:
                event(f'  {{\n    "ph": "X", "cat": "user_annotation", "name": "layer_{(i // 18) % 18}", '
                      f'"pid": {pid}, "tid": {tid},\n    "ts": {ts(layer_start)}, "dur": '
                      f'{ts(t + 1800 - layer_start)},\n    "args": {{\n      "External id": {ext}, '
                      f'"Record function id": 0, "Ev Idx": {i}\n    }}\n  }}')
                counts["events"] += 1
                layer_start = t + 1800
            t += 1800 + (gap if gap > 9000 else 0)
        done += n
        # the step ends with a sync: .item() on a loss
        corr += 1
        wait = max(1000, gpu - t + 500)
        event(f'  {{\n    "ph": "X", "cat": "python_function", "name": "<built-in method item of '
              f'Tensor object at 0x7f91c2652340>", "pid": {pid}, "tid": {tid},\n    "ts": '
              f'{ts(t - 200)}, "dur": {ts(wait + 400)},\n    "args": {{\n      "Python parent id": '
              f'1, "Python id": {done}, "Ev Idx": {done}\n    }}\n  }}')
        event(f'  {{\n    "ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", '
              f'"pid": {pid}, "tid": {tid},\n    "ts": {ts(t)}, "dur": {ts(wait)},\n    "args": {{\n'
              f'      "cbid": 131, "correlation": {corr}\n    }}\n  }}')
        t += wait + 3000
        event(f'  {{\n    "ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", '
              f'"pid": {pid}, "tid": {tid},\n    "ts": {ts(step_start)}, "dur": '
              f'{ts(t - step_start)},\n    "args": {{\n      "External id": {ext}, "Record '
              f'function id": 0, "Ev Idx": {done}\n    }}\n  }}')
        counts["events"] += 3
        step += 1
        t += 5000
    w('\n  ],\n  "traceName": "synthetic.pt.trace.json"\n}\n')
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="output path")
    parser.add_argument("--kernels", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=0, help="default: one per 1000 kernels")
    parser.add_argument("--gzip", action="store_true", help="gzip the output (level 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-flows", action="store_true",
                        help="leave out the ac2g flow pairs (the issue's ~2.4 GB / 3M kernels mix)")
    parser.add_argument("--short-names", action="store_true",
                        help="kernel names of ~80 characters instead of ~300")
    args = parser.parse_args(argv)
    steps = args.steps or max(1, args.kernels // 1000)
    if args.gzip:
        with gzip.open(args.out, "wt", compresslevel=1, encoding="utf-8", newline="") as f:
            counts = generate(f, args.kernels, steps, args.seed, not args.no_flows,
                              not args.short_names)
    else:
        with open(args.out, "w", buffering=1 << 22, encoding="utf-8", newline="") as f:
            counts = generate(f, args.kernels, steps, args.seed, not args.no_flows,
                              not args.short_names)
    print(f"{args.out}: {counts['kernels']:,} kernels, {counts['events']:,} events, {steps} steps",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
