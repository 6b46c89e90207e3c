#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# An emulated cluster on one machine (docs/emulated-cluster.md): N hosts as network namespaces,
# each joined to one bridge by a veth pair whose both directions `tc` shapes (tbf rate, netem
# delay), and MPICH jobs launched over them with hydra through scripts/nsexec, UCX restricted
# to TCP on each host's eth0 so shared memory cannot bypass the links, with its eager protocol
# for every size (UCX_RNDV_THRESH=inf unless set in the environment). Needs root.
#
#   scripts/emulated-cluster.sh run [UP OPTIONS] [EXEC OPTIONS] [JOB OPTIONS] -- PROGRAM ARGS...
#       set up, run PROGRAM with mpiexec on every host, tear down (also on error, Ctrl-C,
#       SIGTERM); exits with mpiexec's exit status
#   scripts/emulated-cluster.sh up [UP OPTIONS]       create (or re-create) the cluster
#   scripts/emulated-cluster.sh exec [EXEC OPTIONS] [JOB OPTIONS] -- PROGRAM ARGS...
#                                                     run mpiexec over a cluster made by `up`
#   scripts/emulated-cluster.sh down [--force]        remove everything (idempotent)
#   scripts/emulated-cluster.sh status                show hosts, addresses, links, qdiscs
#   scripts/emulated-cluster.sh link-down HOST        take HOST's link down (fault tests)
#   scripts/emulated-cluster.sh link-up HOST          and bring it back
#   scripts/emulated-cluster.sh shell HOST -- CMD...  run a command inside HOST's namespace
#
# UP OPTIONS:   --hosts N (2)  --rate R (1gbit; tc units, or none)  --delay D (0; e.g. 100us,
#               needs sch_netem)  --burst B (tbf burst; default max(128kb, rate x 1 ms))
#               --subnet A.B.C (10.77.0: hosts A.B.C.1.., bridge A.B.C.254)
# EXEC OPTIONS: --ppn K (1)  --mpiexec-arg ARG (repeatable, passed to mpiexec)
# JOB OPTIONS (run, exec): --timeout SECONDS (kill the job, exit 124)
#               --fault HOST:AFTER[:FOR] (repeatable: take HOST's link down AFTER seconds after
#               the launch, and up again FOR seconds later if given)
# ALL:          --prefix P (gcemu; or $GRADCOMP_EMU_PREFIX): names P-hI (namespaces and host
#               names), P-vI (host-side veth ends in the root namespace), P-br (bridge)
# HOST is an index (1), h1, P-h1 or the host's address.
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nsexec="$script_dir/nsexec"

prefix=${GRADCOMP_EMU_PREFIX:-gcemu}
hosts=2
rate=1gbit
delay=0
burst=""
subnet=10.77.0
ppn=1
timeout_s=""
force=0
mpiexec_extra=()
faults=()
program=()

# messages go to the stderr the script started with, also from a trap that runs while a
# redirection is active (the timeout's handler runs inside `{ wait; } 2>/dev/null`)
exec {msg_fd}>&2
die() {
  echo "emulated-cluster: error: $*" >&"$msg_fd"
  exit 2
}
note() { echo "emulated-cluster: $*" >&"$msg_fd"; }

usage() {
  sed -n '3,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
}

# ---------------------------------------------------------------- argument parsing

parse_options() {
  while [[ $# -gt 0 ]]; do
    case $1 in
      --hosts) hosts=${2:?--hosts needs a value}; shift 2 ;;
      --rate) rate=${2:?--rate needs a value}; shift 2 ;;
      --delay) delay=${2:?--delay needs a value}; shift 2 ;;
      --burst) burst=${2:?--burst needs a value}; shift 2 ;;
      --subnet) subnet=${2:?--subnet needs a value}; shift 2 ;;
      --prefix) prefix=${2:?--prefix needs a value}; shift 2 ;;
      --ppn) ppn=${2:?--ppn needs a value}; shift 2 ;;
      --timeout) timeout_s=${2:?--timeout needs a value}; shift 2 ;;
      --fault) faults+=("${2:?--fault needs HOST:AFTER[:FOR]}"); shift 2 ;;
      --mpiexec-arg) mpiexec_extra+=("${2?--mpiexec-arg needs a value}"); shift 2 ;;
      --force) force=1; shift ;;
      -h | --help) usage; exit 0 ;;
      --) shift; program=("$@"); return 0 ;;
      *) die "unknown option '$1' (see --help)" ;;
    esac
  done
}

validate_options() {
  [[ $prefix =~ ^[a-z][a-z0-9]{0,7}$ ]] ||
    die "--prefix must be 1-8 lower-case letters or digits, starting with a letter (got '$prefix')"
  if ! [[ $hosts =~ ^[0-9]+$ ]] || ((hosts < 1 || hosts > 250)); then die "--hosts must be 1..250"; fi
  if ! [[ $ppn =~ ^[0-9]+$ ]] || ((ppn < 1)); then die "--ppn must be a positive integer"; fi
  [[ $subnet =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] ||
    die "--subnet must be the first three octets of a /24 (e.g. 10.77.0)"
  local a=${BASH_REMATCH[1]} b=${BASH_REMATCH[2]}
  ((a == 10 || (a == 172 && b >= 16 && b <= 31) || (a == 192 && b == 168))) ||
    die "--subnet must be a private (RFC 1918) range"
  [[ -z $timeout_s || $timeout_s =~ ^[0-9]+$ ]] || die "--timeout must be whole seconds"
  rate_bytes=$(rate_to_bytes_per_s "$rate") || die "cannot parse --rate '$rate' (e.g. 1gbit, 10gbit, 500mbit, none)"
  delay_us=$(delay_to_us "$delay") || die "cannot parse --delay '$delay' (e.g. 100us, 1ms, 0)"
  if [[ -z $burst ]]; then
    # tbf needs a bucket of at least one timer tick's worth of bytes; 1 ms of traffic,
    # never less than 128 KiB (which holds a 64 KiB GSO packet twice)
    local b=$((rate_bytes / 1000))
    ((b < 131072)) && b=131072
    burst=${b}b
  fi
}

# bytes per second for a tc rate ("none"/0 -> 0)
rate_to_bytes_per_s() {
  local r=${1,,}
  [[ $r == none || $r == 0 ]] && { echo 0; return 0; }
  [[ $r =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$ ]] || return 1
  local n=${BASH_REMATCH[1]} u=${BASH_REMATCH[3]} m
  case $u in
    bit) m=0.125 ;; kbit) m=125 ;; mbit) m=125000 ;; gbit) m=125000000 ;; tbit) m=125000000000 ;;
    bps) m=1 ;; kbps) m=1000 ;; mbps) m=1000000 ;; gbps) m=1000000000 ;; tbps) m=1000000000000 ;;
  esac
  awk -v n="$n" -v m="$m" 'BEGIN { v = n * m; if (v < 1) exit 1; printf "%d\n", v }'
}

# microseconds for a tc time ("none"/0 -> 0)
delay_to_us() {
  local d=${1,,}
  [[ $d == none || $d == 0 ]] && { echo 0; return 0; }
  [[ $d =~ ^([0-9]+(\.[0-9]+)?)(us|usec|ms|msec|s|sec)$ ]] || return 1
  local n=${BASH_REMATCH[1]} u=${BASH_REMATCH[3]} m
  case $u in us | usec) m=1 ;; ms | msec) m=1000 ;; s | sec) m=1000000 ;; esac
  awk -v n="$n" -v m="$m" 'BEGIN { printf "%d\n", n * m }'
}

# ---------------------------------------------------------------- names and checks

bridge() { echo "$prefix-br"; }
ns_name() { echo "$prefix-h$1"; }
veth_name() { echo "$prefix-v$1"; }
host_addr() { echo "$subnet.$(($1 + 1))"; }
bridge_addr() { echo "$subnet.254"; }
lock_file() { echo "/run/lock/gradcomp-emulated-cluster-$prefix.lock"; }

preflight() {
  [[ $(id -u) -eq 0 ]] ||
    die "must run as root (network namespaces, veth pairs, bridges and tc need CAP_NET_ADMIN and CAP_SYS_ADMIN)"
  command -v ip >/dev/null || die "'ip' not found: install iproute2 (apt-get install iproute2)"
  command -v tc >/dev/null || die "'tc' not found: install iproute2 (apt-get install iproute2)"
  ip netns list >/dev/null 2>&1 || die "'ip netns' is unavailable (no network-namespace support in this iproute2 or kernel)"
  command -v unshare >/dev/null || die "'unshare' not found: install util-linux"
  command -v flock >/dev/null || die "'flock' not found: install util-linux"
}

need_mpiexec() {
  command -v mpiexec >/dev/null || die "mpiexec not found: install mpich (scripts/install-deps.sh)"
  [[ -x $nsexec ]] || die "launcher helper $nsexec missing or not executable"
}

# namespaces of this prefix, as host indices in increasing order
existing_hosts() {
  ip netns list | awk '{print $1}' | sed -n "s/^$prefix-h\([0-9][0-9]*\)\$/\1/p" | sort -n
}

# host argument (index, hI, P-hI, address) -> index
host_index() {
  local h=$1 i
  if [[ $h =~ ^[0-9]+$ ]]; then
    i=$h
  elif [[ $h =~ ^h([0-9]+)$ || $h =~ ^$prefix-h([0-9]+)$ ]]; then
    i=${BASH_REMATCH[1]}
  elif [[ $h =~ ^[0-9]+\.[0-9]+\.[0-9]+\.([0-9]+)$ ]]; then
    i=$((BASH_REMATCH[1] - 1))
    [[ $(ip -n "$(ns_name "$i")" -4 -o addr show dev eth0 2>/dev/null) == *" inet $h/"* ]] ||
      die "no host of cluster '$prefix' has address $h"
  else
    die "bad host '$h' (an index, h1, $prefix-h1 or an address)"
  fi
  ip netns list | awk '{print $1}' | grep -qxF "$(ns_name "$i")" ||
    die "host $(ns_name "$i") does not exist (is the cluster '$prefix' up?)"
  echo "$i"
}

# refuse a subnet that something other than this cluster's bridge already uses
check_subnet_free() {
  local line dev
  while read -r line; do
    [[ -z $line ]] && continue
    dev=$(awk '{print $2}' <<<"$line")
    [[ $dev == "$(bridge)" ]] && continue
    die "subnet $subnet.0/24 is already used by interface $dev (another cluster? pick --subnet and --prefix)"
  done < <(ip -4 -o addr show to "$subnet.0/24")
  local routes
  routes=$(ip -4 route show root "$subnet.0/24" | grep -v " dev $(bridge) " || true)
  [[ -z $routes ]] ||
    die "subnet $subnet.0/24 is already routed in the root namespace (${routes%%$'\n'*}); pick --subnet"
}

sysctl_write() { # path value (silently skipped where the knob does not exist)
  if [[ -w $1 ]]; then echo "$2" >"$1" 2>/dev/null || true; fi
}

# ---------------------------------------------------------------- set-up and tear-down

# Root-side tbf (the host's downlink: what the switch port sends to it) and the host-side
# qdiscs (its uplink: tbf, with netem delay under it when --delay is given).
shape() {
  local i=$1 ns veth
  ns=$(ns_name "$i")
  veth=$(veth_name "$i")
  if ((rate_bytes > 0)); then
    tc qdisc replace dev "$veth" root handle 1: tbf rate "$rate" burst "$burst" latency 50ms
    tc -n "$ns" qdisc replace dev eth0 root handle 1: tbf rate "$rate" burst "$burst" latency 50ms
  fi
  if ((delay_us > 0)); then
    local parent=(root handle 1:)
    ((rate_bytes > 0)) && parent=(parent 1:1 handle 10:)
    # queue limit in packets: twice the bandwidth-delay product in 1500-byte packets, >= 1000
    local limit=$(((rate_bytes > 0 ? rate_bytes : 1250000000) * delay_us * 2 / 1500 / 1000000))
    ((limit < 1000)) && limit=1000
    local err
    if ! err=$(tc -n "$ns" qdisc replace dev eth0 "${parent[@]}" netem delay "$delay" limit "$limit" 2>&1); then
      die "tc cannot add 'netem delay $delay' ($err): this kernel has no sch_netem (CONFIG_NET_SCH_NETEM unset or module not loadable), so --delay is unavailable here; run with --delay 0"
    fi
  fi
}

do_up() {
  check_subnet_free
  do_down quiet
  local br i ns veth
  br=$(bridge)
  note "creating $hosts hosts ($prefix-h0..$prefix-h$((hosts - 1)), $subnet.1..$subnet.$hosts), bridge $br ($(bridge_addr)), rate $rate, delay $delay, burst $burst"
  ip link add "$br" type bridge stp_state 0
  sysctl_write "/proc/sys/net/ipv6/conf/$br/disable_ipv6" 1
  ip addr add "$(bridge_addr)/24" dev "$br"
  ip link set "$br" up
  for ((i = 0; i < hosts; i++)); do
    ns=$(ns_name "$i")
    veth=$(veth_name "$i")
    ip netns add "$ns"
    # shellcheck disable=SC2016
    ip netns exec "$ns" bash -c 'for f in /proc/sys/net/ipv6/conf/{all,default}/disable_ipv6; do [[ -w $f ]] && echo 1 >"$f"; done; true'
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    sysctl_write "/proc/sys/net/ipv6/conf/$veth/disable_ipv6" 1
    ip link set "$veth" master "$br"
    ip link set "$veth" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(host_addr "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
    shape "$i"
  done
  # /etc/netns/NS/hosts is bind-mounted over /etc/hosts by `ip netns exec`: every host name
  # resolves inside every namespace without touching the machine's /etc/hosts (or DNS)
  for ((i = 0; i < hosts; i++)); do
    ns=$(ns_name "$i")
    mkdir -p "/etc/netns/$ns"
    {
      echo "127.0.0.1 localhost"
      local j
      for ((j = 0; j < hosts; j++)); do echo "$(host_addr "$j") $(ns_name "$j")"; done
    } >"/etc/netns/$ns/hosts"
  done
}

# kill what still runs inside a namespace (processes this script's jobs started there)
kill_ns_processes() {
  local ns=$1 pids try
  for try in TERM TERM TERM KILL; do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -z $pids ]] && return 0
    # shellcheck disable=SC2086
    kill -"$try" $pids 2>/dev/null || true
    sleep 0.5
  done
}

do_down() {
  local quiet=${1:-} i ns dev removed=0
  for i in $(existing_hosts); do
    ns=$(ns_name "$i")
    kill_ns_processes "$ns"
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
    removed=$((removed + 1))
  done
  # host-side veth ends left behind (a namespace kept alive elsewhere, or a half-made host)
  for dev in $(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^$prefix-v[0-9]+\$" || true); do
    ip link del "$dev" 2>/dev/null || true
  done
  ip link del "$(bridge)" 2>/dev/null || true
  # stray /etc/netns entries of this prefix (e.g. a crash between ip netns del and rm)
  rm -rf /etc/netns/"$prefix"-h[0-9]* 2>/dev/null || true
  rmdir /etc/netns 2>/dev/null || true
  if [[ -z $quiet ]]; then
    note "removed cluster '$prefix' ($removed hosts)"
  elif ((removed > 0)); then
    note "removed what was left of an earlier cluster '$prefix' ($removed hosts)"
  fi
  return 0
}

# ---------------------------------------------------------------- running jobs

mpiexec_pid=""

# runs a command without the cluster's lock file descriptor, so that a job's processes never
# keep the lock after this script has gone
without_lock() {
  close_lock
  exec {msg_fd}>&-
  exec "$@"
}

close_lock() {
  if [[ -n $lock_fd ]]; then
    exec {lock_fd}>&-
  fi
}

launch() { # starts mpiexec in the background; sets mpiexec_pid
  ((${#program[@]} > 0)) || die "no program given (... -- PROGRAM ARGS)"
  local list=() map="" i n=0
  for i in $(existing_hosts); do
    list+=("$(host_addr_of "$i")")
    map+="$(host_addr_of "$i")=$(ns_name "$i") "
    n=$((n + 1))
  done
  ((n > 0)) || die "cluster '$prefix' is not up"
  local IFS=,
  local hostlist="${list[*]}"
  unset IFS
  export GRADCOMP_EMU_HOSTMAP=$map
  # UCX's eager protocol for every message size: a rendezvous (UCX's default above a few KB)
  # waits for the receiver's progress before its data moves, which cost a 4-rank dense ring
  # 4-11 % of a training iteration on these 2-core machines (docs/transport-benchmarks.md,
  # "Dense ring in training"); a value set by the caller is kept
  local rndv_thresh=${UCX_RNDV_THRESH:-inf}
  export UCX_TLS=tcp,self UCX_NET_DEVICES=eth0 UCX_RNDV_THRESH=$rndv_thresh
  # shellcheck disable=SC2054  # tcp,self is one argument
  local cmd=(mpiexec -launcher ssh -launcher-exec "$nsexec" -iface "$(bridge)"
    -hosts "$hostlist" -ppn "$ppn" -n $((n * ppn))
    -genv UCX_TLS tcp,self -genv UCX_NET_DEVICES eth0 -genv UCX_RNDV_THRESH "$rndv_thresh"
    "${mpiexec_extra[@]}" "${program[@]}")
  note "launching $((n * ppn)) ranks on $n hosts ($ppn per host): ${cmd[*]@Q}"
  # a background job of a non-interactive shell reads /dev/null: hand it the real stdin
  exec {stdin_fd}<&0
  without_lock "${cmd[@]}" <&"$stdin_fd" &
  mpiexec_pid=$!
  exec {stdin_fd}<&-
}

# the address on eth0 inside host i's namespace (works for clusters made with any --subnet)
host_addr_of() {
  ip -n "$(ns_name "$1")" -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1
}

# "PID:STARTTIME" of every descendant of a process (mpiexec's launcher children, the proxies,
# the ranks); the start time lets a later kill skip a PID the system has reused meanwhile
descendants() {
  local kid
  for kid in $(ps -o pid= --ppid "$1" 2>/dev/null || true); do
    echo "$kid:$(awk '{print $22}' "/proc/$kid/stat" 2>/dev/null)"
    descendants "$kid"
  done
}

# stop the job: SIGTERM to mpiexec (hydra passes it on to the ranks), then SIGKILL to whatever
# is left of its process tree after 5 s (mpiexec cannot reach a proxy whose link is down)
stop_mpiexec() {
  [[ -n $mpiexec_pid ]] || return 0
  local tree entry pid _
  tree=$(descendants "$mpiexec_pid")
  if kill -0 "$mpiexec_pid" 2>/dev/null; then
    kill -TERM "$mpiexec_pid" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      kill -0 "$mpiexec_pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL "$mpiexec_pid" 2>/dev/null || true
  fi
  for entry in $tree; do
    pid=${entry%%:*}
    if [[ $(awk '{print $22}' "/proc/$pid/stat" 2>/dev/null) == "${entry#*:}" ]]; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  { wait "$mpiexec_pid"; } 2>/dev/null || true # (no "Killed" job notice)
  mpiexec_pid=""
}

set_link() { # index up|down
  local veth
  veth=$(veth_name "$1")
  ip link set dev "$veth" "$2"
  note "$(date +%T.%3N) link of $(ns_name "$1") ($veth <-> eth0) is $2"
}

# helpers are subshells that sleep, then act; stopping one also stops its sleep
helper_sleeper=""
helper_init() {
  close_lock
  trap '[[ -n $helper_sleeper ]] && kill "$helper_sleeper" 2>/dev/null; exit 0' TERM
}
helper_sleep() {
  sleep "$1" >/dev/null 2>&1 &
  helper_sleeper=$!
  wait "$helper_sleeper"
  helper_sleeper=""
}

helpers=()
start_helpers() {
  local f host after dur i
  for f in "${faults[@]}"; do
    IFS=: read -r host after dur <<<"$f"
    [[ $after =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "bad --fault '$f' (HOST:AFTER[:FOR])"
    [[ -z $dur || $dur =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "bad --fault '$f' (HOST:AFTER[:FOR])"
    i=$(host_index "$host")
    (
      helper_init
      helper_sleep "$after"
      set_link "$i" down
      if [[ -n $dur ]]; then
        helper_sleep "$dur"
        set_link "$i" up
      fi
    ) &
    helpers+=($!)
  done
  if [[ -n $timeout_s ]]; then
    (
      helper_init
      helper_sleep "$timeout_s"
      kill -USR1 $$ # the main shell stops the job (on_timeout)
    ) &
    helpers+=($!)
  fi
}

stop_helpers() {
  local p
  for p in "${helpers[@]}"; do
    kill "$p" 2>/dev/null || true
    { wait "$p"; } 2>/dev/null || true
  done
  helpers=()
}

# ---------------------------------------------------------------- commands

lock_fd=""
take_lock() { # fails when a `run` of the same prefix is alive
  mkdir -p /run/lock
  exec {lock_fd}>"$(lock_file)"
  if ! flock -n "$lock_fd"; then
    if ((force)); then
      note "ignoring the lock on cluster '$prefix' (--force)"
      return 0
    fi
    die "cluster '$prefix' is in use by a running 'emulated-cluster.sh run' (lock $(lock_file)); wait for it, or use another --prefix (down --force removes it anyway)"
  fi
}

cmd_up() {
  take_lock
  trap 'rc=$?; trap - EXIT; if ((rc != 0)); then do_down quiet; fi; exit $rc' EXIT
  do_up
  note "cluster '$prefix' is up; run jobs with: $0 exec --prefix $prefix -- PROGRAM"
}

cmd_down() {
  take_lock
  do_down
}

cmd_status() {
  local i ns any=0
  for i in $(existing_hosts); do
    any=1
    ns=$(ns_name "$i")
    printf '%s  %s  eth0 %s, %s %s\n' "$ns" "$(host_addr_of "$i")" \
      "$(ip -n "$ns" -o link show dev eth0 | grep -o 'state [A-Z]*')" \
      "$(veth_name "$i")" "$(ip -o link show dev "$(veth_name "$i")" 2>/dev/null | grep -o 'state [A-Z]*' || echo missing)"
    tc -n "$ns" qdisc show dev eth0 | sed 's/^/    uplink   /'
    tc qdisc show dev "$(veth_name "$i")" 2>/dev/null | sed 's/^/    downlink /'
  done
  if ip link show dev "$(bridge)" >/dev/null 2>&1; then
    any=1
    echo "bridge $(bridge): $(ip -4 -o addr show dev "$(bridge)" | awk '{print $4}')"
  fi
  ((any)) || echo "cluster '$prefix' is down"
  if [[ -e $(lock_file) ]] && ! flock -n "$(lock_file)" true; then
    echo "a 'run' holds the cluster (lock $(lock_file))"
  fi
}

timed_out=0
on_timeout() {
  note "timeout: the job is still running after ${timeout_s} s; stopping it"
  timed_out=1
  stop_mpiexec
}

job_traps() { # $1 = down: also tear the cluster down on exit
  local down=""
  [[ ${1:-} == down ]] && down="do_down;"
  # shellcheck disable=SC2064  # expand $down now
  trap "rc=\$?; trap - EXIT INT TERM HUP USR1; set +e; stop_helpers; stop_mpiexec; $down exit \$rc" EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
  trap on_timeout USR1
}

run_job() {
  launch
  start_helpers
  local rc=0
  while [[ -n $mpiexec_pid ]]; do
    rc=0
    { wait "$mpiexec_pid"; } 2>/dev/null || rc=$?
    # wait also returns when a trapped signal arrives (USR1: the timeout stopped the job)
    if ! kill -0 "$mpiexec_pid" 2>/dev/null; then
      break
    fi
  done
  mpiexec_pid=""
  ((timed_out)) && rc=124
  stop_helpers
  if ((rc == 0)); then note "job finished (exit 0)"; else note "job failed (exit $rc)"; fi
  return "$rc"
}

cmd_exec() {
  need_mpiexec
  job_traps
  local rc=0
  run_job || rc=$?
  exit "$rc"
}

cmd_run() {
  need_mpiexec
  take_lock
  job_traps down
  do_up
  local rc=0
  run_job || rc=$?
  exit "$rc"
}

main() {
  [[ $# -ge 1 ]] || { usage >&2; exit 2; }
  local command=$1
  shift
  case $command in
    -h | --help | help) usage; exit 0 ;;
    link-down | link-up)
      [[ $# -ge 1 ]] || die "$command needs a HOST"
      local host=$1
      shift
      parse_options "$@"
      validate_options
      preflight
      set_link "$(host_index "$host")" "${command#link-}"
      ;;
    shell)
      [[ $# -ge 1 ]] || die "shell needs a HOST"
      local host=$1
      shift
      parse_options "$@"
      validate_options
      preflight
      ((${#program[@]} > 0)) || program=(bash)
      exec ip netns exec "$(ns_name "$(host_index "$host")")" "${program[@]}"
      ;;
    up | down | status | exec | run)
      parse_options "$@"
      validate_options
      preflight
      "cmd_$command"
      ;;
    *) die "unknown command '$command' (run, up, exec, down, status, link-down, link-up, shell)" ;;
  esac
}

main "$@"
