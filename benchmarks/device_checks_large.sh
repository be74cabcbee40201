#!/usr/bin/env bash
# Speed figures on a machine with 16 cores and a CUDA GPU, in one call (results in
# docs/results/large_n/ and docs/results/bench_fit_gpu_machine/):
#   D: the CUDA tests, then the 100,000-object fit (synthetic inputs of paper shape, 64 bits, defaults)
#      with device="cuda" on 12 cores, then the paper-scale (10,000-object) fit with device="cuda";
#   A: the paper-scale fit on 2 cores of their own (taskset), device="cpu", two threads;
#   E: `dmh demo` on 2 cores of their own.
#   .whl/ = a faiss-cpu wheel for that machine's Python (it has none); OUT = the output folder
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/device_out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
nproc; free -g | head -2; nvidia-smi --query-gpu=name,memory.total --format=csv
python3 -c "import torch,numpy,sklearn;print(torch.__version__, numpy.__version__, sklearn.__version__, torch.cuda.is_available())"
SRC=$PWD/src
(OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 PYTHONPATH=$SRC:/tmp/site timeout 540 taskset -c 12,13 \
   python3 benchmarks/bench_fit.py --n 10000 --device cpu --threads 2 --out $OUT/fit_cpu_n10000.json > $OUT/A.log 2>&1; echo "A rc=$?" >> $OUT/A.log) &
(cd /tmp && PYTHONPATH=$SRC:/tmp/site /usr/bin/time -v timeout 200 taskset -c 14,15 python3 -m dmh.cli --threads 2 demo > $OUT/E.log 2>&1; echo "E rc=$?" >> $OUT/E.log) &
(export PYTHONPATH=$SRC:/tmp/site
 timeout 150 taskset -c 0-11 python3 -m pytest -q -p no:cacheprovider tests/methods/test_knn.py tests/methods/test_gbe.py tests/methods/test_dmh.py -k "cuda or knn" > $OUT/D.log 2>&1; echo "D tests rc=$?" >> $OUT/D.log
 timeout 330 taskset -c 0-11 python3 benchmarks/bench_large_n.py --compare-n 0 --fit-n 100000 --bits 64 --device cuda --threads 12 --out $OUT/large_n_100k_cuda.json >> $OUT/D.log 2>&1; echo "D 100k rc=$?" >> $OUT/D.log
 timeout 110 taskset -c 0-11 python3 benchmarks/bench_fit.py --n 10000 --device cuda --threads 12 --out $OUT/fit_cuda_n10000.json >> $OUT/D.log 2>&1; echo "D 10k rc=$?" >> $OUT/D.log) &
wait
for f in D E A; do echo "=== $f"; cat $OUT/$f.log; done > $OUT/all.log; rm -f $OUT/?.log; tail -c 11000 $OUT/all.log
