"""A scripted HTTP server for the daemon's hostile-input tests (loopback only).

GET /redirect/<code>?to=<url>   answers <code> with Location: <url>
GET /slow/<ms>/...              waits <ms> milliseconds, then 200
GET /r                          answers REDIRECT_CODE with Location: REDIRECT_TO (short, for
                                Billpocket's 50-character urlScheme)
GET /anything-else              200 "ok"
Every request line goes to stderr as it arrives ("REQ <path>"), so the test sees hits at once.
Usage: scripted_http.py <port> [<bind address> [<REDIRECT_TO> [<REDIRECT_CODE>]]]
"""
import http.server
import signal
import socket
import sys
import time
import urllib.parse


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        sys.stderr.write("REQ %s\n" % self.path)
        sys.stderr.flush()
        parts = urllib.parse.urlsplit(self.path)
        segments = parts.path.strip("/").split("/")
        if segments[0] == "r" and REDIRECT[0]:
            segments = ["redirect", REDIRECT[1]]
            target = REDIRECT[0]
        else:
            target = urllib.parse.parse_qs(parts.query).get("to", ["/"])[0]
        if segments[0] == "redirect" and len(segments) > 1:
            self.send_response(int(segments[1]))
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if segments[0] == "slow" and len(segments) > 1:
            time.sleep(int(segments[1]) / 1000.0)
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


REDIRECT = ["", "302"]


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


def main():
    # A child of the Swift test runner inherits its threads' blocked signals, SIGTERM among them.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    port = int(sys.argv[1])
    bind = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
    if len(sys.argv) > 3:
        REDIRECT[0] = sys.argv[3]
    if len(sys.argv) > 4:
        REDIRECT[1] = sys.argv[4]
    if ":" in bind:
        Server.address_family = socket.AF_INET6
    server = Server((bind, port), Handler)
    sys.stderr.write("READY\n")
    sys.stderr.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
