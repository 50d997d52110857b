"""vsftpd (Debian) in the foreground, serving the system account ``xferlab-ftp``."""
from __future__ import annotations

import os

from runner.backends.local import debs
from runner.backends.local.accounts import VSFTPD_PASSWORD, VSFTPD_USER, ensure_vsftpd_user
from runner.backends.local.csrcbuild import CBuild
from runner.backends.local.recipes.base import Launch, pasv_range, render, server_file, target_tls, tls_mode
from runner.backends.local.recipes.debian import DebianRecipe
from runner.backends.local.rundir import RunDir
from runner.load.target import Target
from runner.spec.request import ServerRequest

#: vsftpd's FTPS settings (vsftpd.conf(5)): TLS required for logins and data, TLS 1.2
#: and 1.3 only (SSLv2/v3, TLS 1.0 off), ``ssl_ciphers=HIGH`` (vsftpd 3.0.3's default is
#: DES-CBC3-SHA alone, which OpenSSL 3 refuses), and ``require_ssl_reuse=NO``: xferlab's
#: client opens each data connection with a fresh TLS session (asyncio cannot resume the
#: control connection's), which vsftpd's default (YES) would refuse with 522.
VSFTPD_TLS = """ssl_enable=YES
rsa_cert_file={cert}
rsa_private_key_file={key}
ssl_sslv2=NO
ssl_sslv3=NO
ssl_tlsv1=YES
ssl_ciphers=HIGH
require_ssl_reuse=NO
allow_anon_ssl=NO
force_local_logins_ssl=YES
force_local_data_ssl=YES
implicit_ssl={implicit}"""


def vsftpd_ssl_lines(mode: str | None, cert: str, key: str) -> str:
    """The ``ssl_*`` lines of vsftpd.conf for FTPS ``mode`` (None: ``ssl_enable=NO``)."""
    if mode is None:
        return "ssl_enable=NO"
    return VSFTPD_TLS.format(cert=cert, key=key, implicit="YES" if mode == "implicit" else "NO")


class VsftpdRecipe(DebianRecipe):
    """vsftpd (Debian, or built from a ``source`` tree with its own Makefile) in the
    foreground, from ``servers/vsftpd/vsftpd.conf.tmpl``.
    Logs in as system user ``xferlab-ftp`` (created when root). PAM service
    ``xferlab-vsftpd`` has no file in /etc/pam.d, so PAM applies Debian's ``other``
    policy (common-auth: pam_unix). Variant keys: ``use_sendfile`` (default True),
    ``pasv_ports``, ``masquerade_address``, ``tls`` (explicit, or implicit: the listener
    speaks TLS from the first byte, ``implicit_ssl=YES``)."""

    name = "vsftpd"

    def extra_check(self, fb: debs.FoundBinary) -> None:
        ensure_vsftpd_user()

    def extra_source_check(self, build: CBuild) -> None:
        ensure_vsftpd_user()

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        fb, info = self.binary_for(req)
        pw = ensure_vsftpd_user()
        os.chown(run.home, pw.pw_uid, pw.pw_gid)
        empty = run.path / "empty"
        empty.mkdir(mode=0o755)
        pr = pasv_range(req.variant) or (0, 0)  # 0 = any port
        masq = req.variant.get("masquerade_address")
        vals = {"host": self.host, "port": port, "home": run.home, "max_clients": req.max_clients,
                "pasv_min": pr[0], "pasv_max": pr[1],
                "pasv_address_line": f"pasv_address={masq}" if masq else "",
                "use_sendfile": "YES" if req.variant.get("use_sendfile", True) else "NO",
                "pam_service": "xferlab-vsftpd", "empty_dir": empty, "log_dir": run.logs}
        mode = tls_mode(req)
        certs = (str(req.tls.cert), str(req.tls.key)) if mode else ("", "")
        vals["ssl_lines"] = vsftpd_ssl_lines(mode, *certs)
        tmpl = server_file("vsftpd", "vsftpd.conf.tmpl")
        conf = run.path / "vsftpd.conf"
        conf.write_text(render(tmpl, vals))
        norm = render(tmpl, {**vals, "port": "PORT", "home": "RUN/home", "empty_dir": "RUN/empty",
                             "log_dir": "RUN/logs", "ssl_lines": vsftpd_ssl_lines(mode, "CERT", "KEY")})
        return Launch([str(fb.path), str(conf)],
                      Target(self.host, port, VSFTPD_USER, VSFTPD_PASSWORD, run.home, tls=target_tls(req)), norm,
                      {**info, "system_user": VSFTPD_USER, "password_hash": "sha512-crypt"})
