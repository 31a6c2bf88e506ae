#!/usr/bin/env bash
# Emulated cluster on one machine: K network namespaces (rt-node0..) joined by a bridge,
# each node's link rate-limited with tc tbf in both directions, and mpirun launching into
# the namespaces through an rsh agent (`ip netns exec`), since there is no sshd.
#
#   cluster.sh up [--nodes K] [--slots S] [--link-rate 1gbit] [--burst 512kb] [--latency 50ms]
#                 [--mtu 9000] [--delay 250us]
#   cluster.sh run [--np N] [--map-by node] [--dry-run] -- <program> [args...]
#   cluster.sh run --nodes K [--link-rate R] -np N [run.sh options] -- <ringtrain args...>
#   cluster.sh status
#   cluster.sh fail-node I      # node I dies: kill -9 every process in it, its RAM (/dev/shm)
#                               # is wiped, the agent refuses it
#   cluster.sh revive-node I    # node I answers again (empty: no process, an empty /dev/shm)
#   cluster.sh down
#
# --burst is tc's token-bucket depth in bytes (tc reads "512kb" as 512 KB, "kbit" as bits):
# a burst's worth of data that follows an idle gap leaves at memory speed, so calls of up
# to about that size run faster than any real link of the rate would carry them. Compare
# small messages with --burst 128kb, the smallest depth at which a bulk TCP stream still
# reaches the 1 Gbit/s rate here (64kb: 0.086 GB/s, 16kb: 0.051 GB/s; the qdisc's timer
# granularity needs the depth); see docs/benchmarks/allreduce-targets.md, section 5.
#
# --delay adds a netem delay on each node's own interface (its sending side only), so every
# message between two nodes arrives that much later one way (a round trip: twice it); the
# tbf rate limit then hangs below the netem qdisc. 0 (the default) leaves netem out.
#
# RAM: every process a node runs sees /dev/shm as that node's own directory,
# /dev/shm/ringtrain-cluster<id>-node<i> of this host (the agent bind-mounts it onto /dev/shm
# in a private mount namespace), as a real node has its own RAM: what one node writes to
# /dev/shm (RAM snapshots, Open MPI's shared-memory segments) the others do not see, and a
# failed node's is gone. `down` removes these directories.
#
# Addresses: 10.213.0.(i+1)/24 for rt-node<i>, 10.213.0.254 for the root namespace's end of
# the bridge (mpirun runs there and its daemons call back to it). Nothing outside the
# namespaces, veths, bridge and RAM directories this script creates is changed; `down`
# removes all of it.
#
# Several clusters can be up at once (two experiments side by side): RINGTRAIN_CLUSTER_ID=k
# (1..250) names everything of cluster k apart, rt<k>-node<i> on 10.213.k.0/24 with its own
# bridge, veths and state directory; unset (or 0) is the cluster described above.
set -euo pipefail

readonly kId=${RINGTRAIN_CLUSTER_ID:-0}
[[ $kId =~ ^[0-9]+$ && $kId -le 250 ]] || { echo "cluster.sh: RINGTRAIN_CLUSTER_ID must be 0..250 (got '$kId')" >&2; exit 2; }
if [[ $kId -eq 0 ]]; then
  readonly kTag=rt
  readonly kDefaultState=/run/ringtrain-cluster
else
  readonly kTag=rt$kId
  readonly kDefaultState=/run/ringtrain-cluster-$kId
fi
readonly kPrefix=$kTag-node
readonly kVeth=$kTag-veth
readonly kBridge=$kTag-br0
readonly kSubnet=10.213.$kId
readonly kCidr=$kSubnet.0/24
readonly kHostAddr=$kSubnet.254
readonly kStateDir=${RINGTRAIN_CLUSTER_STATE:-$kDefaultState}
# Node i's /dev/shm is ${kShmPrefix}i (the agent's bind mount; see "RAM" above).
readonly kShmPrefix=/dev/shm/ringtrain-cluster$kId-node

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
}

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

require_tools() {
  [[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces, veth, tc need CAP_NET_ADMIN); try sudo"
  command -v ip >/dev/null 2>&1 || die "'ip' (iproute2) not found; install iproute2"
  command -v tc >/dev/null 2>&1 || die "'tc' (iproute2) not found; install iproute2"
}

node_count() {
  [[ -f $kStateDir/nodes ]] || die "no cluster is up (run: cluster.sh up --nodes K)"
  cat "$kStateDir/nodes"
}

# tbf on one interface (optionally inside a namespace): the rate limit of that direction;
# with a delay other than 0, under a netem qdisc that delays every packet by it.
shape() {
  local ns=$1 dev=$2 rate=$3 burst=$4 latency=$5 delay=${6:-0}
  local -a exec=()
  [[ -n $ns ]] && exec=(ip netns exec "$ns")
  if [[ $delay == 0 ]]; then
    "${exec[@]}" tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency "$latency"
  else
    "${exec[@]}" tc qdisc replace dev "$dev" root handle 1: netem delay "$delay" limit 100000
    "${exec[@]}" tc qdisc replace dev "$dev" parent 1:1 handle 10: tbf rate "$rate" burst "$burst" latency "$latency"
  fi
}

# True when this kernel has tc's netem, tried on the loopback of a scratch namespace.
netem_available() {
  local ns=$kTag-netem-check ok=0
  ip netns add "$ns" || return 1
  ip netns exec "$ns" tc qdisc add dev lo root netem delay 1us >/dev/null 2>&1 || ok=1
  ip netns del "$ns"
  return $ok
}

cmd_up() {
  local nodes=4 slots=1 rate=1gbit burst=512kb latency=50ms mtu=9000 delay=0
  while [[ $# -gt 0 ]]; do
    case $1 in
      --nodes) nodes=$2; shift 2 ;;
      --slots) slots=$2; shift 2 ;;
      --link-rate) rate=$2; shift 2 ;;
      --burst) burst=$2; shift 2 ;;
      --latency) latency=$2; shift 2 ;;
      --mtu) mtu=$2; shift 2 ;;
      --delay) delay=$2; shift 2 ;;
      -h|--help) usage; exit 0 ;;
      *) echo "cluster.sh up: unknown option '$1'" >&2; exit 2 ;;
    esac
  done
  [[ $delay == 0 ]] || netem_available || die "--delay needs tc's netem qdisc (sch_netem), which this kernel does not have"
  [[ $nodes =~ ^[0-9]+$ && $nodes -ge 1 && $nodes -le 64 ]] || { echo "cluster.sh up: --nodes must be 1..64" >&2; exit 2; }
  [[ $slots =~ ^[0-9]+$ && $slots -ge 1 ]] || { echo "cluster.sh up: --slots must be a positive integer" >&2; exit 2; }
  require_tools
  if [[ -f $kStateDir/nodes ]]; then
    die "a cluster is already up ($(cat "$kStateDir/nodes") nodes); run 'cluster.sh down' first"
  fi
  mkdir -p "$kStateDir"
  echo "$nodes" >"$kStateDir/nodes"
  # From here on, a failure leaves state that `down` knows how to remove.
  trap 'echo "cluster.sh: up failed; removing what was made" >&2; cmd_down >/dev/null 2>&1 || true' ERR

  # Jumbo frames (9000 by default, as on cluster Ethernet): with 1500-byte packets the
  # kernel's per-packet work for K emulated nodes saturates the few real cores long before
  # the shaped rate is reached.
  ip link add "$kBridge" type bridge
  ip link set "$kBridge" mtu "$mtu"
  ip addr add "$kHostAddr/24" dev "$kBridge"
  ip link set "$kBridge" up
  : >"$kStateDir/hostfile"
  for ((i = 0; i < nodes; i++)); do
    local ns=$kPrefix$i host_if=$kVeth$i
    ip netns add "$ns"
    ip link add "$host_if" type veth peer name eth0 netns "$ns"
    ip link set "$host_if" mtu "$mtu"
    ip netns exec "$ns" ip link set eth0 mtu "$mtu"
    ip link set "$host_if" master "$kBridge"
    ip link set "$host_if" up
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$ns" ip addr add "$kSubnet.$((i + 1))/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    # Node -> bridge (the node's uplink) and bridge -> node (its downlink).
    shape "$ns" eth0 "$rate" "$burst" "$latency" "$delay"
    shape "" "$host_if" "$rate" "$burst" "$latency"
    echo "$ns slots=$slots" >>"$kStateDir/hostfile"
    # The node's RAM starts empty (a directory left by a cluster of this id that was not
    # taken down goes).
    rm -rf "$kShmPrefix$i"
    mkdir -m 1777 "$kShmPrefix$i"
  done

  # The rsh agent: Open MPI runs `<agent> <host> <orted command line>` as it would ssh.
  # Each node's daemon (and so its ranks) also gets its own UTS namespace named after the
  # node: with one shared host name, two ranks on a node and a neighbour node would put
  # Open MPI's session directories (/tmp/ompi.<hostname>...) in one place and the
  # shared-memory transport's segments collide. MPI_Get_processor_name then names the node.
  # And a mount namespace of its own (unshare's default propagation is private: nothing
  # leaks back to this host) in which the node's RAM directory is bind-mounted onto
  # /dev/shm, so every process launched on node i sees the same /dev/shm, node i's.
  cat >"$kStateDir/netns-agent" <<AGENT
#!/bin/sh
# Open MPI plm_rsh_agent: run the command in the network namespace named by the host, in a
# UTS namespace whose host name is that node's and a mount namespace whose /dev/shm is
# that node's own directory ($kShmPrefix<i>).
host=\$1
shift
case \$host in
  $kPrefix[0-9]*) ;;
  *) echo "netns-agent: unknown host '\$host' (expected $kPrefix<i>)" >&2; exit 255 ;;
esac
# A node failed with 'cluster.sh fail-node' does not answer, as ssh to a dead host would not.
if [ -e "$kStateDir/down/\$host" ]; then
  echo "netns-agent: \$host: host is down" >&2
  exit 255
fi
shm=$kShmPrefix\${host#$kPrefix}
mkdir -p "\$shm" && chmod 1777 "\$shm" || { echo "netns-agent: \$host: cannot make \$shm" >&2; exit 255; }
exec ip netns exec "\$host" unshare --uts --mount /bin/sh -c \\
  'hostname "\$1" && mount --bind "\$2" /dev/shm && exec /bin/sh -c "\$3"' netns-agent "\$host" "\$shm" "\$*"
AGENT
  chmod 755 "$kStateDir/netns-agent"
  echo "$rate $burst $latency mtu $mtu delay $delay" >"$kStateDir/link"
  trap - ERR
  echo "cluster up: $nodes nodes (${kPrefix}0..${kPrefix}$((nodes - 1))), $kCidr, link $rate each way (tbf burst $burst latency $latency, netem delay $delay)"
  echo "hostfile: $kStateDir/hostfile   agent: $kStateDir/netns-agent"
}

cmd_down() {
  require_tools
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$kPrefix[0-9]+$" || true); do
    # Processes left in a namespace (a killed mpirun's daemons) keep it busy.
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -n $pids ]] && kill $pids 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  local link
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E "^$kVeth[0-9]+$" || true); do
    ip link del "$link" 2>/dev/null || true
  done
  ip link show "$kBridge" >/dev/null 2>&1 && ip link del "$kBridge"
  # The nodes' RAM directories (a node whose namespace is gone has nothing mounted on them).
  local shm
  for shm in "$kShmPrefix"*; do
    [[ $shm =~ ^$kShmPrefix[0-9]+$ && -d $shm ]] && rm -rf "$shm"
  done
  rm -rf "$kStateDir"
  echo "cluster down"
}

# fail-node I: what a node failure looks like from outside. Every process in the node's
# namespace (ranks, Open MPI's daemon) gets SIGKILL at once, the agent refuses the host
# until revive-node, so that mpirun and run.sh --elastic see it gone, and the node's RAM
# is lost: once its processes are gone (none can write a file after the wipe), its /dev/shm
# directory is emptied. A revived node starts with an empty /dev/shm.
cmd_fail_node() {
  local i=${1:-}
  require_tools
  local nodes
  nodes=$(node_count)
  [[ $i =~ ^[0-9]+$ && $i -lt $nodes ]] || die "fail-node wants a node number 0..$((nodes - 1)), got '$i'"
  mkdir -p "$kStateDir/down"
  : >"$kStateDir/down/$kPrefix$i"
  local pids
  pids=$(ip netns pids "$kPrefix$i" 2>/dev/null || true)
  [[ -n $pids ]] && kill -9 $pids 2>/dev/null || true
  # SIGKILL is delivered asynchronously: wait (up to 5 s) until no process is left in the
  # namespace (an exited one that is not reaped yet is no longer listed).
  local left=$pids
  for _ in $(seq 100); do
    [[ -z $left ]] && break
    sleep 0.05
    left=$(ip netns pids "$kPrefix$i" 2>/dev/null || true)
  done
  [[ -z $left ]] || echo "cluster.sh: warning: $kPrefix$i: process(es) $left still there 5 s after SIGKILL" >&2
  local shm=$kShmPrefix$i files=0
  if [[ -d $shm ]]; then
    files=$(find "$shm" -mindepth 1 -type f | wc -l)
    find "$shm" -mindepth 1 -delete
  fi
  echo "$kPrefix$i failed: killed $(echo $pids | wc -w) process(es); its RAM ($shm) wiped: $files file(s)"
}

cmd_revive_node() {
  local i=${1:-}
  require_tools
  local nodes
  nodes=$(node_count)
  [[ $i =~ ^[0-9]+$ && $i -lt $nodes ]] || die "revive-node wants a node number 0..$((nodes - 1)), got '$i'"
  rm -f "$kStateDir/down/$kPrefix$i"
  echo "$kPrefix$i answers again"
}

cmd_status() {
  require_tools
  if [[ ! -f $kStateDir/nodes ]]; then
    echo "no cluster up"
    return 0
  fi
  local nodes
  nodes=$(node_count)
  echo "cluster: $nodes nodes, link $(cat "$kStateDir/link" 2>/dev/null) (rate burst latency mtu delay)"
  for ((i = 0; i < nodes; i++)); do
    local ns=$kPrefix$i
    echo "== $ns: $(ip netns exec "$ns" ip -4 -o addr show dev eth0 | awk '{print $4}')"
    ip netns exec "$ns" tc -s qdisc show dev eth0 | sed 's/^/   up:   /'
    tc -s qdisc show dev "$kVeth$i" | sed 's/^/   down: /'
  done
}

# run.sh's interface on the cluster (docs/experiments.md; what sweep.sh --launcher passes):
#   cluster.sh run --nodes K [--link-rate R] [run.sh options] -- <ringtrain arguments>
# --nodes/--link-rate must match the cluster that is up; run.sh gets its hostfile, the
# same MCA options as below and --no-bind (the emulated nodes share this host's cores).
cmd_run_sh() {
  local want_nodes="" want_rate=""
  while [[ $# -gt 0 ]]; do
    case $1 in
      --nodes) want_nodes=$2; shift 2 ;;
      --link-rate) want_rate=$2; shift 2 ;;
      *) break ;;
    esac
  done
  require_tools
  local nodes rate
  nodes=$(node_count)
  rate=$(awk '{print $1}' "$kStateDir/link" 2>/dev/null || true)
  [[ -z $want_nodes || $want_nodes == "$nodes" ]] ||
    die "run --nodes $want_nodes, but the cluster that is up has $nodes nodes"
  [[ -z $want_rate || $want_rate == "$rate" ]] ||
    die "run --link-rate $want_rate, but the cluster that is up has links of $rate"
  exec "$(dirname "${BASH_SOURCE[0]}")/run.sh" --hostfile "$kStateDir/hostfile" --no-bind \
    --mca plm_rsh_agent "$kStateDir/netns-agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca mpi_yield_when_idle 1 --mca orte_startup_timeout "${RINGTRAIN_CLUSTER_STARTUP_TIMEOUT:-60}" \
    --mca pml ob1 --mca btl tcp,vader,self --mca btl_tcp_if_include "$kCidr" \
    --mca oob_tcp_if_include "$kCidr" "$@"
}

cmd_run() {
  case ${1:-} in
    --nodes | --link-rate | -np) cmd_run_sh "$@" ;;
  esac
  local np="" map_by=node dry=0
  while [[ $# -gt 0 ]]; do
    case $1 in
      --np) np=$2; shift 2 ;;
      --map-by) map_by=$2; shift 2 ;;
      --dry-run) dry=1; shift ;;
      --) shift; break ;;
      -h|--help) usage; exit 0 ;;
      *) break ;;
    esac
  done
  [[ $# -gt 0 ]] || { echo "cluster.sh run: no program given (cluster.sh run [--np N] -- program args)" >&2; exit 2; }
  require_tools
  local nodes
  nodes=$(node_count)
  [[ -n $np ]] || np=$nodes
  # The root-only Open MPI variables, from run.sh (sourcing it only defines its helpers).
  # shellcheck source=run.sh
  source "$(dirname "${BASH_SOURCE[0]}")/run.sh"
  mpirun_root_env
  local -a env=()
  ((${#MPIRUN_ROOT_ENV[@]})) && env=(env "${MPIRUN_ROOT_ENV[@]}")
  # ob1 + tcp (+ vader between ranks of one node, as on a real cluster), no UCX: every
  # byte between ranks of different nodes crosses the shaped veth links (ranks under
  # different daemons are never local to each other, so vader never joins two nodes);
  # daemons and ranks talk only on the emulated subnet. The
  # "nodes" share the machine's cores, so idle ranks yield instead of spinning. A daemon
  # that never reports back (seen rarely on this 2-core host, cause not found) ends the
  # launch after the startup timeout instead of hanging; callers may retry.
  local -a cmd=(mpirun --hostfile "$kStateDir/hostfile" -np "$np" --map-by "$map_by" --bind-to none
    --mca plm_rsh_agent "$kStateDir/netns-agent" --mca plm_rsh_no_tree_spawn 1
    --mca mpi_yield_when_idle 1 --mca orte_startup_timeout "${RINGTRAIN_CLUSTER_STARTUP_TIMEOUT:-60}"
    --mca pml ob1 --mca btl tcp,vader,self --mca btl_tcp_if_include "$kCidr"
    --mca oob_tcp_if_include "$kCidr" -x OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" "$@")
  echo "+ ${cmd[*]}"
  [[ $dry -eq 1 ]] && return 0
  # exec: a timeout or Ctrl-C signals mpirun itself, which then ends its daemons.
  exec "${env[@]}" "${cmd[@]}"
}

main() {
  [[ $# -gt 0 ]] || { usage >&2; exit 2; }
  local sub=$1
  shift
  case $sub in
    up) cmd_up "$@" ;;
    down) cmd_down ;;
    status) cmd_status ;;
    fail-node) cmd_fail_node "$@" ;;
    revive-node) cmd_revive_node "$@" ;;
    run) cmd_run "$@" ;;
    -h|--help|help) usage ;;
    *) echo "cluster.sh: unknown command '$sub' (up|down|run|status|fail-node|revive-node)" >&2; exit 2 ;;
  esac
}

main "$@"
