# Sourced by the GPU runner (benchmarks/gpu.sh): writes what the
# machine is to $1/machine.txt (and prints it), then builds loopscope in place
# (-Werror; with the C test hooks, which the GPU tests and some benchmarks
# call) with its log in $1/build.log; a failed build ends the call.
# Usage: source benchmarks/gpu_prologue.sh DIR
gpu_log_dir=$1
mkdir -p "$gpu_log_dir"
export PYTHONUNBUFFERED=1
{
  date -u +%Y-%m-%dT%H:%MZ
  nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
  python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
} 2>&1 | tee "$gpu_log_dir/machine.txt"
LOOPSCOPE_WERROR=1 LOOPSCOPE_TEST_HOOKS=1 python3 -m pip install --no-build-isolation --no-deps -q -e . \
  > "$gpu_log_dir/build.log" 2>&1 || { tail -30 "$gpu_log_dir/build.log"; exit 1; }
