"""proftpd (Debian proftpd-core) in the foreground with a generated AuthUserFile."""
from __future__ import annotations

import grp
import os
import pwd
import secrets

from ...base import ServerRequest, Target
from ..accounts import crypt_sha512, service_ids
from ..rundir import RunDir
from .base import FTP_USER, Launch, pasv_range, render, server_file
from .debian import DebianRecipe


class ProftpdRecipe(DebianRecipe):
    """proftpd (Debian proftpd-core) with ``-n`` (foreground), from
    ``servers/proftpd/proftpd.conf.tmpl``. The FTP user lives in a generated
    AuthUserFile (mod_auth_file, uid/gid of nobody/nogroup when root, else ours), so no
    system account is needed. Variant keys: ``use_sendfile``, ``pasv_ports``,
    ``masquerade_address``."""

    name = "proftpd"

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        fb = self.binary()
        uid, gid = service_ids()
        run_user = pwd.getpwuid(uid).pw_name
        run_group = grp.getgrgid(gid).gr_name
        os.chown(run.home, uid, gid)
        password = secrets.token_hex(8)
        (run.path / "ftpd.passwd").write_text(
            f"{FTP_USER}:{crypt_sha512(password)}:{uid}:{gid}:xferlab:{run.home}:/bin/sh\n")
        (run.path / "ftpd.group").write_text(f"{run_group}:x:{gid}:{FTP_USER}\n")
        for f in ("ftpd.passwd", "ftpd.group"):
            os.chmod(run.path / f, 0o600)  # proftpd refuses world-readable AuthUserFile
        pr = pasv_range(req.variant)
        masq = req.variant.get("masquerade_address")
        vals = {"host": self.host, "port": port, "max_clients": req.max_clients,
                "run_user": run_user, "run_group": run_group, "run_dir": run.path, "log_dir": run.logs,
                "use_sendfile": "on" if req.variant.get("use_sendfile", True) else "off",
                "passive_ports_line": f"PassivePorts {pr[0]} {pr[1]}" if pr else "",
                "masquerade_line": f"MasqueradeAddress {masq}" if masq else ""}
        tmpl = server_file("proftpd", "proftpd.conf.tmpl")
        conf = run.path / "proftpd.conf"
        conf.write_text(render(tmpl, vals))
        norm = render(tmpl, {**vals, "port": "PORT", "run_dir": "RUN", "log_dir": "RUN/logs"})
        argv = [str(fb.path), "-n", "-c", str(conf)]
        return Launch(argv, Target(self.host, port, FTP_USER, password, run.home), norm,
                      {**self.info(fb), "password_hash": "sha512-crypt"})
