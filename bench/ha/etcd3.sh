# bench/ha/etcd3.sh - sourced by run.sh and kept.sh: loopback helpers and a
# three-member etcd cluster under $tmp. start_etcd3 sets cport, pport,
# hport (a free port per craterd), eps (the client endpoints) and appends
# the members' pids to epid (the caller's cleanup kills them).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
until_() { local n=$(( $1 * 20 )) i; for i in $(seq 1 "$n"); do eval "$2" && return 0; sleep 0.05; done; return 1; }
now() { date +%s.%N; }

start_etcd3() {
    local i cluster
    cport=() pport=() hport=()
    for i in 0 1 2; do cport+=("$(free_port)"); pport+=("$(free_port)"); hport+=("$(free_port)"); done
    cluster="m0=http://127.0.0.1:${pport[0]},m1=http://127.0.0.1:${pport[1]},m2=http://127.0.0.1:${pport[2]}"
    for i in 0 1 2; do
        etcd --name "m$i" --data-dir "$tmp/etcd$i" \
            --listen-client-urls "http://127.0.0.1:${cport[$i]}" --advertise-client-urls "http://127.0.0.1:${cport[$i]}" \
            --listen-peer-urls "http://127.0.0.1:${pport[$i]}" --initial-advertise-peer-urls "http://127.0.0.1:${pport[$i]}" \
            --initial-cluster "$cluster" --initial-cluster-state new >"$tmp/etcd$i.log" 2>&1 &
        epid+=($!)
    done
    eps="http://127.0.0.1:${cport[0]},http://127.0.0.1:${cport[1]},http://127.0.0.1:${cport[2]}"
    until_ 30 '[ "$(ETCDCTL_API=3 etcdctl --endpoints "$eps" endpoint health 2>&1 | grep -c "is healthy")" = 3 ]' \
        || { echo "etcd did not start"; exit 1; }
}
