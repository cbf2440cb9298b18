"""The receiver of docs/tracing.md, run as written: its Python block is read from the page and
executed, with OpenTelemetry's Python SDK exporting its spans to the test's collector.

    python3 otlp_joining_receiver.py DOCS_PAGE COLLECTOR_BASE_URL

Prints "listening <port>", then answers every POST 200 after calling the page's
`on_callback(headers, body)`.
"""
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

page, collector = sys.argv[1], sys.argv[2]
provider = TracerProvider(resource=Resource.create({"service.name": "bbb-receiver"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=collector + "/v1/traces")))
trace.set_tracer_provider(provider)

blocks = re.findall(r"```python\n(.*?)```", open(page).read(), re.S)
snippet = next(b for b in blocks if "def on_callback" in b)
namespace = {}
exec(snippet, namespace)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        namespace["on_callback"]({k.lower(): v for k, v in self.headers.items()}, body)
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
