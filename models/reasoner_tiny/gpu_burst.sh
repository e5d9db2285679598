#!/usr/bin/env bash
# Continue a reasoner-tiny run on a CUDA GPU for a fixed time, two settings side by side
# (the model is small enough that one GPU trains both at once): a large batch at the
# recipe's peak rate and a smaller one at half of it. Each decays its rate over the time
# given, so each ends fully decayed however fast the GPU turns out to be.
#
#   bash models/reasoner_tiny/gpu_burst.sh INIT_RUN MINUTES CORPUS.xz [CORPUS.xz ...]
#
# The corpus files come from `python -m models.reasoner_tiny.train --encoded FILE
# --encode-only` (encode them where CPU time is cheap). Runs land in build/burst-large and
# build/burst-small; with $OUT set, each comes back as $OUT/burst-NAME.tar plus its log.
# Measure and ship one as usual: python -m models.reasoner_tiny.ship build/burst-NAME
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
init=$1 minutes=$2
shift 2
python3 -c "import torch; assert torch.cuda.is_available(), 'PyTorch sees no CUDA GPU'"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
out=${OUT:-build}
export PYTHONUNBUFFERED=1

burst() {  # name batch lr
    python3 -m models.reasoner_tiny.train --out "build/burst-$1" --init-from "$init" \
        --encoded "${corpus[@]}" --batch-size "$2" --lr "$3" --warmup-steps 300 \
        --steps 10000000 --minutes "$minutes" --decay-over-minutes \
        --suffix-mask-share 0.8 --save-every 5000 >"$out/burst-$1.log" 2>&1
}
corpus=("$@")
burst large 1024 2e-3 &
large=$!
burst small 256 1e-3 &
small=$!
status=0
wait $large || status=$?
wait $small || status=$?
for name in large small; do
    tail -c 600 "$out/burst-$name.log" | tr '\r' '\n' | tail -n 4
    if [[ -n "${OUT:-}" && -f "build/burst-$name/model.safetensors" ]]; then
        tar -cf "$OUT/burst-$name.tar" --exclude trainer_state.pt -C build "burst-$name"
    fi
done
exit $status
