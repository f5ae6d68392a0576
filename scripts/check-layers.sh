#!/bin/bash
# check-layers.sh - the build's floors (doc/design.md "Layers"): a source
# may include headers of its own floor and below, never above. Run by
# `make test` (and `make layers`); fails naming each include that points
# up a floor.
#
#   1 base    errors, log, units, the document loader and decoder, kinds,
#             private directories; the stand-alone libraries (checkpoint
#             SDK, GPU-slice interposer) live here too: they use libc only
#   2 core    the capability model, configuration, job specs, profiles,
#             the hardware knowledge base
#   3 codec   hardware files, the agent protocol
#   4 sched   placement, queue, the scheduling pass, reservations
#   5 store, net, sim
#   6 daemon, agent, shim, gateway
#   7 cli
#
# Floors of the public headers (include/crater/) are listed below; a
# module's internal headers (src/<dir>/*.h) take their directory's floor.
set -u
cd "$(dirname "$0")/.." || exit 2

declare -A dir_floor=(
    [ckpt]=1 [gpuslice]=1 [core]=2 [codec]=3 [sched]=4 [store]=5 [net]=5
    [sim]=5 [daemon]=6 [agent]=6 [shim]=6 [gateway]=6 [cli]=7
)
declare -A hdr_floor=(
    [error]=1 [log]=1 [units]=1 [doc]=1 [dec]=1 [kind]=1 [privdir]=1
    [ckpt]=1 [gpuslice]=1
    [model]=2 [config]=2 [jobspec]=2 [profile]=2 [kb]=2 [priority]=2 [idle]=2 [cost]=2
    [hwfile]=3 [proto]=3
    [sched]=4 [queue]=4 [pass]=4 [reserve]=4 [typhist]=4 [fgd]=4 [bound]=4
    [http]=5 [client]=5 [auth]=5 [metrics]=5 [sim]=5 [replay]=5
    [whatif]=5 [svg]=5 [utilmodel]=5 [utilsim]=5
)
names=(base core codec sched store/net/sim daemon/agent cli)
bad=0
for f in $(git ls-files 'src/*.c' 'src/*.h'); do
    d=${f#src/}
    d=${d%%/*}
    from=${dir_floor[$d]:-}
    if [ -z "$from" ]; then
        echo "check-layers: $f: src/$d has no floor (add it to scripts/check-layers.sh)"
        bad=1
        continue
    fi
    while IFS=: read -r line inc; do
        case $inc in
        crater/*.h)
            h=${inc#crater/}
            h=${h%.h}
            to=${hdr_floor[$h]:-}
            if [ -z "$to" ]; then
                echo "check-layers: $f:$line: include/crater/$h.h has no floor"
                bad=1
                continue
            fi ;;
        */*.h)
            to=${dir_floor[${inc%%/*}]:-}
            [ -n "$to" ] || continue ;;
        *) continue ;; # a header beside the source
        esac
        if [ "$to" -gt "$from" ]; then
            echo "check-layers: $f:$line includes $inc: floor $to (${names[$((to - 1))]}) above $d's floor $from (${names[$((from - 1))]})"
            bad=1
        fi
    done < <(grep -n '^#include "' "$f" | sed 's/^\([0-9]*\):#include "\([^"]*\)".*/\1:\2/')
done
[ "$bad" = 0 ] && echo "check-layers: every include points down or across"
exit "$bad"
