#!/usr/bin/env python3
"""crash_writes.py URL TOKEN PID KILL_AT ACKED REQUEST... - send the
requests ("METHOD PATH [JSON BODY]", one per argument; "@FILE" reads one
per line from FILE) from 16 threads, each on its own keep-alive
connection, and kill -9 process PID the moment KILL_AT of them were
answered 200 (0 = once all were answered). Every answered request is
written to ACKED as "METHOD PATH" and flushed before the kill, so ACKED
lists writes craterd acknowledged before it died. Used by test_crash.sh:
nothing acknowledged may be undone by kill -9."""
import http.client
import os
import signal
import sys
import threading

url, tok, pid, kill_at, acked = sys.argv[1:6]
pid, kill_at = int(pid), int(kill_at)
reqs = []
for a in sys.argv[6:]:
    lines = open(a[1:]).read().splitlines() if a.startswith("@") else [a]
    reqs += [l.split(" ", 2) for l in lines if l]
kill_at = kill_at or len(reqs)
lock = threading.Lock()
out = open(acked, "w")
state = {"next": 0, "acked": 0, "killed": False}


def take():
    with lock:
        if state["killed"] or state["next"] == len(reqs):
            return None
        state["next"] += 1
        return reqs[state["next"] - 1]


def answered(req):
    with lock:
        if state["killed"]:
            return  # read after the kill was sent: not counted
        out.write("%s %s\n" % (req[0], req[1]))
        out.flush()
        state["acked"] += 1
        if state["acked"] >= kill_at:
            os.kill(pid, signal.SIGKILL)
            state["killed"] = True


def worker():
    conn = http.client.HTTPConnection(url.split("//")[1], timeout=30)
    hdr = {"Authorization": "Bearer " + tok}
    while (req := take()) is not None:
        try:
            conn.request(req[0], req[1], req[2] if len(req) > 2 else "", hdr)
            resp = conn.getresponse()
            resp.read()
        except (OSError, http.client.HTTPException):
            conn.close()
            continue
        if resp.status == 200:
            answered(req)


threads = [threading.Thread(target=worker) for _ in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
out.close()
print("crash_writes: %d sent, %d acknowledged, killed: %s"
      % (state["next"], state["acked"], state["killed"]))
