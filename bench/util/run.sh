#!/bin/sh
# run.sh - every `crater sim util` run behind bench/RESULTS.md "B4 on measured utilisation" (issue 19)
# and "B4 measured, with GPU sharing (session 9)".
# Usage: bench/util/run.sh [path/to/crater] > out.txt   (a minute or two)
set -e
C=${1:-build/crater}
export CRATER_OPENB_DIR=${CRATER_OPENB_DIR:-../shared/data/openb}
echo "## calibration fit"; $C sim util --calibration bench/util/calibration.csv
for L in 1.0 1.5 2.5; do
    echo "## seeds, load $L"; $C sim util --set load=$L 2>/dev/null
done
for W in plain whole; do
    echo "## $W, load 1.5"; $C sim util --workload $W --set load=1.5 2>/dev/null
done
echo "## crater ablations, seeds, load 1.5"
for S in "overcommit=1 --set idle_reclaim_h=0 --set profile_cpu=0 --set profile_disk=0" \
         "idle_reclaim_h=0 --set profile_cpu=0 --set profile_disk=0" \
         profile_cpu=0 profile_disk=0 "profile_cpu=0 --set profile_disk=0" \
         overcommit=1 idle_reclaim_h=0 \
         profile_gpu=0 profile_disk_high=1 "profile_gpu=0 --set profile_disk_high=1" \
         "profile_disk=0" "max_util=1" "max_util=0.7" "mem_margin=0" \
         "node_disk=1e11 --set cpu_per_gpu=0.01 --set membw_per_gpu=1"; do
    echo "# $S"
    $C sim util --set load=1.5 --policies crater --set $S 2>/dev/null | tail -1
done
echo "## no starvation (disk, CPU, memory bandwidth ample), load 1.5"
$C sim util --set load=1.5 --set node_disk=1e11 --set cpu_per_gpu=0.01 --set membw_per_gpu=1 2>/dev/null
echo "## no starvation, training intrinsic use 0.1-1.0, load 1.5"
$C sim util --set load=1.5 --set node_disk=1e11 --set cpu_per_gpu=0.01 --set membw_per_gpu=1 --set intr_lo=0.1 2>/dev/null
for R in 0.5 0.1; do
    echo "## seeds, load 1.5, GPU pods ask $R x openb's CPU"
    $C sim util --set load=1.5 --set cpu_req_scale=$R 2>/dev/null
done
echo "## plot"; $C sim util --plot doc/img/util-measured.svg 2>/dev/null
echo "## sensitivity, seeds, load 1.5"; $C sim util --set load=1.5 --sensitivity 2>/dev/null
