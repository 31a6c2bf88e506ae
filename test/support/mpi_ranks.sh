# Sourced by the CLI tests: the ranks of a job by the PID of the mpirun the test started.
# Open MPI 4.1's mpirun forks its local ranks itself, so they are its children. Tests signal
# these PIDs only, never a pattern over the machine's processes: other jobs (and other
# tests' ranks) run beside them.

# rank_pids <mpirun pid>: the PIDs of its children running $bin, one a line.
rank_pids() {
  local p
  for p in $(pgrep -P "$1" 2>/dev/null); do
    [[ $(readlink "/proc/$p/exe" 2>/dev/null) == "$(readlink -f "$bin")" ]] && echo "$p"
  done
  return 0
}

# rank_pid <mpirun pid> <rank>: the PID of that MPI rank (from its OMPI_COMM_WORLD_RANK);
# non-zero if the job has no such rank.
rank_pid() {
  local p r
  for p in $(rank_pids "$1"); do
    r=$(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [[ $r == "$2" ]] && { echo "$p"; return 0; }
  done
  return 1
}

# signal_ranks <signal> <mpirun pid>: sends the signal to every rank of the job; non-zero if
# there was none to signal.
signal_ranks() {
  local pids
  pids=$(rank_pids "$2")
  [[ -n $pids ]] && kill "-$1" $pids
}

# kill_job <mpirun pid>: SIGKILL to the ranks and to mpirun itself, for a test that gives up.
kill_job() {
  local pids
  pids=$(rank_pids "$1")
  kill -KILL $pids "$1" 2>/dev/null
  return 0
}
