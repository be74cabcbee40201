#!/usr/bin/env bash
# Speed figures on a machine with 16 cores and a CUDA GPU, in one call (results in $OUT, copied to
# docs/results/large_n/ and docs/results/bench_fit_gpu_machine/):
#   the CUDA tests; the paper-scale (10,000-object) fit with device="cuda", in float32 and with
#   dam_precision="bfloat16"; then the 100,000-object fit (synthetic inputs of paper shape, kept in
#   float32 by bench_fit's --dtype auto, 64 bits, defaults) with device="cuda", every stage logged
#   as it ends (so a run stopped by the time limit still says how far it got), peak memory by
#   /usr/bin/time and where it was reached (--trace-peak). All 16 cores. .whl/ = a faiss-cpu wheel
#   for that machine's Python (it has none). Everything is packed into $OUT/results.tar.gz as well
#   (the machine returns a limited number of files).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/device_out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site
nproc; free -g | head -2; nvidia-smi --query-gpu=name,memory.total --format=csv
python3 -c "import torch,numpy,sklearn;print(torch.__version__, numpy.__version__, sklearn.__version__, torch.cuda.is_available())"
{
timeout ${T_TESTS:-90} python3 -m pytest -q -p no:cacheprovider tests/methods/test_knn.py tests/methods/test_gbe.py \
    tests/methods/test_dmh.py tests/methods/test_dam.py -k "cuda or knn or batched or bf16"; echo "tests rc=$?"
timeout ${T_10K:-100} python3 benchmarks/bench_fit.py --n 10000 --device cuda --threads 16 --out $OUT/fit_cuda_n10000.json \
    > $OUT/fit_10k.txt; echo "10k rc=$?"; head -20 $OUT/fit_10k.txt
timeout ${T_10K:-100} python3 benchmarks/bench_fit.py --n 10000 --device cuda --threads 16 \
    --param dam_precision='"bfloat16"' --out $OUT/fit_cuda_n10000_bf16.json > $OUT/fit_10k_bf16.txt
echo "10k bf16 rc=$?"; head -20 $OUT/fit_10k_bf16.txt
/usr/bin/time -v timeout ${T_100K:-390} python3 benchmarks/bench_fit.py --n 100000 --device cuda --threads 16 \
    --trace-peak --out $OUT/fit_cuda_n100000.json > $OUT/fit_100k.txt; echo "100k rc=$?"; head -20 $OUT/fit_100k.txt
} > $OUT/all.log 2>&1
tar -czf /tmp/results.tar.gz -C "$OUT" . && mv /tmp/results.tar.gz "$OUT/"
grep -v "Warning\|out = real" $OUT/all.log | tail -c 11000
