#!/bin/bash
# The quiet-machine record of README "End of wave 2" (about 17 minutes on 2 cores). Run on an otherwise idle machine.
cd "$(dirname "$0")/.."
export WEFT_CACHE_DIR=${WEFT_CACHE_DIR:-$(mktemp -d)}
R=benchmarks/results
D=${D:-$(date +%Y%m%d)}
E="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE"
log() { echo "=== $(date +%T) $*"; }
log start $(git rev-parse --short HEAD)
log priced_plans
$E python benchmarks/priced_plans.py --out $R/priced-plans-quiet-$D
log attention
for t in 1 2; do
  $E weft bench attention --arms greedy+inference,priced+inference,matchers+inference,torch-sdpa --set heads=1 --set tokens=5184 --set head_dim=32 --threads $t --rounds 4 --out $R/attention-5184x32-t$t-quiet-$D.json
  python benchmarks/attention_roof.py $R/attention-5184x32-t$t-quiet-$D.json
done
for t in 2 1; do
  $E weft bench attention --arms priced+inference,torch-sdpa --set heads=16 --set tokens=5184 --set head_dim=64 --threads $t --rounds 3 --out $R/attention-16x5184x64-t$t-quiet-$D.json
  python benchmarks/attention_roof.py $R/attention-16x5184x64-t$t-quiet-$D.json
done
log memory_bound
$E THP_MEM_ALLOC_ENABLE=1 python benchmarks/memory_bound.py --out $R/memory-bound-quiet-$D.json
log backend shapes
$E python benchmarks/backend.py --shapes-only --threads 1,2 --out $R/backend-shapes-quiet2-$D.json
log bert
for t in 1 2; do
  $E weft bench examples/bert.py:build --arms inference,torch-eager --threads $t --rounds 6 --out $R/bert-layer-t$t-quiet-$D.json
done
log compile_time priced
python benchmarks/compile_time.py --fusion priced --workloads qwen-decode-step,sam3-encoder --depths full --out $R/compile-time-priced-quiet-$D.json
log torch_models
THP_MEM_ALLOC_ENABLE=1 $E python benchmarks/torch_models.py --out $R/torch-models-quiet-$D.json
log done
