#!/bin/bash
# The quiet-machine record of the README's "Measured" section. Run on an otherwise idle machine:
#   bash benchmarks/quiet_run.sh                    # every section, in this order (about an hour on 2 cores)
#   bash benchmarks/quiet_run.sh pricing priced     # only these sections
# Sections: compile pricing priced whole whole32 peers attention fusion membound conv examples shapes torch
# The cache is fresh (so the machine profile is calibrated quietly first) unless WEFT_CACHE_DIR is set.
cd "$(dirname "$0")/.."
export WEFT_CACHE_DIR=${WEFT_CACHE_DIR:-$(mktemp -d)}
R=benchmarks/results
D=${D:-$(date +%Y%m%d)}
E="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE"
BASE=${BASE:-}  # another checkout for the warm-compile growth side by side (compile section)
log() { echo "=== $(date +%T) $* (load $(cut -d' ' -f1-3 /proc/loadavg))"; }

calibrate() { $E python -c "from weft.cost.machine import machine_profile; p = machine_profile(); print('profile', p.profile_id, p.measured_at)"; }
compile() {
  if [ -n "$BASE" ]; then
    python benchmarks/compile_time.py --against "$BASE" --workloads sam3-encoder,qwen-decode-step --repeats 6 --out $R/compile-time-warm-against-quiet-$D.json
  fi
  python benchmarks/compile_time.py --fusion priced --workloads qwen-decode-step,sam3-encoder --depths full --out $R/compile-time-priced-quiet-$D.json
  python benchmarks/compile_time_examples.py --cases minilm-6,bert-layer,cnn --contract strict --out $R/compile-time-examples-default-quiet-$D.json
}
pricing() { python benchmarks/pricing.py --out $R/pricing-quiet-$D.json; }
priced() { $E python benchmarks/priced_plans.py --out $R/priced-plans-quiet-$D; }
whole() {  # priced vs matchers vs unfused, whole plans, with fresh processes (issue 12)
  for t in 1 2; do
    $E weft bench vit-block --arms unfused+inference,priced+inference,matchers+inference --threads $t --rounds 4 --processes 4 --against matchers+inference --no-progress --out $R/whole-vit-block-t$t-quiet-$D.json
    $E weft bench qwen-decode-step --arms unfused+inference,priced+inference,matchers+inference --threads $t --rounds 4 --processes 4 --against matchers+inference --no-progress --out $R/whole-qwen-decode-step-t$t-quiet-$D.json
    $E weft bench sam3-encoder --set blocks=4 --arms unfused+inference,priced+inference,matchers+inference --threads $t --rounds 3 --processes 2 --against matchers+inference --no-progress --out $R/whole-sam3-encoder-4-t$t-quiet-$D.json
  done
}
whole32() {  # the 32-block encoder at 336 x 336 (24 x 24 tokens: one window; 32 blocks at 1008 take ~23 s a call)
  for t in 1 2; do
    $E weft bench sam3-encoder --set blocks=32 --set image_size=336 --arms unfused+inference,priced+inference,matchers+inference --threads $t --rounds 3 --processes 2 --against matchers+inference --no-progress --out $R/whole-sam3-encoder-32-336-t$t-quiet-$D.json
  done
}
peers() {  # vit-block beside Inductor and eager (issue 10)
  for t in 1 2; do
    $E weft bench vit-block --arms unfused+inference,priced+inference,torch-compile,torch-eager --threads $t --rounds 4 --no-progress --out $R/peers-vit-block-t$t-quiet-$D.json
  done
}
attention() {
  for t in 1 2; do
    $E weft bench attention --arms priced+inference,matchers+inference,torch-sdpa --set heads=1 --set tokens=5184 --set head_dim=32 --threads $t --rounds 4 --no-progress --out $R/attention-5184x32-t$t-quiet-$D.json
    python benchmarks/attention_roof.py $R/attention-5184x32-t$t-quiet-$D.json
  done
}
fusion() { $E python benchmarks/fusion.py --out-dir $R/fusion-quiet-$D --write-doc; }
membound() { $E THP_MEM_ALLOC_ENABLE=1 python benchmarks/memory_bound.py --out $R/memory-bound-quiet-$D.json; }
conv() { for t in 1 2; do $E python benchmarks/conv2d.py --threads $t --out $R/conv2d-quiet-t$t-$D.json; done; }
examples() {
  for t in 1 2; do
    for example in bert minilm6 cnn; do
      $E weft bench examples/$example.py:build --arms inference,torch-eager --threads $t --rounds 6 --no-progress --out $R/example-$example-t$t-quiet-$D.json
    done
  done
}
shapes() { $E python benchmarks/backend.py --shapes-only --threads 1,2 --out $R/backend-shapes-quiet-$D.json; }
torch() { THP_MEM_ALLOC_ENABLE=1 $E python benchmarks/torch_models.py --out $R/torch-models-quiet-$D.json
          $E python benchmarks/torch_buckets.py --out $R/torch-buckets-minilm-8x100-120-128-t1-quiet-$D.json; }

sections=("$@")
# never overwrite an earlier record: a second run on the same date takes another D (D=20261202s8)
if [ -z "${FORCE:-}" ] && { compgen -G "$R/*-$D.json" || compgen -G "$R/*-$D/"; } >/dev/null; then
  echo "results for D=$D exist already in $R (a record of an earlier run): set another D, or FORCE=1 to overwrite" >&2
  exit 2
fi
[ ${#sections[@]} -eq 0 ] && sections=(compile pricing priced whole peers attention fusion membound conv examples shapes torch)
log start $(git rev-parse --short HEAD) cache $WEFT_CACHE_DIR
log calibrate; calibrate
for section in "${sections[@]}"; do
  log "$section"
  "$section" || echo "=== $section FAILED (exit $?)"
done
log done
