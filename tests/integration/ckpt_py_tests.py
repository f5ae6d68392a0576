"""ckpt_py_tests.py - python/crater_ckpt: round trip, incremental bytes,
fallback past damage, keep_last collection, async save (a snapshot, at
most one in flight), the strict manifest parser, and the torch helpers
when torch imports (skipped with a message otherwise). Run by
test_ckpt_sdk.sh: python3 ckpt_py_tests.py (PYTHONPATH has python/)."""
import os
import random
import shutil
import tempfile
import threading
import unittest

import crater_ckpt as cc


def manifest(d, step):
    with open(os.path.join(d, "step-%d" % step, "MANIFEST"), "rb") as f:
        return cc.parse_manifest(f.read())


def state(step, n=20000):
    a = bytearray(random.Random(0).randbytes(n))
    a[(step * 997) % (n - 200):][:200] = os.urandom(200)
    return {"a": bytes(a), "hdr": b"%d" % step, "empty": b""}


class Sdk(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_round_trip_and_incremental(self):
        ck = cc.Checkpointer(self.dir, chunk_size=1024)
        self.assertIsNone(ck.load_latest())
        s1 = state(1)
        st = ck.save(1, s1)
        self.assertEqual(st.bytes_written, st.bytes_total)
        st = ck.save(2, state(2))
        self.assertLessEqual(st.bytes_written, 3 * 1024 + 1)
        self.assertEqual(st.parent, 1)
        cp = ck.load_latest()
        self.assertEqual((cp.step, cp.parent), (2, 1))
        self.assertEqual(ck.load(1).entries, s1)
        self.assertEqual(list(cp.entries), ["a", "hdr", "empty"])

    def test_damaged_falls_back(self):
        ck = cc.Checkpointer(self.dir, chunk_size=1024)
        for s in (1, 2, 3):
            ck.save(s, state(s))
        with open(os.path.join(self.dir, "step-3", "MANIFEST"), "r+b") as f:
            f.seek(20)
            f.write(b"#")
        self.assertEqual(ck.load_latest().step, 2)
        m = manifest(self.dir, 2)
        h = m["entries"][1][2][0][0]  # "hdr": only step 2 has it
        with open(os.path.join(self.dir, "chunks", h), "r+b") as f:
            f.write(b"#")
        self.assertEqual(ck.load_latest().step, 1)

    def test_parser_refuses_every_truncation(self):
        raw, _ = cc.encode_manifest(5, None, 4, [("x y", 5, [("a" * 64, 4),
                                                             ("b" * 64, 1)])])
        self.assertEqual(cc.parse_manifest(raw)["entries"][0][0], "x y")
        for cut in range(len(raw)):
            with self.assertRaises(ValueError):
                cc.parse_manifest(raw[:cut])

    def test_keep_last(self):
        ck = cc.Checkpointer(self.dir, chunk_size=1024, keep_last=2)
        os.mkdir(os.path.join(self.dir, "step-50.tmp-999"))
        for s in range(1, 8):
            ck.save(s, state(s))
        self.assertEqual(ck.steps(), [7, 6])
        self.assertEqual(ck.load(6).entries["hdr"], b"6")
        live = set()
        for s in (6, 7):
            m = manifest(self.dir, s)
            live |= {h for e in m["entries"] for h, _ in e[2]}
        self.assertEqual(set(os.listdir(os.path.join(self.dir, "chunks"))), live)

    def test_async_snapshot_one_in_flight(self):
        ck = cc.Checkpointer(self.dir, chunk_size=1024)
        gate = threading.Event()
        orig = ck._save
        running = []

        def slow(step, st):
            running.append(step)
            self.assertEqual(len(running), 1)
            gate.wait(5)
            try:
                return orig(step, st)
            finally:
                running.pop()
        ck._save = slow
        buf = bytearray(b"before" * 100)
        fut = ck.save_async(1, {"buf": buf})
        buf[:6] = b"AFTER!"  # the snapshot was taken at the call
        gate.set()
        fut2 = ck.save_async(2, {"buf": buf})  # waits for the first
        self.assertTrue(fut.done())
        fut2.result()
        self.assertEqual(ck.load(1).entries["buf"][:6], b"before")
        self.assertEqual(ck.load_latest().entries["buf"][:6], b"AFTER!")

    def test_torch_helpers(self):
        try:
            import torch
            from crater_ckpt import torch_helpers as ct
        except ImportError:
            self.skipTest("torch is not installed")
        m = torch.nn.Linear(50, 40)
        o = torch.optim.Adam(m.parameters())
        m(torch.randn(3, 50)).sum().backward()
        o.step()
        s = {"model": m.state_dict(), "opt": o.state_dict(), "n": 3,
             "bf": torch.ones(5, dtype=torch.bfloat16), "e": torch.zeros(0, 2)}
        ck = cc.Checkpointer(self.dir, chunk_size=4096)
        ct.save(ck, 1, s)
        with torch.no_grad():
            m.weight[0, 0] += 1
        st = ct.save_async(ck, 2, s).result()
        self.assertLessEqual(st.bytes_written, 4096)
        step, got = ct.load_latest(ck)
        self.assertEqual(step, 2)
        self.assertTrue(torch.equal(got["model"]["weight"], m.weight))
        self.assertEqual(got["opt"]["state"][0]["exp_avg"].shape, (40, 50))
        self.assertEqual(got["bf"].dtype, torch.bfloat16)
        self.assertEqual(tuple(got["e"].shape), (0, 2))


if __name__ == "__main__":
    unittest.main(verbosity=1)
