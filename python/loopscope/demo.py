"""The built-in denoise loop: 10 steps through an 18-block MLP stack (width
1024, bf16, 1x50 tokens), eager or replayed from CUDA graphs.  Used by
`python -m loopscope demo`, the GPU tests and the benchmarks."""
from __future__ import annotations

from typing import Any, Callable


class NoGPUError(RuntimeError):
    """The demo loop was asked for on a CUDA device this machine does not
    have.  Under pytest, a test using loopscope's fixture skips with this
    message as its reason (pytest_plugin)."""


def build(device: str = "cuda", width: int = 1024, depth: int = 18, tokens: int = 50):
    """Returns (model, x): a stack of LayerNorm-Linear-GELU-Linear blocks and its input.
    NoGPUError (a RuntimeError) when device is a CUDA one and no GPU is visible."""
    import torch
    from torch import nn

    if str(device).startswith("cuda") and not torch.cuda.is_available():  # no context made
        _, reason = gpu_available()
        raise NoGPUError(f"loopscope.demo.build(device={device!r}): {reason}; the demo loop "
                         "runs on an NVIDIA GPU (`loopscope demo` shows a recording of it "
                         "instead)")

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(width)
            self.up = nn.Linear(width, 4 * width)
            self.act = nn.GELU()
            self.down = nn.Linear(4 * width, width)

        def forward(self, x):
            return x + self.down(self.act(self.up(self.norm(x))))

    torch.manual_seed(0)
    model = nn.Sequential(*[Block() for _ in range(depth)]).to(device, torch.bfloat16).eval()
    x = torch.randn(1, tokens, width, device=device, dtype=torch.bfloat16)
    return model, x


def denoise_step(model, x):
    """One step: predict the noise and take a small step against it."""
    return x - 0.1 * model(x)


def eager_loop(model, x, steps: int = 10, prof=None):
    import torch

    with torch.inference_mode():
        for _ in range(steps):
            if prof is None:
                x = denoise_step(model, x)
            else:
                with prof.step():
                    x = denoise_step(model, x)
    return x


def graph_loop_factory(model, x) -> Callable[..., Any]:
    """Captures one denoise step in a CUDA graph; returns loop(steps, prof)
    that replays it once per step (so steps stay visible to the profiler)."""
    import torch

    with torch.no_grad():  # not inference_mode: the static buffers are refilled later
        static_x = x.clone()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm up outside the capture
            for _ in range(3):
                denoise_step(model, static_x)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = denoise_step(model, static_x)

    @torch.no_grad()
    def loop(steps: int = 10, prof=None):
        static_x.copy_(x)
        for _ in range(steps):
            if prof is None:
                graph.replay()
                static_x.copy_(static_out)
            else:
                with prof.step():
                    graph.replay()
                    static_x.copy_(static_out)
        return static_out

    return loop


NO_DRIVER = "no NVIDIA GPU driver on this machine (libcuda.so.1 cannot be opened)"


def _driver_missing() -> bool:
    """True when, on Linux, the NVIDIA driver library cannot be opened: no
    GPU for CUDA, told in a millisecond, where importing torch to ask takes
    seconds and hundreds of MB (issue 41)."""
    import sys

    if not sys.platform.startswith("linux"):
        return False  # another platform: torch tells
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return True
    return False


def gpu_available() -> tuple[bool, str]:
    """(True, device name) or (False, the plain reason).  Without the
    driver, torch is not imported."""
    if _driver_missing():
        return False, NO_DRIVER
    try:
        import torch
    except ImportError:
        return False, "PyTorch is not installed"
    if not torch.cuda.is_available():
        return False, "no CUDA GPU is visible to PyTorch on this machine"
    return True, torch.cuda.get_device_name()
