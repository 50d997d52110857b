"""uvicorn under test: a small ASGI upload/download app (xferlab's HTTP upload lab).

    PUT  /uploads/<name>  body -> HOME/uploads/<name>, 201 (400 for a name with '/' or '..')
    POST /uploads/        body -> HOME/uploads/p-<pid hex>-<n>, a new file, 201 + Location
    GET  /<path>          the file HOME/<path>, sent in 256 KiB pieces (no sendfile in ASGI)

A body over --max-body bytes: 413, nothing kept. The app reads its settings from the
environment (UPLOAD_HOME, UPLOAD_MAX_BODY, UPLOAD_KEEPALIVE) so that uvicorn's worker
processes (``--workers N``, which import this module again) see the same.

usage: python serve.py --host H --port P --home DIR [--workers N] [--max-body BYTES]
                       [--keepalive 0|1] [--backlog N]
"""
from __future__ import annotations

import argparse
import itertools
import os
import posixpath
import sys

HOME = os.path.realpath(os.environ.get("UPLOAD_HOME", "."))
UPLOADS = os.path.join(HOME, "uploads")
MAX_BODY = int(os.environ.get("UPLOAD_MAX_BODY", str(1 << 30)))
KEEPALIVE = os.environ.get("UPLOAD_KEEPALIVE", "1") != "0"
_names = itertools.count()
_PIECE = 256 * 1024


async def _reply(send, status: int, extra: list | None = None) -> None:
    body = f"{status}\n".encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    if not KEEPALIVE or status == 413:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


async def _store(scope, receive, send, path: str, mode: str, location: str) -> None:
    declared = dict(scope["headers"]).get(b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        await _reply(send, 413)
        return
    try:
        f = open(path, mode)
    except FileExistsError:
        await _reply(send, 409)
        return
    except OSError:
        await _reply(send, 500)
        return
    got, status = 0, 201
    with f:
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                status = 0
                break
            chunk = msg.get("body", b"")
            got += len(chunk)
            if got > MAX_BODY:
                status = 413
                break
            f.write(chunk)
            if not msg.get("more_body", False):
                break
    if status != 201:
        os.unlink(path)
        if status:
            await _reply(send, status)
        return
    await _reply(send, 201, [(b"location", location.encode())])


async def _get(scope, send, path: str) -> None:
    full = os.path.realpath(os.path.join(HOME, posixpath.normpath(path).lstrip("/")))
    if full != HOME and not full.startswith(HOME + "/"):
        await _reply(send, 403)
        return
    try:
        f = open(full, "rb")
    except FileNotFoundError:
        await _reply(send, 404)
        return
    except OSError:
        await _reply(send, 403)
        return
    with f:
        st = os.fstat(f.fileno())
        if not os.path.isfile(full):
            await _reply(send, 403)
            return
        headers = [(b"content-type", b"application/octet-stream"), (b"content-length", str(st.st_size).encode())]
        if not KEEPALIVE:
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if scope["method"] == "HEAD":
            await send({"type": "http.response.body", "body": b""})
            return
        while True:
            piece = f.read(_PIECE)
            more = len(piece) == _PIECE
            await send({"type": "http.response.body", "body": piece, "more_body": more})
            if not more:
                return


async def app(scope, receive, send) -> None:
    """The ASGI application (lifespan events are acknowledged)."""
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            await send({"type": msg["type"] + ".complete"})
            if msg["type"] == "lifespan.shutdown":
                return
    if scope["type"] != "http":
        return
    path, method = scope["path"], scope["method"]
    if "\0" in path or ".." in path.split("/"):
        await _reply(send, 400)
    elif method in ("GET", "HEAD"):
        await _get(scope, send, path)
    elif method == "PUT":
        if not path.startswith("/uploads/"):
            await _reply(send, 403)
            return
        name = path[len("/uploads/"):]
        if not name or name == "." or "/" in name:
            await _reply(send, 400)
            return
        await _store(scope, receive, send, os.path.join(UPLOADS, name), "wb", "/uploads/" + name)
    elif method == "POST":
        if path not in ("/uploads/", "/uploads"):
            await _reply(send, 403)
            return
        name = f"p-{os.getpid():x}-{next(_names):x}"
        await _store(scope, receive, send, os.path.join(UPLOADS, name), "xb", "/uploads/" + name)
    else:
        await _reply(send, 405, [(b"allow", b"GET, HEAD, PUT, POST")])


def main() -> None:
    """Parse the command line, export the app's settings, run uvicorn."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--home", default=".")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--max-body", type=int, default=1 << 30)
    ap.add_argument("--keepalive", default="1")
    ap.add_argument("--backlog", type=int, default=4096)
    ap.add_argument("--tls-cert", default=None, help="PEM certificate: HTTPS (uvicorn's ssl_certfile)")
    ap.add_argument("--tls-key", default=None, help="PEM private key of --tls-cert (ssl_keyfile)")
    a = ap.parse_args()
    os.makedirs(os.path.join(a.home, "uploads"), exist_ok=True)
    os.environ.update(UPLOAD_HOME=os.path.realpath(a.home), UPLOAD_MAX_BODY=str(a.max_body),
                      UPLOAD_KEEPALIVE="0" if a.keepalive in ("0", "false") else "1")
    import uvicorn

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    print(f"uvicorn {uvicorn.__version__} on {a.host}:{a.port}, {a.workers} worker(s), home {a.home}",
          file=sys.stderr, flush=True)
    uvicorn.run("serve:app", app_dir=here, host=a.host, port=a.port, workers=a.workers, backlog=a.backlog,
                log_level="warning", access_log=False, timeout_keep_alive=300, lifespan="on",
                server_header=False, date_header=True, ssl_certfile=a.tls_cert, ssl_keyfile=a.tls_key)


if __name__ == "__main__":
    main()
