"""A file server on 127.0.0.1 for download tests: started and stopped by the test.

Serves a folder with HTTP range requests (what resumable downloads use), and can be
told to close the connection after part of a file, to send slowly, or to answer a path
with a redirect (``server.redirects[path] = url``).
"""
import http.server
import threading
from contextlib import contextmanager
from pathlib import Path


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output clean
        pass

    def do_GET(self):
        server = self.server
        path = server.root / self.path.lstrip('/').split('?')[0]
        server.requests.append((self.path, self.headers.get('Range')))
        if self.path in server.redirects:
            self.send_response(302)
            self.send_header('Location', server.redirects[self.path])
            self.send_header('Content-Length', '0')
            self.end_headers()
            return
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        start = 0
        rng = self.headers.get('Range')
        if rng and server.ranges:
            start = int(rng.split('=')[1].split('-')[0])
            if start >= len(data):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header('Content-Range', f'bytes {start}-{len(data) - 1}/{len(data)}')
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        if server.cut_after is not None:
            body = body[:server.cut_after]  # announce the whole file, send part, hang up
        for i in range(0, len(body), 4096):
            self.wfile.write(body[i:i + 4096])
            if server.delay:
                server.sleep(server.delay)
        self.wfile.flush()
        self.close_connection = True


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root):
        super().__init__(('127.0.0.1', 0), _Handler)
        self.root = Path(root)
        self.requests = []
        self.cut_after = None
        self.ranges = True
        self.delay = 0.
        self.redirects = {}

    @staticmethod
    def sleep(seconds):
        threading.Event().wait(seconds)

    def url(self, name: str) -> str:
        return f'http://127.0.0.1:{self.server_address[1]}/{name}'


@contextmanager
def serve(root):
    """``with serve(folder) as server: server.url('file.pth')``; stopped on exit."""
    server = _Server(root)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def closed_port_url(name: str) -> str:
    """A URL on 127.0.0.1 where nothing listens (a port taken from the OS and released)."""
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    return f'http://127.0.0.1:{port}/{name}'
