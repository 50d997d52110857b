"""pyftpdlib via ``servers/pyftpdlib/serve.py`` (one venv per version)."""
from __future__ import annotations

import json
import secrets

from runner.backends.local.recipes.base import FTP_USER, Launch, pasv_range, server_file, sha256, target_tls, tls_mode
from runner.backends.local.recipes.venv import VenvRecipe
from runner.backends.local.rundir import RunDir
from runner.load.target import Target
from runner.spec.request import ServerRequest


class PyftpdlibRecipe(VenvRecipe):
    """pyftpdlib via ``servers/pyftpdlib/serve.py``. Variant keys: ``use_sendfile``
    (bool, default True), ``pasv_ports`` ("LO-HI"), ``masquerade_address``, ``backlog``,
    ``tls`` (``explicit``: TLS_FTPHandler, pyOpenSSL installed into the venv on first use)."""

    name = package = "pyftpdlib"

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        v = self.venv(req)
        script = server_file("pyftpdlib", "serve.py")
        password = secrets.token_hex(8)
        var = req.variant
        opts: list[str] = []
        if not var.get("use_sendfile", True):
            opts.append("--no-sendfile")
        pr = pasv_range(var)
        if pr:
            opts += ["--pasv-ports", f"{pr[0]}-{pr[1]}"]
        if var.get("masquerade_address"):
            opts += ["--masquerade", str(var["masquerade_address"])]
        # max_cons = 0 (unlimited) as seed 000 patches in, unless a smaller limit is asked
        max_cons = 0 if req.max_clients >= 2000 else req.max_clients
        opts += ["--max-cons", str(max_cons), "--backlog", str(int(var.get("backlog", 1024)))]
        tls_info = {}
        if tls_mode(req) is not None:  # explicit only (catalogue.FTPS_MODES)
            tls_info = {"tls": var["tls"], "pyopenssl": self.ensure_module(v, "pyopenssl", "OpenSSL")}
            opts += ["--tls-cert", str(req.tls.cert), "--tls-key", str(req.tls.key)]
        argv = [str(v.python), str(script), "--host", self.host, "--port", str(port),
                "--user", FTP_USER, "--password", password, "--home", str(run.home), *opts]
        cfg = {"script_sha256": sha256(script.read_text()), "options": [o if not o.startswith("/") else "FILE"
                                                                         for o in opts],
               "user": FTP_USER, "perm": "elradfmwMT"}
        (run.path / "config.json").write_text(json.dumps(cfg, indent=1))
        return Launch(argv, Target(self.host, port, FTP_USER, password, run.home, tls=target_tls(req)),
                      json.dumps(cfg, sort_keys=True),
                      {"version": v.version, "binary": str(script), "interpreter": str(v.python),
                       "obtained": self.obtained(v), **self.source_entry(v),
                       "use_sendfile": bool(var.get("use_sendfile", True)), **tls_info},
                      env={"PYTHONUNBUFFERED": "1"})
