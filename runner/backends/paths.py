"""Where the servers' recipes live (templates, launch scripts, Dockerfiles)."""
from __future__ import annotations

from runner.config import REPO_ROOT, get_settings

__all__ = ["REPO_ROOT", "SERVERS_DIR"]

#: Folder holding servers/<name>/ (templates, launch scripts, Dockerfiles, container
#: entrypoints): ``Settings.servers_dir`` (``XFERLAB_SERVERS_DIR``, e.g. for an installed,
#: non-editable copy), read when this module is imported. Read at call time by the local
#: backend's recipes (``paths.SERVERS_DIR``), so tests may point it elsewhere.
SERVERS_DIR = get_settings().servers_dir
