"""Servers written in Python, installed per version into a cached venv
(:mod:`runner.backends.venvs`) and started with a launch script from ``servers/<name>/``."""
from __future__ import annotations

from ...base import ServerRequest, ServerSkipped
from ...venvs import VenvInfo, ensure_venv
from .base import Recipe, server_file


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

    def check(self, req: ServerRequest) -> None:
        reason = self.quick_check()
        if reason:
            raise ServerSkipped(reason)
        self.venv(req)

    def venv(self, req: ServerRequest) -> VenvInfo:
        """The venv with ``package`` at ``req.version`` (made once, cached). Raises
        ServerSkipped when it cannot be made in time."""
        try:
            return ensure_venv(self.package, req.version, progress=self.backend.progress)
        except TimeoutError as e:
            raise ServerSkipped(f"{self.name} {req.version or 'latest'}: {e}") from e

    @staticmethod
    def obtained(v: VenvInfo) -> str:
        """build_info ``obtained`` for a venv, e.g. ``"pip venv /root/.cache/... (cached)"``."""
        return f"pip venv {v.path}" + (" (created now)" if v.created else " (cached)")
