"""serve.py - a small KServe V2 server for the model train.py wrote.

GET  /v2/health/ready           200 once the model is loaded
POST /v2/models/{m}/infer       {"inputs": [{"name", "shape": [n, 1],
                                 "datatype": "FP32", "data": [...]}]}
                                -> {"model_name", "outputs": [{"name": "y",
                                 "shape": [n, 1], "datatype": "FP32",
                                 "data": [...]}]}

Reads $CRATER_MODEL_PATH/model.pt and listens on 127.0.0.1:
$CRATER_SERVICE_PORT (both set by craterd for a service's replicas).
"""
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch

MODEL = torch.nn.Linear(1, 1)
MODEL.load_state_dict(torch.load(os.path.join(os.environ["CRATER_MODEL_PATH"], "model.pt")))
MODEL.eval()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/v2/health/ready":
            self.answer(200, {"ready": True})
        else:
            self.answer(404, {"error": "no such path"})

    def do_POST(self):
        parts = self.path.split("/")  # "", v2, models, m, infer
        if len(parts) != 5 or parts[1:3] != ["v2", "models"] or parts[4] != "infer":
            self.answer(404, {"error": "no such path"})
            return
        try:
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            inp = req["inputs"][0]
            x = torch.tensor(inp["data"], dtype=torch.float32).reshape(-1, 1)
        except (ValueError, KeyError, IndexError, TypeError, RuntimeError) as e:
            self.answer(400, {"error": f"inputs[0]: {e}"})
            return
        with torch.no_grad():
            y = MODEL(x).reshape(-1).tolist()
        out = {"model_name": parts[3], "outputs": [
            {"name": "y", "shape": [len(y), 1], "datatype": "FP32", "data": y}]}
        if "id" in req:
            out["id"] = req["id"]
        self.answer(200, out)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(os.environ["CRATER_SERVICE_PORT"])), Handler).serve_forever()
