"""pure-ftpd (Debian) in the foreground with a PureDB virtual user."""
from __future__ import annotations

import os
import secrets
import subprocess

from runner.backends.base import ServerFailed, ServerSkipped
from runner.backends.local import debs
from runner.backends.local.accounts import crypt_sha512, service_ids
from runner.backends.local.recipes.base import FTP_USER, Launch, pasv_range, render, server_file, target_tls, tls_mode
from runner.backends.local.recipes.debian import DebianRecipe
from runner.backends.local.rundir import RunDir
from runner.load.target import Target
from runner.spec.request import ServerRequest


class PureftpdRecipe(DebianRecipe):
    """pure-ftpd (Debian, or built from a ``source`` tree: ``src/pure-ftpd`` and its
    ``src/pure-pw``) in the foreground with a PureDB virtual user (made with
    ``pure-pw``), options from ``servers/pureftpd/args.tmpl``: ``-c``/``-C`` connection
    limits (max_clients), ``-l puredb:FILE``, ``-E`` (no anonymous), ``-H`` (no DNS).
    Variant keys: ``pasv_ports``, ``masquerade_address``, ``tls`` (explicit: ``-Y 3 -2
    CERT,KEY``, TLS required on control and data)."""

    name = "pureftpd"

    def extra_check(self, fb: debs.FoundBinary) -> None:
        if debs.find_tool(self.name, "pure-pw") is None:
            raise ServerSkipped("pureftpd: pure-pw not found next to pure-ftpd (needed for the PureDB user)")

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        fb, build_info = self.binary_for(req)
        pure_pw = debs.find_tool(self.name, "pure-pw") if req.source is None else \
            self.source_build(req).binaries["pure-pw"]
        if pure_pw is None:
            raise ServerSkipped("pureftpd: pure-pw not found")
        uid, gid = service_ids()
        os.chown(run.home, uid, gid)
        password = secrets.token_hex(8)
        pwfile, pdb = run.path / "pureftpd.passwd", run.path / "pureftpd.pdb"
        # Written by hand rather than with `pure-pw useradd`, whose default argon2id hash
        # (t=1023) costs ~5 s of CPU per login here and would dominate login benchmarks.
        # SHA-512 crypt, like the proftpd and vsftpd users. No "/./": no chroot, like the others.
        pwfile.write_text(f"{FTP_USER}:{crypt_sha512(password)}:{uid}:{gid}::{run.home}::::::::::::\n")
        os.chmod(pwfile, 0o600)
        r = subprocess.run([str(pure_pw), "mkdb", str(pdb), "-f", str(pwfile)],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0 or not pdb.exists():
            raise ServerFailed(f"pureftpd: pure-pw mkdb failed: {(r.stderr + r.stdout).strip()[-800:]}")
        pr = pasv_range(req.variant)
        masq = req.variant.get("masquerade_address")
        vals = {"host": self.host, "port": port, "max_clients": req.max_clients, "puredb": pdb,
                "pasv_opt": f"-p {pr[0]}:{pr[1]}" if pr else "",
                "masq_opt": f"-P {masq}" if masq else "", "tls_opt": ""}
        if tls_mode(req) is not None:  # explicit only (catalogue.FTPS_MODES)
            vals["tls_opt"] = f"-Y 3 -2 {req.tls.cert},{req.tls.key}"
        tmpl = server_file("pureftpd", "args.tmpl")
        rendered = render(tmpl, vals)
        argv = [str(fb.path)] + [a for ln in rendered.splitlines()
                                 if ln.strip() and not ln.lstrip().startswith("#") for a in ln.split()]
        (run.path / "pureftpd.args").write_text(" ".join(argv) + "\n")
        norm = render(tmpl, {**vals, "port": "PORT", "puredb": "RUN/pureftpd.pdb",
                              "tls_opt": "-Y 3 -2 CERT,KEY" if vals["tls_opt"] else ""})
        info = {**build_info, "password_hash": "sha512-crypt"}
        return Launch(argv, Target(self.host, port, FTP_USER, password, run.home, tls=target_tls(req)), norm, info)
