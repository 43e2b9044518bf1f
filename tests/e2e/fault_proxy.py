"""An HTTPS proxy in front of the API server that fails on command, as networks and overloaded API
servers do: it drops every open connection, stalls all traffic for a while, or answers the next
requests with an HTTP status (429 with Retry-After, 500) instead of passing them on.

    fault_proxy.py --upstream HOST:PORT --ca CA --cert CERT --key KEY --state DIR

It serves TLS with CERT/KEY (signed by the cluster's CA, so clients that trust that CA trust it),
talks TLS to the upstream API server trusting CA, and writes DIR/port (where it listens) and
DIR/control-port (where it takes commands) once ready. A command is one line on a connection to
the control port; the answer is one line, "ok" and the counts of faults served so far:

    drop                 reset every open connection; clients connect again
    stall SECONDS        pass nothing, either way, for SECONDS; new connections wait too
    status CODE COUNT    drop, then answer the first request of each of the next COUNT
                         connections with CODE (once its body is read) and close it
    counts               only the counts
"""

import argparse
import json
import os
import select
import socket
import ssl
import threading
import time

REASONS = {429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}


def cut(sock):
    """Resets a connection from any thread: shutdown through a duplicate of its descriptor, never
    touching the TLS state another thread may be using."""
    try:
        duplicate = socket.fromfd(sock.fileno(), socket.AF_INET, socket.SOCK_STREAM)
    except OSError:
        return
    try:
        duplicate.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    duplicate.close()


class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.open = set()
        self.stalled_until = 0.0
        self.status = None
        self.remaining = 0
        self.counts = {"dropped": 0, "stalls": 0, "answered": 0}

    def wait_while_stalled(self):
        while True:
            with self.lock:
                left = self.stalled_until - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.05))

    def drop(self):
        with self.lock:
            sockets = list(self.open)
            self.counts["dropped"] += len(sockets)
        for sock in sockets:
            cut(sock)

    def take_status(self):
        with self.lock:
            if self.remaining <= 0:
                return None
            self.remaining -= 1
            self.counts["answered"] += 1
            return self.status

    def command(self, line):
        words = line.split()
        if words[:1] == ["drop"]:
            self.drop()
        elif words[:1] == ["stall"] and len(words) == 2:
            with self.lock:
                self.stalled_until = time.monotonic() + float(words[1])
                self.counts["stalls"] += 1
        elif words[:1] == ["status"] and len(words) == 3:
            with self.lock:
                self.status, self.remaining = int(words[1]), int(words[2])
            self.drop()
        elif words[:1] != ["counts"]:
            return "error: unknown command " + line.strip()
        with self.lock:
            return "ok " + json.dumps(self.counts)


def read_head(conn):
    """The request head (through the blank line), or what came before the peer closed."""
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def read_body(conn, head):
    """Reads what is left of the request's body (its Content-Length), so that a client still
    writing it reads the answer rather than a reset connection."""
    headers, _, body = head.partition(b"\r\n\r\n")
    length = 0
    for line in headers.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            length = int(value.strip())
    left = length - len(body)
    while left > 0:
        chunk = conn.recv(min(left, 65536))
        if not chunk:
            break
        left -= len(chunk)


def answer(conn, code):
    reason = REASONS.get(code, "Failure")
    body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                       "message": f"the fault proxy answered {code}",
                       "reason": reason.replace(" ", ""), "code": code}).encode()
    head = (f"HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n")
    conn.sendall(head.encode() + body)


def relay(conn, upstream, faults):
    """Copies bytes both ways on one thread, so that no TLS connection is used by two at once."""
    other = {conn: upstream, upstream: conn}
    while True:
        ready = [sock for sock in other if sock.pending()]
        if not ready:
            ready, _, _ = select.select(list(other), [], [])
        for source in ready:
            chunk = source.recv(65536)
            if not chunk:
                return
            faults.wait_while_stalled()
            other[source].sendall(chunk)


def serve(raw, context, args, faults, upstream_context):
    conn = upstream = None
    try:
        conn = context.wrap_socket(raw, server_side=True)
        with faults.lock:
            faults.open.add(conn)
        faults.wait_while_stalled()
        head = read_head(conn)
        if not head:
            return
        code = faults.take_status()
        if code is not None:
            read_body(conn, head)
            answer(conn, code)
            return
        host, port = args.upstream.rsplit(":", 1)
        upstream = upstream_context.wrap_socket(socket.create_connection((host, int(port))),
                                                server_hostname=host)
        with faults.lock:
            faults.open.add(upstream)
        upstream.sendall(head)
        relay(conn, upstream, faults)
    except OSError:
        pass
    finally:
        with faults.lock:
            faults.open.discard(conn)
            faults.open.discard(upstream)
        for sock in (conn, upstream):
            if sock is not None:
                sock.close()
        if conn is None:
            raw.close()


def control_loop(listener, faults):
    while True:
        conn, _ = listener.accept()
        with conn:
            line = conn.makefile("r").readline()
            conn.sendall((faults.command(line) + "\n").encode())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for flag in ("--upstream", "--ca", "--cert", "--key", "--state"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(args.cert, args.key)
    upstream_context = ssl.create_default_context(cafile=args.ca)
    faults = Faults()

    control = socket.create_server(("127.0.0.1", 0))
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    threading.Thread(target=control_loop, args=(control, faults), daemon=True).start()
    for name, sock in (("control-port", control), ("port", listener)):
        with open(os.path.join(args.state, name), "w", encoding="utf-8") as out:
            out.write(str(sock.getsockname()[1]))
    while True:
        raw, _ = listener.accept()
        threading.Thread(target=serve,
                         args=(raw, server_context, args, faults, upstream_context),
                         daemon=True).start()


if __name__ == "__main__":
    main()
