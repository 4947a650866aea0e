#!/bin/bash
# The fleet bench with a burst of lost CPU on the controller's core: a busy loop pinned to
# core 0 (where bench.py pins the controller) takes about half of it for BURST_S seconds,
# from AT_S seconds after the bench starts (as a hypervisor stealing CPU would). Every other
# argument goes to bench.py.
#
#   AT_S=45 BURST_S=20 bench/fleet/cpu_burst.sh --agents 1000 --rows 10 --interval-ms 1000 \
#       --duration-s 90 --processes 2 --out bench/fleet/results/<name>.json
set -euo pipefail
cd "$(dirname "$0")/../.."
AT_S=${AT_S:-45}
BURST_S=${BURST_S:-20}
.venv/bin/python -m bench.fleet.bench "$@" &
bench=$!
trap 'kill "$bench" 2>/dev/null || true' INT TERM
sleep "$AT_S"
taskset -c 0 timeout "$BURST_S" python3 -c 'while True: pass' || true  # timeout ends it: exit 124
wait "$bench"
