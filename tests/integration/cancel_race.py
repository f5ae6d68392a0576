#!/usr/bin/env python3
"""cancel_race.py URL TOKEN N MARK - cancel N jobs the moment the API first
shows them running (a persistent connection polls as fast as it can), then
wait for each to be cancelled. Prints one line per job that needed longer
than its deadline (the grace period's SIGKILL instead of the SIGTERM),
and "cancel_race: N cancelled" at the end. Exit 1 when any job was late.
Used by test_adopt.sh: a stop signal sent while the task is still being
set up (its process group and cgroup not ready yet) must not be lost."""
import http.client
import json
import sys
import time

url, tok, n, mark = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
conn = http.client.HTTPConnection(url.split("//")[1], timeout=30)
hdr = {"Authorization": "Bearer " + tok, "Content-Type": "application/yaml"}
spec = ("name: race\ncommand: [sh, -c, 'exec sleep 100', %s]\n"
        "gracePeriod: 60s\nresources: {cpu: 100m, memory: 16Mi}\n" % mark)


def call(method, path, body=None):
    conn.request(method, path, body, hdr)
    return json.loads(conn.getresponse().read() or b"{}")


ids = []
for _ in range(n):
    jid = call("POST", "/api/v1/jobs", spec)["id"]
    start = time.time()
    while time.time() - start < 20:
        if call("GET", "/api/v1/jobs/" + jid)["state"] == "running":
            break
    call("POST", "/api/v1/jobs/%s/cancel" % jid, "")
    ids.append((jid, time.time()))
late = 0
for jid, at in ids:
    while True:
        job = call("GET", "/api/v1/jobs/" + jid)
        if job["state"] == "cancelled":
            break
        if time.time() - at > 20:  # the grace period is 60 s
            print("job %s: still %s 20 s after its cancel" % (jid, job["state"]))
            late += 1
            break
        time.sleep(0.05)
print("cancel_race: %d cancelled, %d late" % (len(ids) - late, late))
sys.exit(1 if late else 0)
