"""A file server on 127.0.0.1 for download tests: started and stopped by the test.

Serves a folder with HTTP range requests (what resumable downloads use) as RFC 9110 has
them: each file with a strong ETag (its content's hash) or, with ``server.validator =
'last-modified'``, a Last-Modified date (None: neither); ``If-Range`` naming another
version gets the whole file (200); a range past the end gets 416 with ``bytes */SIZE``.
It can be told to close the connection after part of a file, to send slowly (the first
``slow_requests`` requests only), to answer a range with another one (``range_shift``), or to
answer a path with a redirect (``server.redirects[path] = url``).
"""
import email.utils
import hashlib
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
        server.if_ranges.append(self.headers.get('If-Range'))
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
        validators = {'etag': ('ETag', f'"{hashlib.sha256(data).hexdigest()[:16]}"'),
                      'last-modified': ('Last-Modified', email.utils.formatdate(path.stat().st_mtime, usegmt=True))}
        validator = validators.get(server.validator)
        start = 0
        rng = self.headers.get('Range')
        if_range = self.headers.get('If-Range')
        if rng and server.ranges and (if_range is None or (validator and if_range == validator[1])):
            start = max(0, int(rng.split('=')[1].split('-')[0]) + server.range_shift)
            if start >= len(data):
                self.send_response(416)
                self.send_header('Content-Range', f'bytes */{len(data)}')
                self.send_header('Content-Length', '0')
                self.end_headers()
                return
            self.send_response(206)
            self.send_header('Content-Range', f'bytes {start}-{len(data) - 1}/{len(data)}')
        else:
            self.send_response(200)
        if validator:
            self.send_header(*validator)
        body = data[start:]
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        if server.cut_after is not None:
            body = body[:server.cut_after]  # announce the whole file, send part, hang up
        slow = server.delay and len(server.requests) <= server.slow_requests
        sent = 0
        try:
            for i in range(0, len(body), 4096):
                self.wfile.write(body[i:i + 4096])
                sent += len(body[i:i + 4096])
                if slow:
                    server.sleep(server.delay)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client hung up
            pass
        finally:
            server.sent.append(sent)
        self.close_connection = True


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root):
        super().__init__(('127.0.0.1', 0), _Handler)
        self.root = Path(root)
        self.requests = []
        self.if_ranges = []  # the If-Range header of each request, None where there was none
        self.validator = 'etag'
        self.cut_after = None
        self.ranges = True
        self.delay = 0.
        self.slow_requests = 10 ** 9  # how many requests (the first ones) are sent with the delay
        self.sent = []  # bytes of body sent, per request answered with one
        self.redirects = {}
        self.range_shift = 0  # a 206 that starts this many bytes off the range asked for (a broken proxy)

    @staticmethod
    def sleep(seconds):
        threading.Event().wait(seconds)

    def url(self, name: str) -> str:
        return f'http://127.0.0.1:{self.server_address[1]}/{name}'


@contextmanager
def serve(root):
    """``with serve(folder) as server: server.url('file.pth')``; stopped on exit."""
    with _running(_Server(root)) as server:
        yield server


@contextmanager
def _running(server):
    """``server`` serving from a thread of its own; stopped and closed on exit."""
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


class _HubHandler(http.server.BaseHTTPRequestHandler):
    """The part of the Hugging Face Hub's HTTP interface huggingface_hub's ``hf_hub_download`` uses:
    ``HEAD``/``GET /OWNER/NAME/resolve/REVISION/FILE`` with the commit (``X-Repo-Commit``), an ETag and
    the size, a ``Range`` request's remainder (206); a missing repository, revision or file is a 404 with the
    Hub's ``X-Error-Code``."""
    def log_message(self, *args):
        pass

    def _answer(self, body: bool):
        server = self.server
        server.requests.append((self.command, self.path, self.headers.get('Authorization'), self.headers.get('Range')))
        parts = self.path.split('?')[0].lstrip('/').split('/')
        repo, revision, name = '/'.join(parts[:2]), parts[3] if len(parts) > 3 else '', '/'.join(parts[4:])
        if parts[2:3] != ['resolve'] or repo not in server.repos:
            return self._error('RepoNotFound', 'Repository not found')
        if server.token is not None and self.headers.get('Authorization') != f'Bearer {server.token}':
            return self._error('GatedRepo', 'Access to this repository is restricted', status=401)
        folder, commit = server.repos[repo]
        if revision not in ('main', commit):
            return self._error('RevisionNotFound', 'Invalid rev id')
        path = folder / name
        if not path.is_file():
            return self._error('EntryNotFound', 'Entry not found')
        data = path.read_bytes()
        start = int(self.headers.get('Range', 'bytes=0-').split('=')[1].split('-')[0]) if body else 0
        self.send_response(206 if start else 200)
        self.send_header('X-Repo-Commit', commit)
        self.send_header('ETag', f'"{hashlib.sha256(data).hexdigest()}"')
        self.send_header('Content-Length', str(len(data) - start))
        if start:
            self.send_header('Content-Range', f'bytes {start}-{len(data) - 1}/{len(data)}')
        self.end_headers()
        if not body:
            return
        if server.cuts.get(name, 0) > 0:   # the connection drops after half of what is left
            server.cuts[name] -= 1
            self.wfile.write(data[start:start + (len(data) - start) // 2])
            self.close_connection = True
            return
        self.wfile.write(data[start:])

    def _error(self, code: str, message: str, status: int = 404):
        self.send_response(status)
        self.send_header('X-Error-Code', code)
        self.send_header('X-Error-Message', message)
        self.send_header('Content-Length', '0')
        self.end_headers()

    def do_HEAD(self):
        self._answer(body=False)

    def do_GET(self):
        self._answer(body=True)


@contextmanager
def serve_hub(repos: dict, token=None, cuts=None):
    """A Hub on 127.0.0.1 serving ``{'OWNER/NAME': folder}``, each at one commit (its name's hash);
    ``token``: the repositories are gated, readable with that token only; ``cuts``: ``{FILE: n}``, the first
    n downloads of that file drop the connection halfway. Yields the server, whose ``endpoint`` is what
    HF_ENDPOINT takes and whose ``requests`` lists (method, path, Authorization, Range)."""
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _HubHandler)
    server.daemon_threads = True
    server.repos = {name: (Path(folder), hashlib.sha1(name.encode()).hexdigest()) for name, folder in repos.items()}
    server.requests, server.token, server.cuts = [], token, dict(cuts or {})
    server.endpoint = f'http://127.0.0.1:{server.server_address[1]}'
    with _running(server):
        yield server
