"""Which Ansible inventories a campaign may use (``hosts.inventory``, ``xferlab run --inventory``).

``ansible-inventory -i PATH --list`` (runner.multihost.load_inventory) *executes* an
executable inventory file (Ansible's ``script`` plugin) and reads every file of an
inventory directory, and a spec's ``hosts.inventory`` may come from anyone holding the
dashboard's token. So an inventory is accepted only when:

* its real path (symlinks and ``..`` resolved) lies under one of the allowed
  directories, :func:`inventory_dirs`: ``XFERLAB_INVENTORY_DIRS`` (paths separated by
  ``:``) or, by default, the user's xferlab config folder ``inventories``
  (``platformdirs.user_config_dir("xferlab")/inventories``, e.g.
  ``~/.config/xferlab/inventories``) and this checkout's ``ansible/inventories``;
* it is a regular file without any execute bit, or a directory in which no file is
  executable and no symlink leads outside the allowed directories.

A path outside the allowed directories is refused with one message whether or not a
file exists there (nothing about it is looked at). ``ansible-inventory`` is then run
with only the static ``ini``, ``yaml`` and ``toml`` inventory plugins enabled
(:func:`ansible_env`): no ``script`` plugin, no ``auto``-loaded plugin configuration
that could evaluate templates or run commands.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

#: Inventory plugins ansible-inventory may use: static files only.
STATIC_PLUGINS = "ini,yaml,toml"
#: Bound on the entries examined in an inventory directory.
MAX_DIR_ENTRIES = 10_000


class InventoryError(ValueError):
    """The inventory path is not allowed; the message says why without telling whether
    anything exists outside the allowed directories."""


def inventory_dirs() -> list[Path]:
    """Allowed inventory directories, real paths: ``XFERLAB_INVENTORY_DIRS`` (``:``-separated)
    when set, else ``user_config_dir("xferlab")/inventories`` and ``<checkout>/ansible/inventories``."""
    from runner.config import get_settings

    return [Path(os.path.realpath(d)) for d in get_settings().inventory_dirs]


def _under(p: Path, dirs: list[Path]) -> bool:
    return any(p == d or d in p.parents for d in dirs)


def _executable(mode: int) -> bool:
    return bool(mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))


def allowed_inventory(path: str | Path) -> Path:
    """The real path of inventory ``path`` when it may be used (module docstring).

    Relative paths are taken from the current directory, as ``ansible-inventory -i`` would.

    Returns: the resolved path, to hand to ``ansible-inventory`` (not the given one, so a
    symlink swapped afterwards is not followed again).

    Raises:
        InventoryError: outside the allowed directories (same message whether it exists
            or not), missing, executable, not a file or directory, or a directory holding
            an executable file or a symlink leading outside.
    """
    dirs = inventory_dirs()
    given = str(path)
    real = Path(os.path.realpath(os.path.abspath(os.path.expanduser(given))))
    if not _under(real, dirs):
        raise InventoryError(f"inventory {given!r} is not under an allowed inventory directory "
                             f"({', '.join(map(str, dirs))}); put it there or set XFERLAB_INVENTORY_DIRS")
    try:
        st = real.stat()
    except OSError as exc:
        raise InventoryError(f"inventory {given!r}: {exc.strerror}") from None
    if stat.S_ISREG(st.st_mode):
        if _executable(st.st_mode):
            raise InventoryError(f"inventory {given!r} is executable: Ansible would run it as an inventory "
                                 f"script; xferlab takes static inventories only (chmod a-x {real})")
        return real
    if not stat.S_ISDIR(st.st_mode):
        raise InventoryError(f"inventory {given!r} is neither a file nor a directory")
    seen = 0
    for root, subdirs, files in os.walk(real, followlinks=False):
        for name in subdirs + files:
            seen += 1
            if seen > MAX_DIR_ENTRIES:
                raise InventoryError(f"inventory {given!r}: more than {MAX_DIR_ENTRIES} entries")
            p = Path(root) / name
            lst = p.lstat()
            if stat.S_ISLNK(lst.st_mode):
                target = Path(os.path.realpath(p))
                if not _under(target, dirs):
                    raise InventoryError(f"inventory {given!r}: {p.relative_to(real)} is a symlink leading "
                                         "outside the allowed inventory directories")
                try:
                    lst = target.stat()
                except OSError:
                    continue  # dangling: Ansible skips it
            if stat.S_ISREG(lst.st_mode) and _executable(lst.st_mode):
                raise InventoryError(f"inventory {given!r}: {p.relative_to(real)} is executable: Ansible would "
                                     "run it as an inventory script; xferlab takes static inventories only")
    return real


def ansible_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for ``ansible-inventory``: ``base`` (default ``os.environ``) with only
    the static inventory plugins enabled (:data:`STATIC_PLUGINS`) and an unparsable
    inventory an error instead of a warning."""
    env = dict(os.environ if base is None else base)
    env["ANSIBLE_INVENTORY_ENABLED"] = STATIC_PLUGINS
    env["ANSIBLE_INVENTORY_UNPARSED_FAILED"] = "True"
    return env
