"""crater_ckpt.agent - the task's side of the Crater agent socket.

The agent gives each task a Unix socket in $CRATER_AGENT_SOCKET: "@name"
is an abstract socket (a leading NUL byte, no file), which the agent
answers only for the task's own uid. On it a task long-polls for a
preemption notice, acknowledges it, and reports finished checkpoints and
its progress; craterd records the reports per job (GET
/api/v1/jobs/{id}/checkpoints) and sizes the next preemption's grace
period from the measured save time. The protocol is newline-delimited
JSON, one request and one answer a line (doc/checkpoint.md "Runtime").

    from crater_ckpt.agent import AgentClient
    agent = AgentClient()                  # None-safe: .available is False
    watcher = agent.watch()                # a thread; watcher.notice is set
    ...
    if watcher.notice.is_set():            # or SIGTERM came
        st = ck.save(step, state)
        agent.report_checkpoint(st)

Each call opens its own connection, so a thread may wait for the notice
while another reports. Errors of the agent raise AgentError; a missing
socket makes every call a no-op returning None (the job runs outside
Crater, or on an agent without sockets).
"""
import json
import os
import socket
import threading

__all__ = ["AgentClient", "AgentError", "NoticeWatcher"]


class AgentError(Exception):
    """The agent refused a request (its text names the field)."""


class AgentClient:
    def __init__(self, path=None):
        self.path = path if path is not None else os.environ.get("CRATER_AGENT_SOCKET")

    @property
    def available(self):
        if not self.path:
            return False
        return self.path.startswith("@") or os.path.exists(self.path)

    def _address(self):
        # "@name": an abstract socket (the agent's), a leading NUL byte
        return "\0" + self.path[1:] if self.path.startswith("@") else self.path

    def _call(self, req, timeout):
        if not self.available:
            return None
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(self._address())
            s.sendall(json.dumps(req).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                got = s.recv(4096)
                if not got:
                    raise AgentError("the agent closed the connection")
                buf += got
        finally:
            s.close()
        ans = json.loads(buf)
        if ans.get("ok") is False:
            raise AgentError("%s: %s" % (ans.get("field"), ans.get("error")))
        return ans

    def wait_for_notice(self, timeout=30.0):
        """Block until a preemption notice comes or timeout seconds pass.
        Returns the notice ({"preempt": True, "reason": "priority",
        "deadline_ms": ms before SIGKILL}) or None."""
        ms = max(0, int(timeout * 1000))
        ans = self._call({"op": "wait", "timeout_ms": ms}, timeout + 10)
        return ans if ans and ans.get("preempt") else None

    def ack(self):
        """Tell the agent the notice was seen."""
        return self._call({"op": "ack"}, 10)

    def report_checkpoint(self, stats=None, step=None, path=None, digest=None,
                          bytes_written=0, seconds=0.0):
        """Report a finished checkpoint: a SaveStats (path: its step
        directory), or the fields one by one."""
        if stats is not None:
            step, digest = stats.step, stats.digest or None
            bytes_written, seconds = stats.bytes_written, stats.seconds
        req = {"op": "checkpoint", "step": int(step), "bytes": int(bytes_written),
               "seconds": float(seconds)}
        if path:
            req["path"] = str(path)
        if digest:
            req["digest"] = digest
        return self._call(req, 10)

    def report_progress(self, step):
        return self._call({"op": "progress", "step": int(step)}, 10)

    def watch(self, on_notice=None):
        """Start a NoticeWatcher thread on this socket."""
        w = NoticeWatcher(self, on_notice)
        w.start()
        return w


class NoticeWatcher(threading.Thread):
    """Long-polls in a daemon thread; on a notice sets .notice (an Event),
    keeps it in .info, acknowledges it, then calls on_notice(info)."""

    def __init__(self, client, on_notice=None):
        super().__init__(name="crater-notice", daemon=True)
        self.client, self.on_notice = client, on_notice
        self.notice, self.info = threading.Event(), None

    def run(self):
        while self.client.available:
            try:
                info = self.client.wait_for_notice(60.0)
            except (OSError, ValueError, AgentError):
                return
            if info:
                self.info = info
                self.notice.set()
                try:
                    self.client.ack()
                except (OSError, ValueError, AgentError):
                    pass
                if self.on_notice:
                    self.on_notice(info)
                return
