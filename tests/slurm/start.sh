#!/usr/bin/env bash
# Start a one-node Slurm cluster for the tests: munged, slurmctld and
# slurmd on this machine (node "localhost", 2 CPUs), every file of it in
# DIR (slurm.conf, state, logs, pid files). Prints the export line that
# points Slurm's commands at it. Stop it with tests/slurm/stop.sh DIR.
#
#   tests/slurm/start.sh DIR
#
# Needs Debian's slurm-wlm and munge (apt-get install slurm-wlm munge)
# and root (slurmd runs jobs as their users).
set -euo pipefail
dir="$(mkdir -p "$1" && cd "$1" && pwd)"
for p in munged slurmctld slurmd sbatch sinfo; do
  command -v "$p" >/dev/null || { echo "start.sh: $p is missing (apt-get install slurm-wlm munge)" >&2; exit 1; }
done
mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
chown munge:munge "$dir/munge"

# munge: its own socket and files in DIR, run as the munge user.
key=/etc/munge/munge.key
if [ ! -s "$key" ]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom of="$key" bs=1 count=128 status=none
  chown munge:munge "$key"
  chmod 400 "$key"
fi
sock="$dir/munge/munge.socket"
if ! [ -S "$sock" ]; then
  runuser -u munge -- munged --socket="$sock" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" --key-file="$key"
fi

cat > "$dir/slurm.conf" <<CONF
ClusterName=rocelab
SlurmctldHost=localhost
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=300
NodeName=localhost NodeHostname=localhost CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$dir/slurm.conf"
[ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null || slurmctld -c
[ -f "$dir/slurmd.pid" ] && kill -0 "$(cat "$dir/slurmd.pid")" 2>/dev/null || slurmd -N localhost
# Ready when the node takes jobs.
for _ in $(seq 1 60); do
  state="$(sinfo -h -N -o %t 2>/dev/null | head -n1 || true)"
  case "$state" in
    idle|mix|alloc) echo "export SLURM_CONF=$dir/slurm.conf"; exit 0 ;;
  esac
  sleep 1
done
echo "start.sh: the node did not come up (state: ${state:-none}); logs in $dir" >&2
tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
exit 1
