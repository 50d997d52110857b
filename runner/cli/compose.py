"""``xferlab compose-targets``: a campaign spec whose servers are the running services of
``compose/servers.yml`` (``external`` servers; docs/containers.md)."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from runner.cli.common import CliError

HEADER = """\
# The running services of compose project {project!r} (compose/servers.yml) as external
# servers: xferlab neither starts nor stops them. Made by `xferlab compose-targets`; the
# pids are valid until the services restart (then run it again). Run the classic suite:
#   xferlab run THIS_FILE
# or a short campaign:
#   xferlab run THIS_FILE --workloads login,retr --clients 5 --transfer-size 4M --duration 0.5 --repeats 1
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``xferlab compose-targets``."""
    p.add_argument("-p", "--project", help="Compose project (docker-compose -p); default: the only one running "
                                           "server services")
    p.add_argument("--services", help="comma-separated services to include (default: every running one), "
                                      "e.g. vsftpd,tpd")
    p.add_argument("--user", default="xferlab", help="FTP user of the services (compose/servers.yml: xferlab)")
    p.add_argument("--password-env", default="FTP_PASSWORD",
                   help="environment variable holding the services' FTP password (default FTP_PASSWORD)")
    p.add_argument("-o", "--output", help="write the spec to this file (mode 0600: it holds the password)")


def cpuset_cpus(text: str) -> set[int]:
    """CPUs of a cpuset string (``"0"``, ``"0-2,5"``; ``""`` -> none). Raises ValueError
    naming the string when it is not a cpuset."""
    out: set[int] = set()
    for part in filter(None, (x.strip() for x in text.split(","))):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"not a cpuset: {text!r}")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def targets_spec(services: list, user: str, password: str, cpus: int) -> dict[str, Any]:
    """The spec (a dict for :func:`runner.spec.model.parse_spec`) for ``services``
    (:class:`runner.backends.docker.compose.ComposeService`, at least one): one external
    server each, the classic preset, and the load generator pinned to the CPUs (of ``cpus``)
    that no service is pinned to, when there are such CPUs."""
    if not services:
        raise ValueError("targets_spec: no service")
    spec: dict[str, Any] = {"name": f"compose {services[0].project}",
                            "servers": [s.spec_entry(user, password) for s in services],
                            "workloads": [{"preset": "classic"}]}
    used: set[int] = set()
    for s in services:
        used |= cpuset_cpus(s.cpuset)
    rest = [c for c in range(cpus) if c not in used]
    if used and rest:
        spec["pinning"] = {"client": rest}
    return spec


def cmd_compose_targets(args: argparse.Namespace) -> int:
    """Print (or write to ``--output``) the spec; exit status 0. Raises CliError when no
    engine answers, the password variable is unset or no service fits."""
    import yaml

    from runner.spec.model import parse_spec

    password = os.environ.get(args.password_env, "")
    if not password:
        raise CliError(f"set {args.password_env} to the FTP password the compose services were started with")
    try:
        import docker

        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as e:  # noqa: BLE001 - any failure means: no engine to ask
        raise CliError(f"no Docker engine answers: {type(e).__name__}: {e}") from None
    from runner.backends.docker.compose import ComposeTargetError, compose_services

    wanted = [s.strip() for s in args.services.split(",") if s.strip()] if args.services else None
    try:
        found = compose_services(client, args.project, wanted)
    except ComposeTargetError as e:
        raise CliError(str(e)) from None
    for s in found:
        if s.pid is None:
            print(f"{s.service}: memory not sampled: {s.pid_note}", file=sys.stderr)
    spec = targets_spec(found, args.user, password, os.cpu_count() or 1)
    parse_spec(spec, "compose-targets")  # what is printed is a valid spec
    text = HEADER.format(project=found[0].project) + yaml.safe_dump(spec, sort_keys=False)
    if args.output:
        fd = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # an existing file keeps its mode otherwise
        with os.fdopen(fd, "w") as f:
            f.write(text)
        print(f"wrote {args.output}: {len(found)} servers ({', '.join(s.service for s in found)})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
