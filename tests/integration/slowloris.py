#!/usr/bin/env python3
"""slowloris.py PORT ADMIN_TOKEN - attacks on craterd's connection handling
(issue 12), run against a craterd on 127.0.0.1:PORT started with
maxConnectionsPerClient 64, headerTimeout 3s, requestRate 20, requestBurst 20.
Each address of 127/8 is its own client:

  127.0.0.2  slowloris: keeps 5,000 connections trickling a header line each
             now and then, reopening what the server drops, while
  127.0.0.1  a normal client asks GET /healthz 50 times (10 a second, a new
             connection each, as the CLI does): every one must be answered,
             each within 10 s; the latencies are printed, not asserted;
  127.0.0.5  one connection trickles a header line every 0.5 s: the server
             must close it unanswered (header timeout; the 30 s idle timeout
             never fires for a client that keeps sending);
  127.0.0.4  200 connections each ask GET /healthz (admin token: no rate
             limit): exactly 64 are answered, the others closed unanswered;
  127.0.0.3  60 requests without a token in a row: some are answered 429
             with Retry-After and a JSON error (code ERATE), then 30 with the
             admin token are all answered 200.
Prints one line per failed check, "slowloris: ok" at the end; exit 1 on any
failure. Waits for states with generous deadlines, never for fixed times."""
import http.client
import json
import resource
import selectors
import socket
import statistics
import sys
import threading
import time

port, admin = int(sys.argv[1]), sys.argv[2]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what, flush=True)


def raise_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < want:
        want = hard
    if soft == resource.RLIM_INFINITY or soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def connect_from(src, blocking=True):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    if blocking:
        s.connect(("127.0.0.1", port))
    else:
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
    return s


def read_reply(s, deadline):
    """Everything until the server closes or a whole reply is in."""
    s.settimeout(max(0.1, deadline - time.time()))
    data = b""
    try:
        while time.time() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                n = [l for l in head.split(b"\r\n")
                     if l.lower().startswith(b"content-length:")]
                if n and len(body) >= int(n[0].split(b":")[1]):
                    break
    except (ConnectionResetError, socket.timeout):
        pass
    return data


class Slowloris(threading.Thread):
    """Keeps `want` connections from 127.0.0.2 open, each sending one
    header line every `every` seconds; counts what the server closes."""

    def __init__(self, want, every):
        super().__init__(daemon=True)
        self.want, self.every = want, every
        self.sel = selectors.DefaultSelector()
        self.stop = threading.Event()
        self.opened = self.closed = self.peak = 0
        self.open = {}

    def add(self):
        try:
            s = connect_from("127.0.0.2", blocking=False)
        except OSError:
            return False
        self.open[s] = 0.0
        self.sel.register(s, selectors.EVENT_READ)
        self.opened += 1
        return True

    def drop(self, s):
        self.sel.unregister(s)
        del self.open[s]
        s.close()
        self.closed += 1

    def tick(self, now):
        for s, last in list(self.open.items()):
            if now - last < self.every:
                continue
            line = b"GET /healthz HTTP/1.1\r\n" if last == 0.0 else b"X-a: b\r\n"
            try:
                s.send(line)
                self.open[s] = now
            except BlockingIOError:
                pass
            except OSError:
                self.drop(s)

    def run(self):
        while not self.stop.is_set():
            while len(self.open) < self.want and self.add():
                pass
            self.peak = max(self.peak, len(self.open))
            for key, _ in self.sel.select(timeout=0.2):
                try:
                    gone = key.fileobj.recv(4096) == b""
                except BlockingIOError:
                    gone = False
                except OSError:
                    gone = True
                if gone:
                    self.drop(key.fileobj)
            self.tick(time.time())
        for s in list(self.open):
            self.drop(s)


def healthz_once(src):
    t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                   source_address=(src, 0))
    try:
        c.request("GET", "/healthz")
        r = c.getresponse()
        r.read()
        return r.status, time.time() - t0
    except OSError as e:
        return str(e), time.time() - t0
    finally:
        c.close()


def phase_slowloris():
    limit = raise_nofile(6000)
    want = min(5000, limit - 200)
    att = Slowloris(want, every=1.0)
    att.start()
    # the attack is on: wait (bounded) until it has tried every connection
    end = time.time() + 30
    while att.opened < want and time.time() < end:
        time.sleep(0.05)
    lat, bad = [], []
    for i in range(50):
        status, dt = healthz_once("127.0.0.1")
        lat.append(dt)
        if status != 200 or dt > 10:
            bad.append((i, status, round(dt, 3)))
        time.sleep(0.1)  # pacing: 10 a second, under requestRate 20
    att.stop.set()
    att.join(30)
    lat.sort()
    print("slowloris: %d connections opened from 127.0.0.2 (%d at once at "
          "most, nofile %d), %d closed by the server" %
          (att.opened, att.peak, limit, att.closed))
    print("slowloris: normal client latency min %.4f median %.4f p90 %.4f "
          "max %.4f s over %d requests" %
          (lat[0], statistics.median(lat), lat[int(len(lat) * 0.9)],
           lat[-1], len(lat)))
    check(att.opened >= 5000 or want < 5000,
          "the attacker opened %d connections" % att.opened)
    check(not bad, "normal requests failed or took over 10 s: %s" % bad)


def phase_trickle():
    s = connect_from("127.0.0.5")
    s.settimeout(0.5)
    t0, got, closed = time.time(), b"", False
    s.send(b"GET /healthz HTTP/1.1\r\n")
    while time.time() - t0 < 25 and not closed:
        try:
            chunk = s.recv(4096)
            got += chunk
            closed = chunk == b""
        except socket.timeout:
            try:
                s.send(b"X-trickle: 1\r\n")
            except OSError:
                closed = True
        except OSError:
            closed = True
    s.close()
    print("slowloris: trickling client closed after %.1f s" % (time.time() - t0))
    check(closed, "a client trickling its header was not closed in 25 s")
    check(got == b"", "the trickling client got an answer: %r" % got[:80])


def phase_per_client():
    conns, answered, refused = [], 0, 0
    req = ("GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
           "\r\n" % admin).encode()
    for _ in range(200):
        s = connect_from("127.0.0.4")
        try:
            s.send(req)
        except OSError:
            pass
        conns.append(s)
    deadline = time.time() + 20
    for s in conns:
        if read_reply(s, deadline).startswith(b"HTTP/1.1 200"):
            answered += 1
        else:
            refused += 1
    for s in conns:
        s.close()
    print("slowloris: 200 connections from 127.0.0.4: %d answered, %d closed"
          % (answered, refused))
    check(answered == 64, "%d of 200 connections from one address were "
          "answered (maxConnectionsPerClient 64)" % answered)


def phase_rate():
    statuses, limited = [], None
    for _ in range(60):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                       source_address=("127.0.0.3", 0))
        c.request("GET", "/healthz")
        r = c.getresponse()
        body = r.read()
        statuses.append(r.status)
        if r.status == 429 and limited is None:
            limited = (r.getheader("Retry-After"), body)
        c.close()
    n429 = statuses.count(429)
    print("slowloris: 60 requests from 127.0.0.3: %d answered 200, %d 429"
          % (statuses.count(200), n429))
    check(n429 > 0, "no 429 after 60 requests in a row (rate 20/s, burst 20)")
    check(statuses.count(200) + n429 == 60, "other statuses: %s" % statuses)
    if limited:
        retry, body = limited
        check(retry is not None and retry.isdigit() and int(retry) >= 1,
              "Retry-After: %r" % retry)
        try:
            err = json.loads(body)
            check(err.get("code") == "ERATE" and err.get("error"),
                  "429 body: %r" % body)
        except ValueError:
            check(False, "429 body is not JSON: %r" % body)
    ok = 0
    for _ in range(30):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                       source_address=("127.0.0.3", 0))
        c.request("GET", "/api/v1/jobs", headers={
            "Authorization": "Bearer " + admin})
        r = c.getresponse()
        r.read()
        ok += r.status == 200
        c.close()
    check(ok == 30, "%d of 30 admin requests answered 200 (exempt)" % ok)


phase_slowloris()
phase_trickle()
phase_per_client()
phase_rate()
print("slowloris: %s" % ("ok" if not failures else
                          "%d failure(s)" % len(failures)))
sys.exit(1 if failures else 0)
