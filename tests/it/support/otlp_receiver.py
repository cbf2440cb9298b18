"""An OTLP trace collector for the tests: decodes what an exporter sends with the OTLP protobuf
messages OpenTelemetry publishes (PyPI's opentelemetry-proto) and prints one JSON line per span.

    python3 otlp_receiver.py http|grpc [ok|refuse|hang]

Prints "listening <port>" first. Over HTTP it takes POST /v1/traces (any path is recorded in
"path"); `refuse` answers 503, `hang` never answers. Each span line holds the request's headers
(or gRPC metadata) and the resource's service.name.
"""
import json
import sys
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

lock = threading.Lock()


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def emit(request, headers, path):
    with lock:
        for rs in request.resource_spans:
            resource = {a.key: value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    line = {
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "parent_span_id": s.parent_span_id.hex(),
                        "name": s.name,
                        "kind": s.kind,
                        "start": s.start_time_unix_nano,
                        "end": s.end_time_unix_nano,
                        "attributes": {a.key: value(a.value) for a in s.attributes},
                        "status": {"code": s.status.code, "message": s.status.message},
                        "links": [{"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex()} for l in s.links],
                        "service": resource.get("service.name"),
                        "scope": ss.scope.name,
                        "headers": headers,
                        "path": path,
                    }
                    sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def main():
    transport = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else "ok"
    if transport == "http":
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if mode == "hang":
                    time.sleep(3600)
                if mode == "refuse":
                    self.send_response(503)
                    self.end_headers()
                    return
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                emit(request, {k.lower(): v for k, v in self.headers.items()}, self.path)
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        print(f"listening {server.server_address[1]}", flush=True)
        server.serve_forever()
    else:
        import grpc

        class Service(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request, context):
                if mode == "refuse":
                    context.abort(grpc.StatusCode.UNAVAILABLE, "refused by the test")
                emit(request, {k: v for k, v in context.invocation_metadata()}, "grpc")
                return trace_service_pb2.ExportTraceServiceResponse()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        print(f"listening {port}", flush=True)
        server.wait_for_termination()


if __name__ == "__main__":
    main()
