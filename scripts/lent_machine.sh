#!/usr/bin/env bash
# Everything a lent GPU machine (one GPU, 16 cores) is for, in one prepared run that writes one results file:
# the GPU tests, the GPU benches at the shapes of docs/devices.md, one multi-process run on the GPU, the CPU
# measurements that need a core per rank (scaling at p = 1, 4, 16, calibration, the planner at 4 ranks, the
# pipeline at pp = 4) and compute-sanitizer on the kernel cases.
#
#   scripts/lent_machine.sh pack                  here, before the machine is asked for: build, then write
#                                                 .lent/bundle.tar.xz (the programs, the shared libraries they and
#                                                 Open MPI need that the machine's image lacks, Open MPI's runtime)
#   scripts/lent_machine.sh run [--out DIR] [--budget SECONDS] [--sections "a b ..."]
#                                                 there: unpack and run the sections in order, each stopped when the
#                                                 budget (default 540 s) runs out; DIR defaults to $OUT
#
# The device call: `bash scripts/lent_machine.sh run` with carry [".lent"] and timeout_s 600. The machine's image
# has CUDA (cuBLASLt, NCCL) but no mpirun, OpenBLAS or ScaLAPACK: the bundle brings Debian's, and Open MPI's files go
# to the paths it was built for (see unpack).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/common.sh"
lent_dir="$root_dir/.lent"
programs=(bench/optimus-bench apps/train_gpt tests/test_cuda)
sections_all="facts gpu_tests sanitize gpu_bench gpu_mpi gpu_pipeline gpu_matrix gpu_profile cpu_plan cpu_pipeline cpu_sweep cpu_calibrate cpu_scaling"

# Libraries the machine brings itself (its C library, compiler runtime, CUDA): never carried.
system_library='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.'
openmpi_packages=(openmpi-bin openmpi-common libopenmpi3 libpmix2)

pack() {
  optimus_build --target "${programs[@]##*/}"
  local stage="$lent_dir/stage"
  rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib"
  local p
  for p in "${programs[@]}"; do cp "$build_dir/$p" "$stage/bin/"; done
  # Open MPI's runtime at its own paths (components, help texts, mpirun): a list of files, links kept.
  dpkg -L "${openmpi_packages[@]}" | while read -r f; do [[ -f "$f" || -L "$f" ]] && echo "${f#/}"; done \
    | sort -u >"$stage/openmpi.list"
  tar -C / -cf "$stage/openmpi.tar" -T "$stage/openmpi.list"
  # Every shared library the programs, mpirun and Open MPI's components load, less the machine's own.
  local objects=("$stage"/bin/* /usr/bin/orterun /usr/bin/orted
                 /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix/*.so)
  ldd "${objects[@]}" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u \
    | grep -Ev "$system_library" | while read -r name path; do cp -L "$path" "$stage/lib/$name"; done
  git -C "$root_dir" describe --always --dirty >"$stage/commit"
  tar -C "$stage" -cJf "$lent_dir/bundle.tar.xz" bin lib openmpi.tar commit
  echo "lent_machine.sh: $(du -h "$lent_dir/bundle.tar.xz" | cut -f1) in $lent_dir/bundle.tar.xz (commit $(cat \
    "$stage/commit")); carry .lent"
  rm -rf "$stage"
}

# --- run: on the lent machine -------------------------------------------------------------------------------------

out="${OUT:-$root_dir/lent-results}"
budget=540
sections="$sections_all"
results=""
bin=""

# Unpack the bundle; Open MPI's files where it looks for them (none replaced); the CUDA libraries wherever the
# image keeps them.
unpack() {
  local where="$lent_dir/unpacked"
  rm -rf "$where" && mkdir -p "$where"
  tar -C "$where" -xJf "$lent_dir/bundle.tar.xz"
  # The image has Open MPI's libraries and components (not mpirun) and a PMIx of other versions at the same paths:
  # mixed with Debian's they fail at the first call (an ext3x component asking PMIx 5 for PMIx_Info_create). On
  # this throwaway machine Debian's replace them whole.
  rm -rf /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2
  tar -C / --overwrite -xf "$where/openmpi.tar"
  bin="$where/bin"
  ln -s bin "$where/bench"  # where scaling.sh looks for optimus-bench under OPTIMUS_BUILD_DIR
  local cuda_dirs
  cuda_dirs="$(find /usr/local/cuda*/ /usr/lib/x86_64-linux-gnu /opt -name 'libcublasLt.so.13' -o -name 'libnccl.so.2' \
    2>/dev/null | xargs -r -n1 dirname | sort -u | paste -sd:)"
  # The image's own search path, for its Python (PyTorch brings its cuDNN, older than the one in these directories).
  export image_library_path="${LD_LIBRARY_PATH:-}"
  export LD_LIBRARY_PATH="$where/lib:$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$bin:/usr/local/cuda/bin:$PATH"
}

# section NAME SECONDS COMMAND...: run COMMAND for at most SECONDS (less if the budget is nearly spent), its
# command line, output and exit status appended to the results file.
section() {
  local name="$1" limit="$2"; shift 2
  local left=$((budget - SECONDS))
  ((limit > left)) && limit=$left
  {
    echo
    echo "### $name: \`$*\`"
    echo '```'
  } >>"$results"
  if ((limit < 5)); then
    echo "not run: the budget is spent" >>"$results"
  else
    local start=$SECONDS
    timeout --kill-after=5 "$limit" bash -c "$*" >>"$results" 2>&1
    local rc=$?
    echo "[exit $rc$( ((rc == 124)) && echo ", stopped after $limit s"), $((SECONDS - start)) s]" >>"$results"
  fi
  echo '```' >>"$results"
}

# mpirun_core P ARGS...: P ranks, one per core, bound (one per hardware thread where P exceeds the cores).
mpirun_core() {
  local cores binding=(--map-by core --bind-to core)
  cores="$(lscpu -p=core,socket | grep -v '^#' | sort -u | wc -l)"
  (($1 > cores)) && binding=(--use-hwthread-cpus --map-by hwthread --bind-to hwthread)
  mpirun --allow-run-as-root -np "$1" "${binding[@]}" -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS \
    -x LD_LIBRARY_PATH "${@:2}"
}

facts() {
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA node\(s\))' && free -g | head -2
  mpirun --version | head -1
  find /usr /opt -name 'libcudnn.so.*' 2>/dev/null | head -3  # cuDNN, whose fused attention is a candidate
  "$bin/optimus-bench" blas --threads "$(lscpu -p=core,socket | grep -vc '^#')" --sweeps 1
}

gpu_tests() {
  "$bin/test_cuda" || return
  "$bin/optimus-bench" layer --device cuda --q 1,2 --b 2 --s 8 --h 16 --heads 2 --peak-n 1024 | tail -4
  "$bin/optimus-bench" gpt --device cuda --q 1,2 --b 2 --s 8 --h 16 --heads 2 --vocab 32 --gemm bf16 --peak-n 1024 \
    | tail -4
  # One step of every GEMM math against the fp64 reference at a larger shape, dropout on.
  "$bin/optimus-bench" layer --device cuda --q 1,2 --b 4 --s 64 --h 256 --heads 8 --dropout 0.1 --gemm f32,bf16 | tail -8
}

# docs/devices.md's shapes and issue 36's acceptance lines, with the cuBLASLt bf16 peak beside them.
gpu_bench() {
  "$bin/optimus-bench" layer --device cuda --gemm bf16 --b 8 --s 1024 --h 2048 --heads 16 --layers 2 --q 1 --check off
  "$bin/optimus-bench" layer --device cuda --gemm bf16 --b 4 --s 2048 --h 4096 --heads 32 --layers 1 --q 1 --check off
  "$bin/optimus-bench" gpt --device cuda --gemm bf16 --b 8 --s 1024 --h 1024 --heads 16 --layers 4 --vocab 50304 \
    --q 1 --check off
  # The fused attention alone at head dim 128, s 1024 to 8192 (the first row checked against the CPU's): mixed
  # precision's on tensor cores, and the f32 one (CUDA cores) at the shorter lengths.
  "$bin/optimus-bench" attention --device cuda --gemm bf16 --b 2 --s 256,1024,2048,4096,8192 --heads 16 --d 128
  "$bin/optimus-bench" attention --device cuda --gemm bf16 --b 2 --s 256,2048 --heads 32 --d 64
  "$bin/optimus-bench" attention --device cuda --b 2 --s 256,1024 --heads 16 --d 128
  # The peer at the same shapes, where the image's PyTorch has it: FlashAttention-2, cuDNN's and the memory-efficient
  # attention, each forced in turn.
  LD_LIBRARY_PATH="$image_library_path" python3 "$root_dir/scripts/attention_peer.py" --b 2 --heads 16 --d 128 \
    --s 1024,2048,4096,8192
}

# Where the fused attention's kernels spend their time (Nsight Compute, where the image has it): throughput, occupancy
# and warp stalls of one forward and one backward at head dim 128, s 2048, under mixed precision.
gpu_profile() {
  local ncu
  ncu="$(command -v ncu || find /usr/local /opt -name ncu -type f -perm -u+x 2>/dev/null | head -1)"
  [[ -n "$ncu" ]] || { echo "no ncu on this machine"; return 0; }
  "$ncu" --kernel-name regex:'forward_kernel|backward_query_kernel|backward_key_kernel' --launch-count 3 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
    "$bin/optimus-bench" attention --device cuda --gemm bf16 --b 2 --s 2048 --heads 16 --d 128 --warmup 0 --iters 1
  # The step's time by kernel kind (issue 36): the layer at its acceptance shape under Nsight Compute, each launch's
  # duration at the clocks the bench runs at, and the last step's launches summed by kind (scripts/kernel_breakdown.py).
  # (About 90 s: Nsight Compute's ~0.2 s per launch over 400 launches; the gpt bench's would take three minutes.)
  "$ncu" --csv --metrics gpu__time_duration.sum --clock-control none --log-file "$out/kernels.csv" \
    "$bin/optimus-bench" layer --device cuda --gemm bf16 --b 8 --s 1024 --h 2048 --heads 16 --layers 2 --q 1 \
    --check off --warmup 2 --iters 1 --peak-n 1024 | grep -E '^ +cuda'
  python3 "$root_dir/scripts/kernel_breakdown.py" "$out/kernels.csv"
}

# A pipeline's stages on the GPU (8 in-process ranks sharing it: 2 stages of 2 x 2 grids), with bf16 GEMMs,
# recomputation and AdamW's moments offloaded: the same record as the CPU's run of the same options in f32 math.
gpu_pipeline() {
  local shape=(--layers 4 --hidden 64 --heads 4 --seq 32 --batch 8 --micro-batches 4 --steps 20 --every 5 --sample 0
               --in-process 8 --pp 2 --schedule interleaved)
  "$bin/train_gpt" "${shape[@]}" --device cpu | grep -E 'reference|^step|final'
  "$bin/train_gpt" "${shape[@]}" --device cuda | grep -E 'Optimus|reference|^step|final'
  "$bin/train_gpt" "${shape[@]}" --device cuda --gemm bf16 --recompute selective --offload optimizer \
    | grep -E 'Optimus|reference|^step|final|offload'
  # The 1D baseline's 2 stages of p = 2 on the GPU (4 in-process ranks) beside its CPU run.
  local one_d=("${shape[@]:0:18}" --in-process 4 --layout 1d --pp 2 --schedule interleaved)
  "$bin/train_gpt" "${one_d[@]}" --device cpu | grep -E 'Optimus|reference|^step|final'
  "$bin/train_gpt" "${one_d[@]}" --device cuda | grep -E 'Optimus|reference|^step|final'
}

# Processes with a GPU each, on the one GPU: one process (NCCL), then four sharing it (mpi-staged: NCCL refuses two
# processes on one GPU; the program line names the communicator that ran).
gpu_mpi() {
  local shape=(--hidden 128 --heads 4 --layers 2 --seq 64 --batch 8 --steps 20 --every 10 --sample 0 --timeout 30)
  mpirun_core 1 "$bin/train_gpt" --device cuda --q 1 "${shape[@]}"
  mpirun_core 4 "$bin/train_gpt" --device cuda --q 2 "${shape[@]}"
}

# The combination matrix on the GPU (tests/matrix/combination_matrix.py: every case, each against the
# single-rank CPU run; the GPU's cases close, not bitwise).
gpu_matrix() {
  python3 "$root_dir/tests/matrix/combination_matrix.py" "$bin/train_gpt" "$out/matrix" cuda | tail -30
  local rc=${PIPESTATUS[0]}
  rm -rf "$out/matrix"
  return "$rc"
}

# The sweep's makespan with a core per slot: 8 members on D = 4 and 8 slots (a thread each), each scheduler beside the
# simulator's prediction.
cpu_sweep() {
  local d
  for d in 4 8; do
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$bin/optimus-bench" sweep --members 8 --slots "$d" --simulate 4,8 \
      --h 256 --heads 4 --layers 8 --s 64 --b 8 --steps 2 --repeats 3
  done
}

# h 1024: the 2026-11-27 runs at h 256 never reached E = 0.5 at p = 16 (the bound E_max of that shape, with this
# machine's calibration, is 0.25 for 1D and 0.39 for 2D); at h 1024 the model puts both layouts' E = 0.5 batch at
# p = 16 within the sweep (1D 4, 2D 22) and 1D's E_max at 0.56, so E = 0.7 is reached at p = 4 only (strong and weak
# runs do not depend on the target: once).
cpu_scaling() {
  local target modes="strong weak iso"
  for target in 0.5 0.7; do
    ISO_TARGET=$target OPTIMUS_BUILD_DIR="$lent_dir/unpacked" "$root_dir/bench/scaling.sh" --ps "1 4 16" --h 1024 \
      --modes "$modes" --tiny64 off --out "$out/scaling-e$target" --launcher "mpirun_core_launcher" || return
    modes="iso"
  done
}

cpu_calibrate() {
  local p
  for p in 4 16; do mpirun_core "$p" "$bin/optimus-bench" calibrate --json "$out/calibration-p$p.json"; done
}

# The planner against measured steps at 4 ranks on 4 cores (docs/planner.md's 4-rank row), and at 16.
cpu_plan() {
  "$bin/optimus-bench" plan --in-process 4 --cores 4 --h 128 --heads 4 --layers 4 --s 64 --batch 16 --vocab 512 \
    --warmup 1 --iters 10 --rounds 3
  mpirun_core 16 "$bin/optimus-bench" plan --calibration "$out/calibration-p16.json" --h 64 --heads 4 --layers 4 \
    --s 32 --batch 16 --vocab 512 --warmup 1 --iters 10 --rounds 3
}

# Measured bubbles beside the simulator's at pp = 4 and 8, one rank per core, static and message-driven stages, with
# and without injected delays (issue 56: each bubble within 0.05 of its prediction, dynamic / static as predicted).
cpu_pipeline() {
  mpirun_core 4 "$bin/optimus-bench" pipeline --pp 4 --q 1 --m 8 --b 8 --s 64 --h 256 --heads 8 --layers 8 \
    --vocab 512 --warmup 2 --iters 15
  local jitter
  for jitter in 0.3; do
    mpirun_core 4 "$bin/optimus-bench" pipeline --pp 4 --q 1 --m 8 --b 8 --s 64 --h 256 --heads 8 --layers 8 \
      --vocab 512 --warmup 2 --iters 10 --schedules gpipe,1f1b,zb --jitter "$jitter"
    mpirun_core 8 "$bin/optimus-bench" pipeline --pp 8 --q 1 --m 16 --b 16 --s 64 --h 256 --heads 8 --layers 16 \
      --vocab 512 --warmup 2 --iters 10 --schedules gpipe,1f1b --jitter "$jitter"
  done
}

sanitize() {
  local tool
  for tool in memcheck racecheck; do
    compute-sanitizer --tool "$tool" --error-exitcode 1 "$bin/test_cuda" --test-case='kernels on the GPU*' | tail -5
  done
}

run() {
  while (($#)); do
    case "$1" in
      --out) out="$2"; shift ;;
      --budget) budget="$2"; shift ;;
      --sections) sections="$2"; shift ;;
      *) echo "lent_machine.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
  done
  [[ -f "$lent_dir/bundle.tar.xz" ]] || { echo "lent_machine.sh: no $lent_dir/bundle.tar.xz: run 'pack' here first" >&2
                                          exit 2; }
  mkdir -p "$out"
  results="$out/results.txt"  # markdown
  unpack
  echo "# Lent machine run, $(date -u +%FT%TZ), programs built at commit $(cat "$lent_dir/unpacked/commit")" >"$results"
  # scaling.sh appends "-n P" and the program to its launcher: this one binds a rank per core.
  printf '#!/usr/bin/env bash\n[[ "$1" == -n ]] && shift\nmpirun_core "$@"\n' >"$bin/mpirun_core_launcher"
  chmod +x "$bin/mpirun_core_launcher"
  export bin out root_dir lent_dir
  export -f mpirun_core $sections_all
  local name
  for name in $sections; do
    case " $sections_all " in
      *" $name "*) section "$name" "$(section_seconds "$name")" "$name" ;;
      *) echo "lent_machine.sh: unknown section '$name' (sections: $sections_all)" >&2; exit 2 ;;
    esac
  done
  (cd "$out" && tar -czf scaling.tar.gz scaling-e* calibration-p*.json 2>/dev/null && rm -rf scaling-e*)
  echo "lent_machine.sh: $results ($SECONDS s)"
}

section_seconds() {  # the most each section may take (s)
  case "$1" in
    facts) echo 60 ;; gpu_tests) echo 150 ;; gpu_bench) echo 120 ;; gpu_profile) echo 120 ;;
    gpu_pipeline) echo 60 ;; gpu_mpi) echo 60 ;;
    cpu_scaling) echo 300 ;;
    cpu_calibrate) echo 30 ;; cpu_plan) echo 150 ;; cpu_pipeline) echo 120 ;; sanitize) echo 120 ;;
    gpu_matrix) echo 120 ;; cpu_sweep) echo 120 ;;
  esac
}

case "${1:-}" in
  pack) pack ;;
  run) shift; run "$@" ;;
  *) echo "usage: scripts/lent_machine.sh pack | run [--out DIR] [--budget SECONDS] [--sections \"...\"]" >&2; exit 2 ;;
esac
