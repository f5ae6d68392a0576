#!/bin/bash
# check-links.sh BUILD_DIR - the floors' libraries (CMakeLists.txt,
# doc/design.md "Layers") call only down: every symbol a floor's library
# leaves undefined and another floor's library defines must come from a
# library it links (below it). check-layers.sh checks the includes;
# this checks the calls, which an include-free extern declaration or a
# macro could hide. Run by `make test` after the build.
set -u
build=${1:?usage: check-links.sh BUILD_DIR}
declare -A deps=(
    [base]=""
    [core]="base"
    [codec]="core base"
    [sched]="codec core base"
    [sim]="sched codec core base"
    [store]="core base"
    [net]="codec core base"
    [daemon]="store net sim sched codec core base gateway"
    [gateway]="net codec core base"
    [agent]="net codec core base"
)
declare -A owner=()
for f in "${!deps[@]}"; do
    lib=$build/libcrater_$f.a
    [ -f "$lib" ] || { echo "check-links: $lib missing (build first)"; exit 2; }
    while read -r sym; do owner[$sym]=$f; done < <(nm -g --defined-only "$lib" 2>/dev/null | awk 'NF == 3 && $2 ~ /[TDBR]/ {print $3}')
done
bad=0
for f in "${!deps[@]}"; do
    while read -r sym; do
        o=${owner[$sym]:-}
        [ -z "$o" ] || [ "$o" = "$f" ] && continue
        case " ${deps[$f]} " in *" $o "*) continue ;; esac
        echo "check-links: libcrater_$f calls $sym of libcrater_$o (not below it)"
        bad=1
    done < <(nm -g --undefined-only "$build/libcrater_$f.a" 2>/dev/null | awk '$1 == "U" {print $2}' | sort -u)
done
[ "$bad" = 0 ] && echo "check-links: every floor calls only down"
exit "$bad"
