#!/usr/bin/env bash
# Stop the cluster tests/slurm/start.sh DIR started (by its pid files).
set -u
dir="$1"
for f in slurmd.pid slurmctld.pid munge/munged.pid; do
  if [ -f "$dir/$f" ]; then
    pid="$(cat "$dir/$f")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
done
exit 0
