#!/usr/bin/env bash
# Tests scripts/mpirun/run.sh: the mpirun line --dry-run prints for given flags (exact
# substrings, cores fixed with --cores-per-node so the machine does not matter), usage
# errors exit 2, and a real two-rank launch hands OMP_NUM_THREADS to every rank; slurm.sbatch's
# launch line, and its SIGTERM -> launcher -> requeue path with a fake srun and scontrol.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
run=$here/../../scripts/mpirun/run.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# expect_has LINE SUBSTRING...
expect_has() {
  local line=$1 s; shift
  for s in "$@"; do
    [[ $line == *"$s"* ]] || fail "expected '$s' in: $line"
  done
}
expect_not() {
  local line=$1 s; shift
  for s in "$@"; do
    [[ $line != *"$s"* ]] || fail "did not expect '$s' in: $line"
  done
}
# expect_exit CODE ARGS... : run.sh ARGS exits with CODE and says why on stderr
expect_exit() {
  local want=$1; shift
  "$run" "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  [[ $got -eq $want ]] || fail "run.sh $* exited $got, expected $want"
  if [[ $want -ne 0 && ! -s $tmp/err ]]; then fail "run.sh $* gave no error message"; fi
}

# 1. Two ranks on a 4-core host: 2 threads each, bound to cores, OpenMP pinned.
line=$("$run" --dry-run --cores-per-node 4 -np 2 train --model lenet5 --epochs 1)
expect_has "$line" "mpirun -np 2 " "--map-by ppr:2:node:PE=2 --bind-to core" \
  "-x OMP_NUM_THREADS=2" "-x OMP_PROC_BIND=close" "-x OMP_PLACES=cores" \
  "build/apps/ringtrain train --model lenet5 --epochs 1"
expect_not "$line" "--oversubscribe" "--hostfile"
# SIGTERM to mpirun must leave the ranks time for their checkpoint (not Open MPI's 1 s)...
expect_has "$line" "--mca odls_base_sigkill_timeout 10"
# ...unless the caller chose the value.
line=$("$run" --dry-run --cores-per-node 4 -np 2 --mpirun-arg --mca --mpirun-arg odls_base_sigkill_timeout \
  --mpirun-arg 90 train)
expect_has "$line" "--mca odls_base_sigkill_timeout 90"
expect_not "$line" "odls_base_sigkill_timeout 10"
line=$(OMPI_MCA_odls_base_sigkill_timeout=5 "$run" --dry-run --cores-per-node 4 -np 2 train)
expect_not "$line" "odls_base_sigkill_timeout"
if [[ $(id -u) -eq 0 ]]; then
  [[ $line == "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "* ]] ||
    fail "as root the line must start with the Open MPI root variables: $line"
else
  expect_not "$line" "OMPI_ALLOW_RUN_AS_ROOT"
fi

# 2. Five ranks on 2 cores: oversubscribed, unbound, one thread each, no OpenMP pinning.
line=$("$run" --dry-run --cores-per-node 2 -np 5 train)
expect_has "$line" "-np 5 " "--map-by ppr:5:node --bind-to none" "--oversubscribe" \
  "-x OMP_NUM_THREADS=1"
expect_not "$line" "PE=" "OMP_PROC_BIND"

# 3. Threads that do not fit (2 ranks x 3 threads on 4 cores): unbound, not oversubscribed.
line=$("$run" --dry-run --cores-per-node 4 -np 2 --threads 3 train)
expect_has "$line" "--map-by ppr:2:node --bind-to none" "-x OMP_NUM_THREADS=3"
expect_not "$line" "--oversubscribe"

# 4. --no-bind, --env, pass-through options (kept in order, before the binary), --bin,
#    and ringtrain arguments after -- quoted for the shell.
line=$("$run" --dry-run --cores-per-node 8 -np 2 --no-bind --env DNNL_VERBOSE=1 --env HOME \
  --mca btl_tcp_if_include veth0 --mpirun-arg --report-bindings --bin /opt/rt/ringtrain \
  -- train --tag "two words")
expect_has "$line" "--bind-to none" "-x OMP_NUM_THREADS=4" "-x DNNL_VERBOSE=1" "-x HOME" \
  "--mca btl_tcp_if_include veth0 --report-bindings /opt/rt/ringtrain train --tag two\\ words"
expect_not "$line" "PE="

# 5. A hostfile with two hosts (comments and blank lines ignored), 2 ranks per node.
printf '# cluster\nnode1 slots=2\n\nnode2 slots=2  # second\n' >"$tmp/hosts"
line=$("$run" --dry-run --cores-per-node 2 -np 4 --ppn 2 --hostfile "$tmp/hosts" train)
expect_has "$line" "-np 4 --hostfile $tmp/hosts --map-by ppr:2:node:PE=1 --bind-to core" \
  "-x OMP_NUM_THREADS=1"
expect_not "$line" "--oversubscribe"
# ... without --ppn the ranks spread evenly: 3 ranks on 2 nodes -> 2 per node.
line=$("$run" --dry-run --cores-per-node 4 -np 3 --hostfile "$tmp/hosts" train)
expect_has "$line" "--map-by ppr:2:node:PE=2"

# ... and a hostfile with fewer slots than ranks per node is flagged before mpirun refuses.
printf 'node1 slots=1\nnode2 slots=1\n' >"$tmp/hosts1"
"$run" --dry-run --cores-per-node 4 -np 4 --ppn 2 --hostfile "$tmp/hosts1" train \
  >/dev/null 2>"$tmp/err"
grep -q "slots=1 < 2 ranks per node" "$tmp/err" || fail "no warning for slots < ranks per node"
"$run" --dry-run --cores-per-node 4 -np 2 --ppn 1 --hostfile "$tmp/hosts1" train \
  >/dev/null 2>"$tmp/err"
[[ ! -s $tmp/err ]] || fail "no warning expected when slots suffice: $(cat "$tmp/err")"
# More ranks per node than cores: run.sh adds --oversubscribe itself, so no warning.
line=$("$run" --dry-run --cores-per-node 1 -np 4 --ppn 2 --hostfile "$tmp/hosts1" train 2>"$tmp/err")
expect_has "$line" "--oversubscribe"
[[ ! -s $tmp/err ]] || fail "slots warning although run.sh added --oversubscribe: $(cat "$tmp/err")"

# 5b. --opt=value is --opt value; a switch given a value is a usage error.
line=$("$run" --dry-run --cores-per-node=4 --np=2 --threads=1 --env=HOME --mpirun-arg=--report-bindings \
  --bin=/opt/rt/ringtrain train --epochs=3)
expect_has "$line" "-np 2 " "PE=1" "-x OMP_NUM_THREADS=1" "-x HOME" \
  "--report-bindings /opt/rt/ringtrain train --epochs=3"
expect_exit 2 --np=0 train
expect_exit 2 --dry-run=yes train
expect_exit 2 --mca=btl train

# 6. Usage errors exit 2 with a message.
expect_exit 2 --bogus-flag train
expect_exit 2 -np 0 train
expect_exit 2 -np two train
expect_exit 2 --threads 1.5 train
expect_exit 2 --ppn 1 -np 2 train                          # no hostfile: one node only
expect_exit 2 -np 5 --ppn 2 --hostfile "$tmp/hosts" train  # 5 > 2 nodes x 2
expect_exit 2 --hostfile "$tmp/missing" train
expect_exit 2 -np 2                                        # nothing to run
expect_exit 2 --mca only-one
expect_exit 2 -np
grep -q "unknown option '--bogus-flag'" <("$run" --bogus-flag train 2>&1) ||
  fail "the error should name the bad flag"
# A missing binary is a runtime error (1), not a usage error.
expect_exit 1 -np 1 --bin "$tmp/no-such-binary" train
expect_exit 0 --help

# 7. A real launch: every rank sees the OMP_NUM_THREADS run.sh chose.
# shellcheck disable=SC2016  # expanded by the rank's shell, not this one
out=$("$run" -np 2 --threads 1 --bin /bin/sh -- -c 'echo "omp=$OMP_NUM_THREADS"' 2>&1)
rc=$?
[[ $rc -eq 0 ]] || fail "real launch exited $rc: $out"
n=$(grep -c '^omp=1$' <<<"$out")
[[ $n -eq 2 ]] || fail "expected 2 ranks printing omp=1, got $n: $out"

# 8. slurm.sbatch: OMP_NUM_THREADS and the launch line follow the allocation.
sbatch=$here/../../scripts/mpirun/slurm.sbatch
line=$(env DRY_RUN=1 RINGTRAIN_REPO="$here/../.." TMPDIR="$tmp" SLURM_JOB_ID=7 \
  SLURM_JOB_NUM_NODES=2 \
  SLURM_NTASKS_PER_NODE='2(x2)' SLURM_CPUS_PER_TASK=4 RUN_DIR="$tmp/run" bash "$sbatch" | tail -1)
expect_has "$line" "OMP_NUM_THREADS=4 srun --mpi=pmix --ntasks=4 --ntasks-per-node=2" \
  "--cpus-per-task=4" "train --model lenet5" "--run-dir $tmp/run"
line=$(env DRY_RUN=1 LAUNCHER=mpirun RINGTRAIN_REPO="$here/../.." TMPDIR="$tmp" SLURM_JOB_ID=7 \
  SLURM_JOB_NUM_NODES=1 \
  SLURM_NTASKS_PER_NODE=2 SLURM_CPUS_PER_TASK=3 SLURM_CPUS_ON_NODE=6 RUN_DIR="$tmp/run" \
  bash "$sbatch" train --model vgg11 | tail -1)
expect_has "$line" "-np 2 --hostfile $tmp/ringtrain-hosts-7 --map-by ppr:2:node:PE=3" \
  "-x OMP_NUM_THREADS=3" "train --model vgg11 --run-dir $tmp/run --resume auto"
line=$(env DRY_RUN=1 RINGTRAIN_REPO="$here/../.." RUN_DIR="$tmp/run" bash "$sbatch" train --resume "$tmp/x.rtck" |
  tail -1)
expect_has "$line" "train --resume $tmp/x.rtck --run-dir $tmp/run"
expect_not "$line" "--resume auto"
# --run-dir=X is the caller's run directory (not a second --run-dir); srun ends the step when
# a rank dies; DRY_RUN with mpirun prints the line that runs (the sigkill delay on it) and
# makes no run directory.
out=$(env DRY_RUN=1 RINGTRAIN_REPO="$here/../.." SLURM_JOB_NUM_NODES=1 bash "$sbatch" train \
  --run-dir="$tmp/own")
expect_has "$out" "--kill-on-bad-exit=1" "train --run-dir=$tmp/own --resume auto" "run dir $tmp/own "
expect_not "$out" "--run-dir $tmp" "runs/slurm-"
line=$(env DRY_RUN=1 LAUNCHER=mpirun RINGTRAIN_REPO="$here/../.." TMPDIR="$tmp" SLURM_JOB_ID=8 \
  RUN_DIR="$tmp/nodir/run" bash "$sbatch" | tail -1)
expect_has "$line" "mpirun -np 1 " "--mca odls_base_sigkill_timeout 10" "--run-dir $tmp/nodir/run"
[[ ! -e $tmp/nodir ]] || fail "DRY_RUN made the run directory's parent"
for directive in "#SBATCH --signal=B:TERM@120" "#SBATCH --requeue" "#SBATCH --open-mode=append"; do
  grep -qx -- "$directive" "$sbatch" || fail "slurm.sbatch lacks '$directive'"
done

# 9. slurm.sbatch passes SIGTERM on to the launcher (a fake srun standing in for Slurm's),
# waits for it to stop, and requeues the job (a fake scontrol records the request).
mkdir -p "$tmp/fake"
cat >"$tmp/fake/srun" <<FAKE
#!/bin/bash
echo "\$*" > "$tmp/srun.args"
sleep 60 &
trap 'echo TERM > "$tmp/srun.term"; kill \$!; exit 0' TERM
wait
FAKE
cat >"$tmp/fake/scontrol" <<FAKE
#!/bin/bash
echo "\$*" >> "$tmp/scontrol.log"
FAKE
chmod +x "$tmp/fake/srun" "$tmp/fake/scontrol"
env PATH="$tmp/fake:$PATH" RINGTRAIN_REPO="$here/../.." SLURM_JOB_ID=9 SLURM_JOB_NUM_NODES=1 \
  RUN_DIR="$tmp/run9" bash "$sbatch" >"$tmp/sbatch.out" 2>&1 &
sbatch_pid=$!
for _ in $(seq 1 100); do [[ -s $tmp/srun.args ]] && break; sleep 0.1; done
[[ -s $tmp/srun.args ]] || fail "slurm.sbatch did not start srun: $(cat "$tmp/sbatch.out")"
expect_has "$(cat "$tmp/srun.args")" "--mpi=pmix" "train --model lenet5" "--run-dir $tmp/run9 --resume auto"
kill -TERM "$sbatch_pid"
wait "$sbatch_pid"
rc=$?
[[ -s $tmp/srun.term ]] || fail "srun did not get the SIGTERM: $(cat "$tmp/sbatch.out")"
[[ $rc -eq 0 ]] || fail "slurm.sbatch exited $rc after srun stopped cleanly: $(cat "$tmp/sbatch.out")"
[[ $(cat "$tmp/scontrol.log" 2>/dev/null) == "requeue 9" ]] || fail "slurm.sbatch did not requeue job 9"

# 10. The mpirun environment has one home: sourcing run.sh defines its helpers and runs
# nothing (no launch, no change to the caller's shell options), and the scripts that start
# mpirun or ctest themselves take the root-only variables from it.
out=$(bash -c 'set +eu; source "$1" -np 9 train; echo "threads=$(threads_per_rank 3 8) $(threads_per_rank 4 2)"
  needs_oversubscribe 3 2 && echo over; needs_oversubscribe 2 2 || echo fits
  mpirun_root_env; echo "root_env=${MPIRUN_ROOT_ENV[*]}"; [[ $- == *e* ]] && echo errexit' _ "$run" 2>&1)
expect_has "$out" "threads=2 1" "over" "fits"
expect_not "$out" "errexit" "mpirun"
if [[ $(id -u) -eq 0 ]]; then
  expect_has "$out" "root_env=OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
else
  expect_has "$out" "root_env="
fi
for script in scripts/quickstart.sh scripts/test.sh scripts/mpirun/cluster.sh; do
  ! grep -q "OMPI_ALLOW_RUN_AS_ROOT" "$here/../../$script" || fail "$script sets the root-only variables itself"
done
grep -q 'scripts/mpirun/run.sh -np "$np"' "$here/../../scripts/quickstart.sh" || fail "quickstart.sh does not launch through run.sh"

if ((fails)); then
  echo "test_run_sh: $fails failure(s)"
  exit 1
fi
echo "test_run_sh: all checks passed"
