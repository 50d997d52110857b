"""xferlab launch script for pyftpdlib (works with pyftpdlib 1.5.x and 2.x).

Run by xferlab's local backend with the interpreter of a per-version venv::

    python serve.py --host 127.0.0.1 --port 2121 --user xferlab --password PW \
        --home /tmp/run/home [--no-sendfile] [--pasv-ports 60000-60999] \
        [--masquerade 203.0.113.5] [--max-cons 0] [--backlog 1024] \
        [--tls-cert server.pem --tls-key server.key]

With ``--tls-cert``/``--tls-key`` the handler is pyftpdlib's ``TLS_FTPHandler`` (explicit
FTPS, RFC 4217; needs pyOpenSSL in the venv), with TLS required on the control and the
data connections (``tls_control_required``, ``tls_data_required``).

Follows seed 000's setup: RLIMIT_NOFILE soft raised to the hard limit and
``FTPServer.max_cons = 0`` (unlimited); one DummyAuthorizer user with permissions
"elradfmwMT". Logs go to stderr (warnings only, so logging does not cost throughput).
"""
import argparse
import logging
import resource
import sys


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--user", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--home", required=True)
    ap.add_argument("--no-sendfile", action="store_true")
    ap.add_argument("--pasv-ports", default=None, help="LO-HI")
    ap.add_argument("--masquerade", default=None)
    ap.add_argument("--max-cons", type=int, default=0, help="0 = unlimited (seed 000)")
    ap.add_argument("--max-cons-per-ip", type=int, default=0)
    ap.add_argument("--backlog", type=int, default=1024)
    ap.add_argument("--tls-cert", default=None, help="PEM certificate: explicit FTPS (TLS_FTPHandler)")
    ap.add_argument("--tls-key", default=None, help="PEM private key of --tls-cert")
    a = ap.parse_args(argv)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    from pyftpdlib.authorizers import DummyAuthorizer
    from pyftpdlib.handlers import FTPHandler
    from pyftpdlib.servers import FTPServer

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:  # pyftpdlib >= 1.5 uses the "pyftpdlib" logger
        logging.getLogger("pyftpdlib").setLevel(logging.WARNING)
    except Exception:
        pass

    auth = DummyAuthorizer()
    auth.add_user(a.user, a.password, a.home, perm="elradfmwMT")

    base = FTPHandler
    if a.tls_cert:
        from pyftpdlib.handlers import TLS_FTPHandler

        base = TLS_FTPHandler

    class Handler(base):
        pass

    if a.tls_cert:
        Handler.certfile = a.tls_cert
        Handler.keyfile = a.tls_key
        Handler.tls_control_required = True
        Handler.tls_data_required = True

    Handler.authorizer = auth
    Handler.use_sendfile = not a.no_sendfile
    if a.pasv_ports:
        lo, hi = (int(x) for x in a.pasv_ports.split("-"))
        Handler.passive_ports = list(range(lo, hi + 1))
    if a.masquerade:
        Handler.masquerade_address = a.masquerade
    Handler.banner = "xferlab pyftpdlib ready"

    FTPServer.max_cons = a.max_cons
    FTPServer.max_cons_per_ip = a.max_cons_per_ip
    server = FTPServer((a.host, a.port), Handler, backlog=a.backlog)
    sys.stderr.write("serving on %s:%d\n" % (a.host, a.port))
    sys.stderr.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close_all()


if __name__ == "__main__":
    main()
