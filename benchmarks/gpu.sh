#!/usr/bin/env bash
# The engine benchmark on a CUDA GPU: an 8B LLaDA-shaped random model in bf16, built
# directly on the GPU. First the compiled step (torch.compile + CUDA graphs) against eager,
# batch 1, 256-token answers at 16 and 32 steps: tokens/s, ms per step and the roofline
# (weights read once per step at a bandwidth measured by a large copy, matrix FLOPs at a
# measured bf16 matmul rate). Then, eager: diffusion at 16/32 steps vs the same weights
# decoding autoregressively with a KV cache, 256-token answers (tokens/s, ms per step, peak
# memory); then batched denoising (compiled on CUDA, as the engine defaults) at batch 1, 8
# and 32 (16 steps, 256-token canvases) and a stream of arrivals through the
# continuous-batching scheduler against one at a time (issue 25).
#
#   bash benchmarks/gpu.sh            # on a CUDA machine; a few minutes on an A100/H100
#   bash benchmarks/gpu.sh --small    # tiny model on the CPU, to know the script works
#
# Further arguments go to benchmarks/engine.py (e.g. --repeats 5, --sizes base,llada-8b).
# Rows are also written as JSON to $OUT (or the temporary folder).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import quicksilver.engine" 2>/dev/null || python3 -m pip install --quiet -e .

if [[ "${1:-}" == "--small" ]]; then
    shift
    set -- --device cpu --sizes tiny --quick --threads 1 "$@"
    batching=(--batches 1,4 --tokens 32 --arrivals 4)
else
    batching=(--batches 1,8,32 --tokens 256 --arrivals 32)
    python3 -c "import torch; assert torch.cuda.is_available(), 'PyTorch sees no CUDA GPU'"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
    set -- --device cuda --dtype bfloat16 --sizes llada-8b --repeats 3 "$@"
fi
json="${OUT:-${TMPDIR:-/tmp}}/engine-benchmark.json"
python3 benchmarks/engine.py "$@" --compile-vs-eager --json "${json%.json}-compile.json"
echo "rows written to ${json%.json}-compile.json"
python3 benchmarks/engine.py "$@" --compile off --json "$json"  # like for like with AR
echo "rows written to $json"
python3 benchmarks/engine.py "$@" --batching "${batching[@]}" --json "${json%.json}-batching.json"
echo "rows written to ${json%.json}-batching.json"
