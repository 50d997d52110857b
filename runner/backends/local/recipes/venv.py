"""Servers written in Python, installed per version into a cached venv
(:mod:`runner.backends.local.venvs`) and started with a launch script from ``servers/<name>/``."""
from __future__ import annotations

import subprocess
from typing import Any

from filelock import FileLock

from runner.backends.base import ServerSkipped
from runner.backends.local.recipes.base import Recipe, server_file
from runner.backends.local.srcbuild import source_venv
from runner.backends.local.venvs import VenvInfo, ensure_venv
from runner.spec.request import ServerRequest


class VenvRecipe(Recipe):
    """A Python server: ``package`` from the package index at the requested version in
    a venv, launched with ``servers/<name>/serve.py``."""

    package = "?"

    def quick_check(self) -> str | None:
        try:
            import venv  # noqa: F401
        except ImportError:
            return f"{self.name}: this Python has no venv module (apt-get install python3-venv)"
        script = server_file(self.name, "serve.py")
        if not script.is_file():
            return f"{self.name}: launch script {script} missing"
        return None

    def prepare(self, req: ServerRequest) -> None:
        self.venv(req)

    def venv(self, req: ServerRequest) -> VenvInfo:
        """The venv with ``package`` at ``req.version`` (made once, cached), or built from
        ``req.source`` at ``req.ref`` (runner.backends.local.srcbuild). Raises ServerSkipped
        when a release's venv cannot be made in time, ServerFailed when a source does not
        resolve or build."""
        if req.source is not None:
            return source_venv(self.package, req, self.backend.progress)
        try:
            return ensure_venv(self.package, req.version, progress=self.backend.progress)
        except TimeoutError as e:
            raise ServerSkipped(f"{self.name} {req.version or 'latest'}: {e}") from e

    def ensure_module(self, v: VenvInfo, requirement: str, module: str, timeout: float = 300.0) -> str:
        """Make sure ``module`` imports in the venv ``v``, pip-installing ``requirement``
        into it once when it does not (e.g. pyOpenSSL for pyftpdlib's TLS_FTPHandler,
        into a venv made before FTPS existed). Returns the module's ``__version__`` (or
        ``"?"``). Raises ServerSkipped with pip's output when it cannot be installed."""
        probe = [str(v.python), "-c", f"import {module} as m; print(getattr(m, '__version__', '?'))"]
        r = subprocess.run(probe, capture_output=True, text=True, timeout=60)
        if r.returncode == 0:
            return r.stdout.strip()
        with FileLock(v.path.parent / f"{v.path.name}.lock"):
            self.backend.progress(f"pip install {requirement} into {v.path} (one time)")
            r = subprocess.run([str(v.python), "-m", "pip", "install", "-q", requirement],
                               capture_output=True, text=True, timeout=timeout)
            if r.returncode != 0:
                raise ServerSkipped(f"{self.name}: pip install {requirement} failed: "
                                    f"{(r.stderr + r.stdout).strip()[-600:]}")
        r = subprocess.run(probe, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise ServerSkipped(f"{self.name}: {module} does not import after installing {requirement}: "
                                f"{r.stderr.strip()[-400:]}")
        return r.stdout.strip()

    @staticmethod
    def obtained(v: VenvInfo) -> str:
        """build_info ``obtained`` for a venv, e.g. ``"pip venv /root/.cache/... (cached)"``."""
        return f"pip venv {v.path}" + (" (created now)" if v.created else " (cached)")

    @staticmethod
    def source_entry(v: VenvInfo) -> dict[str, Any]:
        """``{"source": ...}`` (the build record's source entry) for a venv built from
        source, else ``{}``."""
        return {"source": v.source} if v.source is not None else {}
