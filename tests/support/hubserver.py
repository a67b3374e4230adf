"""A real HTTP server on loopback that answers the calls huggingface_hub makes.

It serves `/{repo_id}/resolve/{revision}/{path}` (models) and
`/datasets/{repo_id}/resolve/{revision}/{path}` with the hub's headers:
X-Repo-Commit, ETag (git blob sha1) for small files, X-Linked-Etag (sha256) and
X-Linked-Size for LFS files, and X-Error-Code on 404s. Faults can be switched on
to test prepare's failure paths through the real client.
"""

import hashlib
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()


@dataclass
class Repo:
    revision: str
    files: dict  # path -> bytes
    lfs: set = field(default_factory=set)
    # What the hub claims a file's content hash is; defaults to the true hash.
    claimed_etag: dict = field(default_factory=dict)
    # Another commit id the server answers with (a moved branch, a wrong pin).
    answer_commit: str | None = None
    branches: dict = field(default_factory=dict)  # name -> commit, resolved by the info API (e.g. "main")


class HubServer:
    def __init__(self, repos: dict):
        self.repos = repos  # (repo_type, repo_id) -> Repo
        self.truncate = set()  # paths whose body is cut in half
        self.stop_after_gets = None  # the server goes away after this many GETs
        self.gets = 0
        self.log = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _route(self):
                parts = self.path.split("?")[0].lstrip("/").split("/")
                repo_type = "model"
                if parts[0] in ("datasets", "spaces"):
                    repo_type, parts = parts[0][:-1], parts[1:]
                if "resolve" not in parts:
                    return None
                at = parts.index("resolve")
                repo_id = "/".join(parts[:at])
                revision, path = parts[at + 1], "/".join(parts[at + 2:])
                return repo_type, repo_id, revision, path

            def _error(self, code, error_code):
                self.send_response(code)
                self.send_header("X-Error-Code", error_code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _info(self):
                """GET /api/{models|datasets}/{repo_id}/revision/{revision}: the repo's commit and files."""
                import json
                from urllib.parse import unquote

                parts = self.path.split("?")[0].lstrip("/").split("/")
                kind = {"models": "model", "datasets": "dataset"}.get(parts[1])
                if kind is None or "revision" not in parts:
                    return self._error(404, "EntryNotFound")
                at = parts.index("revision")
                repo = server.repos.get((kind, "/".join(parts[2:at])))
                if repo is None:
                    return self._error(404, "RepoNotFound")
                asked = unquote("/".join(parts[at + 1:]))
                commit = repo.revision if asked == repo.revision else repo.branches.get(asked)
                if commit is None:
                    return self._error(404, "RevisionNotFound")
                body = json.dumps({"id": "/".join(parts[2:at]), "sha": commit, "private": False,
                                   "siblings": [{"rfilename": name} for name in sorted(repo.files)]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _answer(self, with_body):
                server.log.append((self.command, self.path))
                if self.path.startswith("/api/"):
                    return self._info()
                route = self._route()
                if route is None:
                    return self._error(404, "EntryNotFound")
                repo_type, repo_id, revision, path = route
                repo = server.repos.get((repo_type, repo_id))
                if repo is None:
                    return self._error(404, "RepoNotFound")
                if revision != repo.revision:
                    return self._error(404, "RevisionNotFound")
                if path not in repo.files:
                    return self._error(404, "EntryNotFound")
                data = repo.files[path]
                start = 0
                header = self.headers.get("Range", "")
                if header.startswith("bytes=") and header.endswith("-"):
                    start = int(header[6:-1])
                self.send_response(206 if start else 200)
                self.send_header("X-Repo-Commit", repo.answer_commit or repo.revision)
                if path in repo.lfs:
                    etag = repo.claimed_etag.get(path, hashlib.sha256(data).hexdigest())
                    self.send_header("X-Linked-Etag", f'"{etag}"')
                    self.send_header("X-Linked-Size", str(len(data)))
                    self.send_header("ETag", f'"{git_blob_sha1(data)}"')
                else:
                    self.send_header("ETag", f'"{repo.claimed_etag.get(path, git_blob_sha1(data))}"')
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                if not with_body:
                    return
                server.gets += 1
                if server.stop_after_gets is not None and server.gets > server.stop_after_gets:
                    self.wfile.write(data[start:start + len(data) // 3])
                    self.wfile.flush()
                    self.close_connection = True
                    threading.Thread(target=server.stop, daemon=True).start()
                    return
                if path in server.truncate:
                    self.wfile.write(data[start:start + max(1, (len(data) - start) // 2)])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(data[start:])

            def do_HEAD(self):
                self._answer(False)

            def do_GET(self):
                self._answer(True)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
