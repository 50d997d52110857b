"""Drivers: the ways of making load, by name (see :mod:`runner.load.base`).

The registry maps a driver's name to the module defining it (attribute ``DRIVER``);
modules are imported on first use, so listing names costs nothing. A new driver is
one new module here and one line in :data:`DRIVER_MODULES`.
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from runner.load.base import Driver, DriverUnavailable, LoadError

if TYPE_CHECKING:
    from runner.catalogue.workloads import WorkloadParams

#: The driver of an FTP workload when a spec names none: xferlab's own asyncio FTP client.
DEFAULT_DRIVER = "xferlab-ftp"
#: The driver used when a spec names none, per protocol of the workload
#: (runner.catalogue.workloads.WorkloadInfo.protocol): xferlab's own clients.
DEFAULT_DRIVERS: dict[str, str] = {"ftp": DEFAULT_DRIVER, "http": "xferlab-http"}
#: driver name -> module defining ``DRIVER``.
DRIVER_MODULES: dict[str, str] = {
    "xferlab-ftp": "runner.load.ftp.driver",
    "xferlab-http": "runner.load.http.driver",
    "wrk": "runner.load.tools.wrk",
    "h2load": "runner.load.tools.h2load",
    "lftp": "runner.load.tools.lftp",
    "wget": "runner.load.tools.wget",
    "curl": "runner.load.tools.curl",
}


def driver_names() -> tuple[str, ...]:
    """Names of every registered driver, default first."""
    return tuple(DRIVER_MODULES)


def default_driver(workload: str) -> str:
    """The driver of ``workload`` (a name of runner.catalogue.workloads.WORKLOADS) when
    neither the spec nor the workload names one: :data:`DEFAULT_DRIVERS` of the
    workload's protocol. Raises KeyError for an unknown workload."""
    from runner.catalogue.workloads import WORKLOADS

    return DEFAULT_DRIVERS[WORKLOADS[workload].protocol]


def get_driver(name: str) -> Driver:
    """The driver registered as ``name``. Raises ValueError naming the known drivers."""
    mod = DRIVER_MODULES.get(name)
    if mod is None:
        raise ValueError(f"unknown driver {name!r}; known: {', '.join(DRIVER_MODULES)}")
    driver: Driver = import_module(mod).DRIVER
    return driver


def driver_refuses(driver: Driver, workload: str, params: WorkloadParams) -> str | None:
    """Why ``driver`` cannot run ``workload`` with ``params``, None when it can: non-empty
    ``client_options`` for a driver without ``takes_client_options`` (naming the drivers
    that take them), else the driver's optional ``refuses(workload, params)``."""
    if params.client_options and not getattr(driver, "takes_client_options", False):
        takers = [n for n in DRIVER_MODULES if getattr(get_driver(n), "takes_client_options", False)]
        return f"takes no client_options (drivers that do: {', '.join(takers)})"
    refuses = getattr(driver, "refuses", None)  # optional: parameters a driver cannot honour
    return refuses(workload, params) if refuses else None


def driver_record(name: str) -> dict[str, str]:
    """What made a cell's load, as stored in the cell's environment snapshot (key
    ``driver``): ``{"name": "xferlab-ftp", "version": "0.4.0"}``, plus the items of the
    driver's optional ``details()`` (xferlab-ftp: ``{"event_loop": "uvloop"}``).
    Raises ValueError for an unknown name."""
    driver = get_driver(name)
    details = getattr(driver, "details", None)
    return {"name": driver.name, "version": driver.version(), **(details() if details else {})}


__all__ = ["DEFAULT_DRIVER", "DEFAULT_DRIVERS", "DRIVER_MODULES", "Driver", "DriverUnavailable", "LoadError",
           "default_driver", "driver_names", "driver_record", "driver_refuses", "get_driver"]
