"""Servers from Debian packages: the installed binary, or the package fetched into
xferlab's cache with ``apt-get download`` + ``dpkg -x`` (:mod:`runner.backends.local.debs`);
or, for a request with a ``source``, the server built from that tree at its commit
(:mod:`runner.backends.local.csrcbuild`)."""
from __future__ import annotations

from typing import Any

from runner.backends.base import ServerSkipped
from runner.backends.local import debs
from runner.backends.local.csrcbuild import CBuild, build_c_server
from runner.backends.local.recipes.base import Recipe
from runner.spec.request import ServerRequest


class DebianRecipe(Recipe):
    """A Debian-packaged server; one version: the package's. A request with a ``source``
    runs the server built from that tree instead (:meth:`source_build`)."""

    def found(self) -> debs.FoundBinary | None:
        """The server's binary (installed or cached), None when absent."""
        return debs.find_server_binary(self.name)

    def quick_check(self) -> str | None:
        fb = self.found()
        if fb is None:
            spec = debs.DEB_SERVERS[self.name]
            return (f"{self.name}: {spec.binary} not in PATH, /usr/sbin or xferlab's cache "
                    f"({debs.debs_dir(self.name)}); it is fetched on first use (or now: xferlab servers "
                    f"--fetch {self.name}; apt-get download {' '.join(spec.debian)} + dpkg -x, no install)")
        return self._libs_reason(fb)

    def _libs_reason(self, fb: debs.FoundBinary) -> str | None:
        miss = debs.missing_libs(fb.path)
        if miss:
            pkgs = debs.lib_packages(self.name) if fb.obtained != "system" else []
            hint = f"apt-get install {' '.join(pkgs)}" if pkgs else "install the packages providing them"
            return f"{self.name}: {fb.path} cannot run, missing shared libraries {', '.join(miss)}; {hint}"
        return None

    def check(self, req: ServerRequest) -> None:
        if req.source is not None:
            self.extra_source_check(self.source_build(req))
            return
        if req.version is not None:
            fb = self.found()
            have = fb.package_version if fb else None
            if have is None or not have.startswith(req.version):
                raise ServerSkipped(f"{self.name}: version {req.version} requested; only the Debian "
                                    f"package's ({have or 'none found'}) can run here")
        fb = self.found()
        if fb is None:
            if not self.backend.auto_fetch:
                raise ServerSkipped(self.quick_check() or f"{self.name}: not found")
            self.backend.progress(f"fetching {self.name} (apt-get download + dpkg -x into the cache)")
            debs.fetch_debian_server(self.name)
            fb = self.found()
            if fb is None:
                raise ServerSkipped(f"{self.name}: fetch reported success but no binary found")
        reason = self._libs_reason(fb)
        if reason:
            raise ServerSkipped(reason)
        self.extra_check(fb)

    def extra_check(self, fb: debs.FoundBinary) -> None:
        """Server-specific requirements (users, helper tools)."""

    def extra_source_check(self, build: CBuild) -> None:
        """Server-specific requirements of a build from source (users); nothing by default."""

    def source_build(self, req: ServerRequest) -> CBuild:
        """The server built from ``req.source`` at ``req.ref`` (cached per commit). Raises
        ServerFailed when the ref does not resolve or the build fails (the builder's last lines)."""
        return build_c_server(self.name, req, self.backend.progress)

    def binary_for(self, req: ServerRequest) -> tuple[debs.FoundBinary, dict[str, Any]]:
        """The binary ``req`` runs and its build_info entries: the Debian one (:meth:`info`),
        or for a request with a ``source`` the build's (``obtained`` = ``"source"``, version
        ``git-<commit[:12]>``, the build's ``source`` record, ``build_seconds``, ``cflags``).
        Raises ServerSkipped (no Debian binary) or ServerFailed (a build that fails)."""
        if req.source is None:
            fb = self.binary()
            return fb, self.info(fb)
        b = self.source_build(req)
        fb = debs.FoundBinary(b.binaries["server"], "source", None, f"git-{b.source.short}")
        return fb, {**b.info(self.name), "binary": str(fb.path), "interpreter": None}

    def info(self, fb: debs.FoundBinary) -> dict[str, Any]:
        """build_info entries of the binary: version, binary, interpreter, obtained."""
        return {"version": fb.package_version, "binary": str(fb.path), "interpreter": None,
                "obtained": fb.obtained + (f" ({fb.root})" if fb.root else "")}

    def binary(self) -> debs.FoundBinary:
        """The binary; ServerSkipped when it is not there."""
        fb = self.found()
        if fb is None:
            raise ServerSkipped(self.quick_check() or f"{self.name}: not found")
        return fb
