"""vsftpd (Debian) in the foreground, serving the system account ``xferlab-ftp``."""
from __future__ import annotations

import os

from ... import debs
from ...base import ServerRequest, Target
from ..accounts import VSFTPD_PASSWORD, VSFTPD_USER, ensure_vsftpd_user
from ..rundir import RunDir
from .base import Launch, pasv_range, render, server_file
from .debian import DebianRecipe


class VsftpdRecipe(DebianRecipe):
    """vsftpd (Debian) in the foreground, from ``servers/vsftpd/vsftpd.conf.tmpl``.
    Logs in as system user ``xferlab-ftp`` (created when root). PAM service
    ``xferlab-vsftpd`` has no file in /etc/pam.d, so PAM applies Debian's ``other``
    policy (common-auth: pam_unix). Variant keys: ``use_sendfile`` (default True),
    ``pasv_ports``, ``masquerade_address``."""

    name = "vsftpd"

    def extra_check(self, fb: debs.FoundBinary) -> None:
        ensure_vsftpd_user()

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        fb = self.binary()
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
        tmpl = server_file("vsftpd", "vsftpd.conf.tmpl")
        conf = run.path / "vsftpd.conf"
        conf.write_text(render(tmpl, vals))
        norm = render(tmpl, {**vals, "port": "PORT", "home": "RUN/home", "empty_dir": "RUN/empty",
                             "log_dir": "RUN/logs"})
        return Launch([str(fb.path), str(conf)],
                      Target(self.host, port, VSFTPD_USER, VSFTPD_PASSWORD, run.home), norm,
                      {**self.info(fb), "system_user": VSFTPD_USER, "password_hash": "sha512-crypt"})
