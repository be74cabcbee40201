#!/usr/bin/env bash
# Speed figures on a machine with 16 cores and a CUDA GPU, all in one call (results in
# docs/results/bench_fit_gpu_machine/): each CPU job pinned to 2 cores of its own with taskset, so the
# 2-core figures are measured without other load on those cores, beside a CUDA fit.
#   .old/  = `git archive 2f6d0e6 src benchmarks | tar -x -C .old` (the code before the speed work)
#   .whl/  = a faiss-cpu wheel for that machine's Python (it has no faiss); OUT = the output folder
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
nproc; nvidia-smi --query-gpu=name,memory.total --format=csv; python3 -c "import torch,numpy,sklearn;print(torch.__version__, numpy.__version__, sklearn.__version__, torch.cuda.is_available())"
NEW=$PWD/src; OLD=$PWD/.old/src
# A: new code, paper scale, 2 cores
(OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 PYTHONPATH=$NEW:/tmp/site timeout 560 taskset -c 0,1 python3 benchmarks/bench_fit.py --n 10000 --device cpu --threads 2 --out $OUT/fit_cpu_new_n10000.json > $OUT/A.log 2>&1; echo "A rc=$?" >> $OUT/A.log) &
# B/C: old vs new at 5000 objects, 2 cores each
(OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 PYTHONPATH=$OLD:/tmp/site timeout 560 taskset -c 2,3 python3 .old/benchmarks/bench_fit.py --n 5000 --out $OUT/fit_cpu_old_n5000.json > $OUT/B.log 2>&1; echo "B rc=$?" >> $OUT/B.log) &
(OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 PYTHONPATH=$NEW:/tmp/site timeout 560 taskset -c 4,5 python3 benchmarks/bench_fit.py --n 5000 --device cpu --threads 2 --out $OUT/fit_cpu_new_n5000.json > $OUT/C.log 2>&1; echo "C rc=$?" >> $OUT/C.log) &
# E: dmh demo on 2 quiet cores
(cd /tmp && PYTHONPATH=$NEW:/tmp/site /usr/bin/time -v timeout 300 taskset -c 6,7 python3 -m dmh.cli demo > $OUT/E.log 2>&1; echo "E rc=$?" >> $OUT/E.log) &
# D: CUDA tests then the CUDA fit at paper scale
(export PYTHONPATH=$NEW:/tmp/site; taskset -c 8-15 python3 -m pytest -q -p no:cacheprovider tests/methods/test_gbe.py tests/methods/test_dmh.py -k cuda > $OUT/D.log 2>&1; echo "D tests rc=$?" >> $OUT/D.log; \
  timeout 400 taskset -c 8-15 python3 benchmarks/bench_fit.py --n 10000 --device cuda --out $OUT/fit_cuda_n10000.json >> $OUT/D.log 2>&1; echo "D fit rc=$?" >> $OUT/D.log) &
wait
for f in D E C B A; do echo "=== $f"; cat $OUT/$f.log; done > $OUT/all.log; rm -f $OUT/?.log; tail -c 11000 $OUT/all.log
