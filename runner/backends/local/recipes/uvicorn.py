"""uvicorn (an ASGI server from the package index) running ``servers/uvicorn/serve.py``,
one venv per version with httptools and uvloop."""
from __future__ import annotations

import json

from runner.backends.base import ServerSkipped
from runner.backends.local.recipes.base import Launch, server_file, sha256, tls_mode
from runner.backends.local.recipes.http import http_options, http_target
from runner.backends.local.recipes.venv import VenvRecipe
from runner.backends.local.rundir import RunDir
from runner.backends.local.venvs import VenvInfo, ensure_venv
from runner.spec.request import ServerRequest


class UvicornRecipe(VenvRecipe):
    """uvicorn via ``servers/uvicorn/serve.py`` (HTTP only). Variant keys: ``workers``
    (uvicorn's ``--workers``, default 1), ``keepalive``, ``max_body``, ``storage``."""

    name = package = "uvicorn"

    def venv(self, req: ServerRequest) -> VenvInfo:
        """The venv with uvicorn at ``req.version`` plus httptools and uvloop (made once,
        cached). Raises ServerSkipped when it cannot be made in time."""
        try:
            return ensure_venv(self.package, req.version, progress=self.backend.progress,
                               extra=["httptools", "uvloop"])
        except TimeoutError as e:
            raise ServerSkipped(f"{self.name} {req.version or 'latest'}: {e}") from e

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        v = self.venv(req)
        script = server_file("uvicorn", "serve.py")
        max_body, workers, keepalive = http_options(req)
        opts = ["--workers", str(workers), "--max-body", str(max_body), "--keepalive", "1" if keepalive else "0",
                "--backlog", "4096"]
        argv = [str(v.python), str(script), "--host", self.host, "--port", str(port), "--home", str(run.home), *opts]
        cfg = {"script_sha256": sha256(script.read_text()), "options": opts, "https": tls_mode(req) == "https"}
        if tls_mode(req) == "https":  # uvicorn's own TLS (ssl_certfile/ssl_keyfile)
            argv += ["--tls-cert", str(req.tls.cert), "--tls-key", str(req.tls.key)]
        return Launch(argv, http_target(self.host, run, port, req), json.dumps(cfg, sort_keys=True),
                      {"version": v.version, "binary": str(script), "interpreter": str(v.python),
                       "obtained": self.obtained(v)}, env={"PYTHONUNBUFFERED": "1"})
