#!/usr/bin/env python3
"""k8s_discovery.py - the smallest API server kubectl needs for
`kubectl create --dry-run=client --validate=false`: discovery only (/api,
/apis, /api/v1 with pods, /apis/batch/v1 with jobs), so test_export.sh can
have kubectl read the exported manifests (YAML parsing, apiVersion/kind
mapping) on a machine without a cluster. Nothing is created: every other
path is a 404. Prints its port on the first line of stdout.
"""
import http.server, json, sys
R = {
 "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
 "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [{"name": "batch", "versions": [{"groupVersion": "batch/v1", "version": "v1"}], "preferredVersion": {"groupVersion": "batch/v1", "version": "v1"}}]},
 "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [{"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "verbs": ["create", "get", "list"]}]},
 "/apis/batch/v1": {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "batch/v1", "resources": [{"name": "jobs", "singularName": "job", "namespaced": True, "kind": "Job", "verbs": ["create", "get", "list"]}]},
}
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        p = self.path.split("?")[0]
        b = R.get(p)
        self.send_response(200 if b else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(b or {"kind": "Status", "code": 404}).encode())
    def log_message(self, *a): pass
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
print(srv.server_port, flush=True)
srv.serve_forever()
