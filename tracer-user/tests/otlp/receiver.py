"""An OTLP profiles receiver for the tests, independent of sframe-trace's encoder: the
official opentelemetry-proto package (generated from the same v1development .proto files by
protoc) decodes each request, which is then resolved through its dictionary into plain JSON,
one line per request, in the --out file.

Usage: receiver.py --protocol grpc|http --out FILE [--stall]
                   [--tls-cert PEM --tls-key PEM [--client-ca PEM]] [--require-header NAME=VALUE]
Prints `PORT <n>` on stdout once it listens on 127.0.0.1:<n>. With --stall it accepts
requests and never answers (a collector that hangs). With --tls-cert it speaks TLS only, and
with --client-ca it also requires a client certificate signed by that CA (mutual TLS). With
--require-header a request without that exact header is refused (gRPC UNAUTHENTICATED, HTTP 401)
and not recorded. Each line records whether the header matched and, over HTTP, how the body
was compressed (gzip bodies are decompressed first; grpcio does that itself for gRPC)."""

import argparse
import gzip
import json
import ssl
import sys
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.profiles.v1development import (
    profiles_service_pb2 as service,
)

HTTP_PATH = "/v1development/profiles"
STALL_SECONDS = 3600


def any_value(value, strings):
    kind = value.WhichOneof("value")
    if kind == "string_value_strindex":
        return strings[value.string_value_strindex]
    return getattr(value, kind) if kind else None


def check_zero_values(d):
    """The dictionary rules of profiles.proto: index 0 of every table is its zero value."""
    errors = []
    tables = {
        "string_table": "",
        "mapping_table": None,
        "location_table": None,
        "function_table": None,
        "link_table": None,
        "attribute_table": None,
        "stack_table": None,
    }
    for name, zero in tables.items():
        table = getattr(d, name)
        if not table:
            errors.append(f"{name} is empty")
        elif zero == "" and table[0] != "":
            errors.append(f"{name}[0] is {table[0]!r}")
        elif zero is None and table[0].ByteSize() != 0:
            errors.append(f"{name}[0] is not the zero value")
    return errors


def resolve(request):
    d = request.dictionary
    strings = list(d.string_table)

    def attributes(indices):
        out = {}
        for i in indices:
            kv = d.attribute_table[i]
            out[strings[kv.key_strindex]] = any_value(kv.value, strings)
        return out

    def frames(stack_index):
        out = []
        for li in d.stack_table[stack_index].location_indices:
            location = d.location_table[li]
            mapping = d.mapping_table[location.mapping_index]
            out.append(
                {
                    "functions": [strings[d.function_table[line.function_index].name_strindex] for line in location.lines],
                    "address": location.address,
                    "mapping": strings[mapping.filename_strindex],
                    "mapping_attributes": attributes(mapping.attribute_indices),
                    "attributes": attributes(location.attribute_indices),
                }
            )
        return out

    def value_type(vt):
        return [strings[vt.type_strindex], strings[vt.unit_strindex]]

    resources = []
    for rp in request.resource_profiles:
        profiles = []
        for sp in rp.scope_profiles:
            for p in sp.profiles:
                profiles.append(
                    {
                        "scope": sp.scope.name,
                        "sample_type": value_type(p.sample_type),
                        "period_type": value_type(p.period_type),
                        "period": p.period,
                        "time_unix_nano": p.time_unix_nano,
                        "duration_nano": p.duration_nano,
                        "attributes": attributes(p.attribute_indices),
                        "samples": [
                            {
                                "frames": frames(s.stack_index),
                                "values": list(s.values),
                                "attributes": attributes(s.attribute_indices),
                            }
                            for s in p.samples
                        ],
                    }
                )
        resources.append(
            {
                "attributes": {kv.key: any_value(kv.value, strings) for kv in rp.resource.attributes},
                "profiles": profiles,
            }
        )
    return {"errors": check_zero_values(d), "resources": resources}


class Sink:
    def __init__(self, path, transport):
        self.path = path
        self.transport = transport
        self.lock = threading.Lock()

    def record(self, body, **extra):
        request = service.ExportProfilesServiceRequest()
        request.ParseFromString(body)
        line = resolve(request)
        line.update(transport=self.transport, **extra)
        with self.lock, open(self.path, "a") as out:
            out.write(json.dumps(line) + "\n")


def serve_grpc(sink, stall, tls, required):
    import grpc
    from opentelemetry.proto.collector.profiles.v1development import (
        profiles_service_pb2_grpc as service_grpc,
    )

    class Servicer(service_grpc.ProfilesServiceServicer):
        def Export(self, request, context):
            if stall:
                time.sleep(STALL_SECONDS)
            metadata = dict(context.invocation_metadata())
            if required and metadata.get(required[0]) != required[1]:
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong credentials")
            sink.record(request.SerializeToString(), header_matched=bool(required))
            return service.ExportProfilesServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    service_grpc.add_ProfilesServiceServicer_to_server(Servicer(), server)
    if tls:
        cert, key, client_ca = tls
        credentials = grpc.ssl_server_credentials(
            [(read(key), read(cert))],
            root_certificates=read(client_ca) if client_ca else None,
            require_client_auth=bool(client_ca),
        )
        port = server.add_secure_port("127.0.0.1:0", credentials)
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return port, server.wait_for_termination


def read(path):
    with open(path, "rb") as f:
        return f.read()


def serve_http(sink, stall, tls, required):
    class Handler(BaseHTTPRequestHandler):
        def refuse(self, status):
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self):
            if stall:
                time.sleep(STALL_SECONDS)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path != HTTP_PATH:
                return self.refuse(404)
            if required and self.headers.get(required[0]) != required[1]:
                return self.refuse(401)
            encoding = self.headers.get("Content-Encoding")
            if encoding == "gzip":
                body = gzip.decompress(body)
            sink.record(
                body,
                path=self.path,
                content_type=self.headers.get("Content-Type"),
                content_encoding=encoding,
                header_matched=bool(required),
            )
            reply = service.ExportProfilesServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if tls:
        cert, key, client_ca = tls
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        if client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(client_ca)
        # A failed handshake raises in accept(), which the server shrugs off (an OSError).
        server.socket = context.wrap_socket(server.socket, server_side=True)
    return server.server_address[1], server.serve_forever


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--protocol", choices=["grpc", "http"], required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--stall", action="store_true")
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--client-ca")
    parser.add_argument("--require-header")
    args = parser.parse_args()
    sink = Sink(args.out, args.protocol)
    serve = serve_grpc if args.protocol == "grpc" else serve_http
    tls = (args.tls_cert, args.tls_key, args.client_ca) if args.tls_cert else None
    required = None
    if args.require_header:
        name, value = args.require_header.split("=", 1)
        required = (name.lower(), value)
    port, wait = serve(sink, args.stall, tls, required)
    print(f"PORT {port}", flush=True)
    wait()


if __name__ == "__main__":
    sys.exit(main())
