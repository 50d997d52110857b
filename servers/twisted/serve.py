"""xferlab launch script for Twisted's FTP server, after seed 000's ``twist_ftpd.py``.

Run by xferlab's local backend with the interpreter of a per-version venv::

    python serve.py --host 127.0.0.1 --port 2121 --passwd-file pass.dat --home DIR \
        [--backlog 1024] [--pasv-ports LO-HI] [--masquerade ADDR]

The container image runs the same script (``servers/twisted/container/entrypoint.sh``).

``pass.dat`` holds ``user:password`` (FilePasswordDB's default format). As in the seed:
RLIMIT_NOFILE soft raised to hard; Portal(FTPRealm(home), [AllowAnonymousAccess(),
FilePasswordDB(pass.dat)]); FTPFactory; listenTCP. Differences from the seed: bound to
``--host`` (loopback) instead of all interfaces, a large listen backlog, and the
authenticated user's home is ``--home`` itself (FTPRealm's userHome is overridden so
the user logs into the run dir, like the other servers, instead of ``<home>/<user>``),
and credentials are encoded to bytes before FilePasswordDB compares them (on Python 3
the seed's script as written refuses every login: str username vs bytes file entries).
For passive mode from another host: a passive port range
(``FTPFactory.passivePortRange``) and a masquerade address (Twisted has none: the
address in the 227 reply is rewritten).
"""
import argparse
import resource
import signal
import sys


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--passwd-file", required=True)
    ap.add_argument("--home", required=True)
    ap.add_argument("--backlog", type=int, default=1024)
    ap.add_argument("--pasv-ports", default=None, help="LO-HI")
    ap.add_argument("--masquerade", default=None, help="IPv4 address announced in PASV replies")
    ap.add_argument("--verbose", action="store_true", help="Twisted log to stderr")
    a = ap.parse_args(argv)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    from twisted.cred.checkers import AllowAnonymousAccess, FilePasswordDB
    from twisted.cred.credentials import UsernamePassword
    from twisted.cred.portal import Portal
    from twisted.internet import reactor
    from twisted.protocols import ftp
    from twisted.python import filepath

    home = a.home

    class PasswordDB(FilePasswordDB):
        # Twisted's FTP hands str credentials to the checker on Python 3 while
        # FilePasswordDB parses the file as bytes, so the seed's script refuses every
        # login on Python 3: encode before comparing.
        def requestAvatarId(self, c):
            if isinstance(getattr(c, "username", None), str):
                pw = c.password.encode() if isinstance(c.password, str) else c.password
                c = UsernamePassword(c.username.encode(), pw)
            return FilePasswordDB.requestAvatarId(self, c)

    class Realm(ftp.FTPRealm):
        def getHomeDirectory(self, avatarId):  # every user logs into --home
            return filepath.FilePath(home)

    class FTP(ftp.FTP):
        def reply(self, key, *args):
            if key == ftp.ENTERING_PASV_MODE and a.masquerade and args:
                port_hi, port_lo = args[0].split(",")[-2:]
                args = (ftp.encodeHostPort(a.masquerade, int(port_hi) * 256 + int(port_lo)),)
            return ftp.FTP.reply(self, key, *args)

    p = Portal(Realm(home, userHome=home),
               [AllowAnonymousAccess(), PasswordDB(a.passwd_file)])
    f = ftp.FTPFactory(p)
    f.protocol = FTP
    f.welcomeMessage = "xferlab twisted ready"
    if a.pasv_ports:
        lo, hi = (int(x) for x in a.pasv_ports.split("-"))
        f.passivePortRange = range(lo, hi + 1)
    if a.verbose:
        from twisted.python import log
        log.startLogging(sys.stderr)
    reactor.listenTCP(a.port, f, backlog=a.backlog, interface=a.host)
    signal.signal(signal.SIGTERM, lambda *_: reactor.callFromThread(reactor.stop))
    sys.stderr.write("serving on %s:%d\n" % (a.host, a.port))
    sys.stderr.flush()
    reactor.run(installSignalHandlers=False)


if __name__ == "__main__":
    main()
