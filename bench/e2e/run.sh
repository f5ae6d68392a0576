#!/bin/bash
# B3: Crater against Slurm, side by side on this machine, same cluster shape
# (8 simulated nodes x 8 CPUs). See bench/README.md.
#
#   bench/e2e/run.sh [--jobs N] [--loop N] [--array N] [--rounds R] [--quick] [--no-slurm] [--json FILE]
#
# Uses ./build/crater as it is (run `make` first); builds nothing. Starts
# `crater up --hardware bench/e2e/hw-8x8.yaml` in a temporary directory and
# the Slurm peer (../shared/peers/slurm/start.sh 8 8, or the start.sh in
# $SLURM_PEER_SCRIPTS; needs root), measures, prints a table, and stops
# both (also on Ctrl-C). Loopback only; every wait has a deadline.
# The arrays run last, R rounds of Crater's then Slurm's with both up
# (the other one idle, its CPU measured): the median ratio of the rounds.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
JOBS=200 LOOP=1000 ARRAY=1000 ROUNDS=5 SLURM=1 JSON= DEADLINE=300
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --jobs) JOBS=${2:?}; shift ;;
    --loop) LOOP=${2:?}; shift ;;
    --array) ARRAY=${2:?}; shift ;;
    --rounds) ROUNDS=${2:?}; shift ;;
    --quick) JOBS=20 LOOP=100 ARRAY=100 ROUNDS=2 DEADLINE=120 ;;
    --no-slurm) SLURM=0 ;;
    --json) JSON=${2:?}; shift ;;
    -h|--help) usage ;;
    *) echo "run.sh: unknown option $1" >&2; usage ;;
  esac
  shift
done
for n in "$JOBS" "$LOOP" "$ARRAY" "$ROUNDS"; do
  case $n in ''|*[!0-9]*|0) echo "run.sh: sizes must be positive integers" >&2; exit 2 ;; esac
done
[ "$ARRAY" -le 1000 ] || { echo "run.sh: --array at most 1000 (Slurm's MaxArraySize default 1001)" >&2; exit 2; }

BUILT=$ROOT/build/crater
HW=$ROOT/bench/e2e/hw-8x8.yaml
PY=$(command -v python3) || { echo "run.sh: python3 is needed" >&2; exit 2; }
[ -x "$BUILT" ] || { echo "run.sh: $BUILT not found: run 'make' first" >&2; exit 2; }

TMP=$(mktemp -d /tmp/crater-e2e.XXXXXX)
# One copy of the binary for the whole run (server, task shims and CLI), so
# that a rebuild of build/ during the run cannot mix two versions.
cp "$BUILT" "$TMP/crater" && cp "$ROOT/build/crater-up" "$TMP/crater-up" || { rm -rf "$TMP"; exit 2; }
CRATER=$TMP/crater
"$CRATER" validate "$HW" >/dev/null 2>&1 || { echo "run.sh: $HW does not validate" >&2; rm -rf "$TMP"; exit 2; }
UP_PID= SLURM_STARTED=0 SLURM_DIR=${SLURM_PEER_SCRIPTS:-$ROOT/../shared/peers/slurm}

cleanup() {
  trap '' INT TERM
  if [ -n "$UP_PID" ] && kill -0 "$UP_PID" 2>/dev/null; then
    kill -TERM "$UP_PID" 2>/dev/null    # clean stop: agents stop their tasks
    for _ in $(seq 150); do kill -0 "$UP_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$UP_PID" 2>/dev/null
  fi
  # Task shims of this run (a `crater up --data $TMP/data ...` per task) that
  # outlived it, by pid.
  for p in $(pgrep -f -- "--data $TMP/data" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  if [ "$SLURM_STARTED" = 1 ]; then
    scancel --user="$(id -un)" 2>/dev/null
    bash "$SLURM_DIR/stop.sh" >/dev/null 2>&1
  fi
  if [ -n "${E2E_KEEP:-}" ]; then echo "run.sh: kept $TMP (E2E_KEEP)" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'echo; echo "run.sh: interrupted, stopping" >&2; exit 130' INT TERM

echo "B3 end to end: $JOBS latency jobs, $LOOP-job CLI loop, $ROUNDS rounds of a $ARRAY-element array; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "crater: $BUILT ($("$CRATER" version 2>/dev/null | head -1), built $(date -u -r "$BUILT" '+%F %T UTC')), tree at commit $(git rev-parse --short HEAD 2>/dev/null)"

# ---- Crater
"$CRATER" up --data "$TMP/data" --listen 127.0.0.1:0 --hardware "$HW" >"$TMP/up.log" 2>&1 &
UP_PID=$!
URL=
for _ in $(seq 300); do
  URL=$(sed -n 's/.*API on \(http:\/\/[0-9.:]*\).*/\1/p' "$TMP/up.log" | head -1)
  [ -n "$URL" ] && [ -s "$TMP/data/admin.token" ] && break
  kill -0 "$UP_PID" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$URL" ]; then
  echo "run.sh: crater up did not print its API address within 30 s:" >&2
  cat "$TMP/up.log" >&2
  exit 1
fi
case $URL in http://127.0.0.1:*) ;; *) echo "run.sh: $URL is not loopback" >&2; exit 1 ;; esac
echo "crater up: $URL (data in $TMP/data)"
TOKEN=$(cat "$TMP/data/admin.token")
"$PY" "$ROOT/bench/e2e/e2e.py" crater --server "$URL" --token "$TOKEN" \
  --crater "$CRATER" --tmp "$TMP" --out "$TMP/crater.json" \
  --jobs "$JOBS" --loop "$LOOP" --array 0 --deadline "$DEADLINE" || exit 1

# crater up (and its spawners) / the peer's daemons: the pids whose CPU the
# other system's measurements report
crater_pids() { echo "$UP_PID" $(pgrep -P "$UP_PID"); }
slurm_pids() { echo $(pgrep -x 'slurmctld|slurmd|munged'); }

# ---- Slurm (Crater stays up, idle: the arrays are interleaved below)
REASON=
if [ "$SLURM" = 0 ]; then
  REASON="--no-slurm"
elif [ "$(id -u)" != 0 ]; then
  REASON="the Slurm peer needs root"
elif [ ! -f "$SLURM_DIR/start.sh" ]; then
  REASON="no Slurm peer: $SLURM_DIR/start.sh not found (set SLURM_PEER_SCRIPTS)"
elif sinfo -h >/dev/null 2>&1; then
  # A peer already up (started by hand): use it if it has the shape, leave it running.
  n=$(sinfo -h -o '%D %c' 2>/dev/null | awk '$2==8{s+=$1} END{print s+0}')
  if [ "$n" = 8 ]; then
    echo "slurm: using the peer already running (8 nodes x 8 CPUs); it is left running"
    (cd "$TMP" && "$PY" "$ROOT/bench/e2e/e2e.py" slurm --tmp "$TMP" --out "$TMP/slurm.json" \
      --jobs "$JOBS" --loop "$LOOP" --array 0 --deadline "$DEADLINE" \
      --idle-pids "$(crater_pids)") || REASON="the Slurm measurement failed"
  else
    REASON="a Slurm controller of another shape is already running here; not touching it"
  fi
else
  SLURM_STARTED=1
  if ! timeout 600 bash "$SLURM_DIR/start.sh" 8 8 >"$TMP/slurm-start.log" 2>&1; then
    REASON="the Slurm peer did not start (tail of its log below)"
    tail -5 "$TMP/slurm-start.log" >&2
  else
    echo "$(tail -1 "$TMP/slurm-start.log")"
    (cd "$TMP" && "$PY" "$ROOT/bench/e2e/e2e.py" slurm --tmp "$TMP" --out "$TMP/slurm.json" \
      --jobs "$JOBS" --loop "$LOOP" --array 0 --deadline "$DEADLINE" \
      --idle-pids "$(crater_pids)") || REASON="the Slurm measurement failed"
  fi
fi
[ -n "$REASON" ] && echo "run.sh: Slurm skipped: $REASON" >&2

# ---- Arrays: Crater's, then Slurm's, ROUNDS times, both systems up (the
# machine's speed drifts by a third within minutes here, so one array of
# each, minutes apart, compared the drift as much as the systems)
for r in $(seq 1 "$ROUNDS"); do
  "$PY" "$ROOT/bench/e2e/e2e.py" array --system crater --round "$r" --server "$URL" \
    --token "$TOKEN" --crater "$CRATER" --tmp "$TMP" --out "$TMP/crater.json" \
    --array "$ARRAY" --deadline "$DEADLINE" \
    --idle-pids "$([ -z "$REASON" ] && slurm_pids)" --own-pids "$(crater_pids)" || exit 1
  [ -n "$REASON" ] && continue
  (cd "$TMP" && "$PY" "$ROOT/bench/e2e/e2e.py" array --system slurm --round "$r" --tmp "$TMP" \
    --out "$TMP/slurm.json" --array "$ARRAY" --deadline "$DEADLINE" \
    --idle-pids "$(crater_pids)" --own-pids "$(slurm_pids)") || exit 1
done

echo
"$PY" "$ROOT/bench/e2e/e2e.py" table --crater "$TMP/crater.json" --slurm "$TMP/slurm.json" \
  --slurm-reason="$REASON" ${JSON:+--json "$JSON"}
