#!/usr/bin/env bash
# A real one-node Slurm cluster on this machine, for the `slurm` tests (tests/test_lm_cluster.py) and for trying
# `python -m joma_lib.lm run --engine slurm` before using a real cluster. Debian/Ubuntu, as root; no systemd
# needed (the daemons are started directly). Safe to run again: it installs, configures and starts only what is
# missing, and waits until the node accepts jobs.
#   bash .ci/slurm_up.sh          install (apt: slurmctld, slurmd, slurm-client, munge), configure, start
#   bash .ci/slurm_up.sh stop     stop the three daemons it started
# The node is this machine (`hostname -s`, `nproc` CPUs) in one partition, `debug`; accounting is off
# (sacct has nothing to report, squeue does).
set -euo pipefail

CONF=/etc/slurm/slurm.conf
PIDS=(/run/slurmd.pid /run/slurmctld.pid /run/munge/munged.pid)

# running PIDFILE: its process is alive (not a zombie: a killed daemon stays one until its parent, here often a
# container's init, reaps it) and is the daemon the file is named after (a pid file left by a restart may name a
# pid that another process now has)
running() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$(basename "$1" .pid)" ] \
    && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]
}

stop() {  # stop [slurm]: all three daemons, or slurmd and slurmctld only
  local pidfile
  for pidfile in "${PIDS[@]}"; do
    if [ "${1:-}" = slurm ] && [ "$pidfile" = /run/munge/munged.pid ]; then continue; fi
    if running "$pidfile"; then
      kill "$(cat "$pidfile")"
      for _ in $(seq 50); do running "$pidfile" || break; sleep 0.2; done
      echo "stopped $(basename "$pidfile" .pid)"
    fi
  done
}

if [ "${1:-}" = "stop" ]; then stop; exit 0; fi
if [ "$(id -u)" != 0 ]; then echo "slurm_up.sh: run as root (it installs packages and starts daemons)" >&2; exit 1; fi

# 1. packages (about 25 s on a fresh Debian 12)
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null \
   || ! command -v munged >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
fi

# 2. the one-node configuration (rewritten when the host's name or CPU count changed)
host=$(hostname -s)
cpus=$(nproc)
want=$(cat <<EOF
# Written by .ci/slurm_up.sh: a one-node cluster for tests.
ClusterName=joma
SlurmctldHost=$host
SlurmUser=root
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
# a requeued or cancelled task is killed within seconds (default 30)
KillWait=3
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
)
install -d -m 0755 "$(dirname "$CONF")"
if [ ! -f "$CONF" ] || [ "$(cat "$CONF")" != "$want" ]; then
  printf '%s\n' "$want" > "$CONF"
  stop slurm  # daemons started with another configuration
fi
install -d -m 0755 /var/spool/slurmctld /var/spool/slurmd /var/log/slurm

# 3. munge: a key (the package makes one; make it if absent), then the daemon as the munge user
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key
  chmod 600 /etc/munge/munge.key
fi
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
if ! running /run/munge/munged.pid; then
  runuser -u munge -- /usr/sbin/munged
fi

# 4. the daemons
if ! running /run/slurmctld.pid; then /usr/sbin/slurmctld; fi
if ! running /run/slurmd.pid; then /usr/sbin/slurmd; fi

# 5. wait until the node is idle (or mixed/allocated by earlier jobs), at most 60 s
for _ in $(seq 60); do
  state=$(timeout 5 sinfo -h -n "$host" -o %T 2>/dev/null | head -1 || true)
  case "$state" in
    idle|mixed|allocated|completing) break ;;
    down*|drain*) timeout 5 scontrol update NodeName="$host" State=RESUME 2>/dev/null || true ;;
  esac
  sleep 1
done
case "${state:-}" in
  idle|mixed|allocated|completing) ;;
  *) echo "slurm_up.sh: node $host is '${state:-unknown}' after 60 s; see /var/log/slurm/" >&2; exit 1 ;;
esac

echo "Slurm is up: node $host ($cpus CPUs, $state), partition debug; $(sbatch --version)"
echo "stop it with: bash .ci/slurm_up.sh stop   (kills the pids in ${PIDS[*]})"
