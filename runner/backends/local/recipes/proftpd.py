"""proftpd (Debian proftpd-core) in the foreground with a generated AuthUserFile."""
from __future__ import annotations

import grp
import os
import pwd
import secrets
from pathlib import Path

from runner.backends.base import ServerSkipped
from runner.backends.local import debs
from runner.backends.local.accounts import crypt_sha512, service_ids
from runner.backends.local.recipes.base import FTP_USER, Launch, pasv_range, render, server_file, target_tls, tls_mode
from runner.backends.local.recipes.debian import DebianRecipe
from runner.backends.local.rundir import RunDir
from runner.load.target import Target
from runner.spec.request import ServerRequest

#: proftpd's FTPS (mod_tls, Debian package proftpd-mod-crypto; a DSO loaded from ModulePath):
#: TLS 1.2/1.3, TLS required on control and data, no client certificates, and
#: ``NoSessionReuseRequired``: xferlab's client does not resume the control connection's
#: TLS session on data connections (mod_tls requires it by default since 1.3.4).
#: ``{load}``: the ModulePath/LoadModule lines of :data:`PROFTPD_TLS_LOAD`, empty for a
#: proftpd built from source (mod_tls compiled in, runner.backends.local.csrcbuild).
PROFTPD_TLS = """{load}<IfModule mod_tls.c>
  TLSEngine on
  TLSLog {log}
  TLSProtocol TLSv1.2 TLSv1.3
  {cert_directive} {cert}
  {key_directive} {key}
  TLSRequired on
  TLSVerifyClient off
  TLSRenegotiate none
  TLSOptions NoSessionReuseRequired{implicit}
</IfModule>"""
#: Loading mod_tls.so from Debian's module folder.
PROFTPD_TLS_LOAD = "ModulePath {modules}\nLoadModule mod_tls.c\n"


def proftpd_tls_block(mode: str | None, modules: str | None, log: str, cert: str, key: str, key_type: str) -> str:
    """The mod_tls block of proftpd.conf for FTPS ``mode`` (None: empty). ECDSA keys go to
    ``TLSECCertificate*``, RSA keys to ``TLSRSACertificate*`` (mod_tls's directives per key type).
    ``modules``: the folder mod_tls.so is loaded from; None: mod_tls is compiled in."""
    if mode is None:
        return ""
    kind = "EC" if key_type.startswith("ecdsa") else "RSA"
    load = PROFTPD_TLS_LOAD.format(modules=modules) if modules is not None else ""
    return PROFTPD_TLS.format(load=load, log=log, cert_directive=f"TLS{kind}CertificateFile", cert=cert,
                              key_directive=f"TLS{kind}CertificateKeyFile", key=key,
                              implicit=" UseImplicitSSL" if mode == "implicit" else "")


class ProftpdRecipe(DebianRecipe):
    """proftpd (Debian proftpd-core, or built from a ``source`` tree with mod_tls compiled
    in) with ``-n`` (foreground), from
    ``servers/proftpd/proftpd.conf.tmpl``. The FTP user lives in a generated
    AuthUserFile (mod_auth_file, uid/gid of nobody/nogroup when root, else ours), so no
    system account is needed. Variant keys: ``use_sendfile``, ``pasv_ports``,
    ``masquerade_address``, ``tls`` (explicit; implicit: ``TLSOptions UseImplicitSSL``;
    needs mod_tls from proftpd-mod-crypto, fetched with proftpd-core)."""

    name = "proftpd"

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        fb, info = self.binary_for(req)
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
        mode = tls_mode(req)
        if mode is not None:
            modules = str(self.tls_modules(fb)) if req.source is None else None
            vals["tls_block"] = proftpd_tls_block(mode, modules, str(run.logs / "tls.log"), str(req.tls.cert),
                                                  str(req.tls.key), req.tls.key_type)
        else:
            vals["tls_block"] = ""
        tmpl = server_file("proftpd", "proftpd.conf.tmpl")
        conf = run.path / "proftpd.conf"
        conf.write_text(render(tmpl, vals))
        norm_tls = proftpd_tls_block(mode, "MODULES" if req.source is None else None, "RUN/logs/tls.log", "CERT",
                                     "KEY", req.tls.key_type if mode else "")
        norm = render(tmpl, {**vals, "port": "PORT", "run_dir": "RUN", "log_dir": "RUN/logs", "tls_block": norm_tls})
        argv = [str(fb.path), "-n", "-c", str(conf)]
        return Launch(argv, Target(self.host, port, FTP_USER, password, run.home, tls=target_tls(req)), norm,
                      {**info, "password_hash": "sha512-crypt"})

    def tls_modules(self, fb: debs.FoundBinary) -> Path:
        """proftpd's module folder holding ``mod_tls.so``. For the cached extraction, a
        cache made before proftpd-mod-crypto was listed is fetched again (once).

        Raises:
            ServerSkipped: no mod_tls.so (an installed proftpd-core without
                proftpd-mod-crypto: the message says to install it).
        """
        modules = (fb.root or Path("/")) / "usr" / "lib" / "proftpd"
        if (modules / "mod_tls.so").is_file():
            return modules
        if fb.obtained == "system" or not self.backend.auto_fetch:
            raise ServerSkipped(f"proftpd: no FTPS: {modules / 'mod_tls.so'} missing; apt-get install "
                                "proftpd-mod-crypto (mod_tls)")
        self.backend.progress("fetching proftpd-mod-crypto (mod_tls) into the cache")
        debs.fetch_debian_server("proftpd")
        fb2 = self.binary()
        modules = (fb2.root or Path("/")) / "usr" / "lib" / "proftpd"
        if not (modules / "mod_tls.so").is_file():
            raise ServerSkipped(f"proftpd: no FTPS: mod_tls.so not in the fetched proftpd-mod-crypto ({modules})")
        return modules
