"""An OTLP/HTTP trace receiver for tests/traces.rs, decoding with OpenTelemetry's own protobuf
package (opentelemetry-proto from PyPI), not herald's types.

Usage: python3 otlp_receiver.py SPANS_FILE
Prints the port it listens on (127.0.0.1), then answers every POST /v1/traces with an empty
ExportTraceServiceResponse and appends each span it received to SPANS_FILE as one JSON line:
trace_id, span_id, parent_span_id (hex, "" for a root), name, kind (SPAN_KIND_…), the
resource's and the span's attributes, its links and its events.
"""

import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

LOCK = threading.Lock()


def value(any_value):
    """An AnyValue as plain JSON."""
    return next(iter(MessageToDict(any_value).values()), None)


def attributes(key_values):
    return {kv.key: value(kv.value) for kv in key_values}


def spans(request):
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": Span.SpanKind.Name(span.kind),
                    "resource": resource,
                    "attributes": attributes(span.attributes),
                    "links": [
                        {
                            "trace_id": link.trace_id.hex(),
                            "span_id": link.span_id.hex(),
                            "attributes": attributes(link.attributes),
                        }
                        for link in span.links
                    ],
                    "events": [
                        {"name": event.name, "attributes": attributes(event.attributes)}
                        for event in span.events
                    ],
                }


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path != "/v1/traces":
            self.send_error(404)
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with LOCK, open(sys.argv[1], "a", encoding="utf-8") as out:
            for span in spans(request):
                out.write(json.dumps(span) + "\n")
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
