"""Twisted's FTP server in a container: servers/twisted/serve.py (seed 000's
``twist_ftpd.py``) plus what a container needs for passive mode from another host:
a passive port range (``FTPFactory.passivePortRange``) and a masquerade address
(Twisted has none: the 227 reply's address is rewritten).

    python serve_container.py --port 21 --passwd-file pass.dat --home /srv/ftp \
        [--host 0.0.0.0] [--backlog 1024] [--pasv-ports 30000-31999] [--masquerade ADDR]
"""
import argparse
import resource
import signal
import sys


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--passwd-file", required=True)
    ap.add_argument("--home", required=True)
    ap.add_argument("--backlog", type=int, default=1024)
    ap.add_argument("--pasv-ports", default=None, help="LO-HI")
    ap.add_argument("--masquerade", default=None, help="IPv4 address announced in PASV replies")
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
        # str credentials vs the bytes file on Python 3 (see servers/twisted/serve.py)
        def requestAvatarId(self, c):
            if isinstance(getattr(c, "username", None), str):
                pw = c.password.encode() if isinstance(c.password, str) else c.password
                c = UsernamePassword(c.username.encode(), pw)
            return FilePasswordDB.requestAvatarId(self, c)

    class Realm(ftp.FTPRealm):
        def getHomeDirectory(self, avatarId):
            return filepath.FilePath(home)

    class FTP(ftp.FTP):
        def reply(self, key, *args):
            if key == ftp.ENTERING_PASV_MODE and a.masquerade and args:
                port_hi, port_lo = args[0].split(",")[-2:]
                args = (ftp.encodeHostPort(a.masquerade, int(port_hi) * 256 + int(port_lo)),)
            return ftp.FTP.reply(self, key, *args)

    p = Portal(Realm(home, userHome=home), [AllowAnonymousAccess(), PasswordDB(a.passwd_file)])
    f = ftp.FTPFactory(p)
    f.protocol = FTP
    f.welcomeMessage = "xferlab twisted ready"
    if a.pasv_ports:
        lo, hi = (int(x) for x in a.pasv_ports.split("-"))
        f.passivePortRange = range(lo, hi + 1)
    reactor.listenTCP(a.port, f, backlog=a.backlog, interface=a.host)
    signal.signal(signal.SIGTERM, lambda *_: reactor.callFromThread(reactor.stop))
    sys.stderr.write("serving on %s:%d\n" % (a.host, a.port))
    sys.stderr.flush()
    reactor.run(installSignalHandlers=False)


if __name__ == "__main__":
    main()
