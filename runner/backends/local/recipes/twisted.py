"""Twisted's FTP server via ``servers/twisted/serve.py`` (one venv per version)."""
from __future__ import annotations

import json
import secrets

from runner.backends.local.recipes.base import FTP_USER, Launch, pasv_range, server_file, sha256
from runner.backends.local.recipes.venv import VenvRecipe
from runner.backends.local.rundir import RunDir
from runner.load.target import Target
from runner.spec.request import ServerRequest


class TwistedRecipe(VenvRecipe):
    """Twisted's FTP server via ``servers/twisted/serve.py`` (seed 000's script).
    Variant keys: ``backlog``, ``pasv_ports``, ``masquerade_address``."""

    name = "twisted"
    package = "twisted"

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        v = self.venv(req)
        script = server_file("twisted", "serve.py")
        password = secrets.token_hex(8)
        pass_file = run.path / "pass.dat"
        pass_file.write_text(f"{FTP_USER}:{password}\n")
        backlog = int(req.variant.get("backlog", 1024))
        opts = ["--backlog", str(backlog)]
        pr = pasv_range(req.variant)
        if pr:
            opts += ["--pasv-ports", f"{pr[0]}-{pr[1]}"]
        if req.variant.get("masquerade_address"):
            opts += ["--masquerade", str(req.variant["masquerade_address"])]
        argv = [str(v.python), str(script), "--host", self.host, "--port", str(port),
                "--passwd-file", str(pass_file), "--home", str(run.home), *opts]
        cfg = {"script_sha256": sha256(script.read_text()), "options": opts, "user": FTP_USER}
        (run.path / "config.json").write_text(json.dumps(cfg, indent=1))
        return Launch(argv, Target(self.host, port, FTP_USER, password, run.home),
                      json.dumps(cfg, sort_keys=True),
                      {"version": v.version, "binary": str(script), "interpreter": str(v.python),
                       "obtained": self.obtained(v), **self.source_entry(v)},
                      env={"PYTHONUNBUFFERED": "1"})
