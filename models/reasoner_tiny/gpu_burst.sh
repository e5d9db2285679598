#!/usr/bin/env bash
# Train reasoner-tiny on a CUDA GPU for a fixed time, two settings side by side (the model
# is small enough that one GPU trains both at once). Each decays its rate over the time
# given, so each ends fully decayed however fast the GPU turns out to be.
#
#   bash models/reasoner_tiny/gpu_burst.sh INIT_RUN MINUTES CORPUS.xz [CORPUS.xz ...]
#   bash models/reasoner_tiny/gpu_burst.sh fresh MINUTES CORPUS.xz [CORPUS.xz ...]
#
# INIT_RUN: continue that run (its weights and tokenizer): a large batch at the recipe's
# peak rate and a smaller one at half of it, in build/burst-large and build/burst-small.
# fresh: start from scratch with the tokenizer counted from today's corpus, the shipped
# shape and a wider, deeper one, in build/burst-base and build/burst-wide.
#
# The corpus files come from `python -m quicksilver.models.reasoner_tiny.train --encoded FILE
# --encode-only` (with --init-from INIT_RUN for a continuation, without for a fresh run;
# on the GPU machine's cores that takes about a minute for 600,000 examples). With $OUT
# set, each run comes back as $OUT/burst-NAME.tar plus its log. Measure and ship one as
# usual: python -m quicksilver.models.reasoner_tiny.ship build/burst-NAME
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
init=$1 minutes=$2
shift 2
corpus=("$@")
python3 -c "import torch; assert torch.cuda.is_available(), 'PyTorch sees no CUDA GPU'"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
out=${OUT:-build}
export PYTHONUNBUFFERED=1

burst() {  # name batch lr [train options…]
    local name=$1 batch=$2 lr=$3
    shift 3
    python3 -m quicksilver.models.reasoner_tiny.train --out "build/burst-$name" "$@" \
        --encoded "${corpus[@]}" --batch-size "$batch" --lr "$lr" --warmup-steps 300 \
        --steps 10000000 --minutes "$minutes" --decay-over-minutes \
        --suffix-mask-share 0.8 --save-every 5000 >"$out/burst-$name.log" 2>&1
}
if [[ "$init" == fresh ]]; then
    names=(base wide)
    burst base 512 2e-3 &
    burst wide 512 2e-3 --d-model 256 --layers 6 &
else
    names=(large small)
    burst large 1024 2e-3 --init-from "$init" &
    burst small 256 1e-3 --init-from "$init" &
fi
status=0
for job in $(jobs -p); do
    wait "$job" || status=$?
done
for name in "${names[@]}"; do
    tail -c 600 "$out/burst-$name.log" | tr '\r' '\n' | tail -n 4
    if [[ -n "${OUT:-}" && -f "build/burst-$name/model.safetensors" ]]; then
        tar -cf "$OUT/burst-$name.tar" --exclude trainer_state.pt -C build "burst-$name"
    fi
done
exit $status
