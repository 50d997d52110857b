"""Campaigns across hosts: the server on a ``servers`` host, load from every ``clients`` host.

A campaign spec with a ``hosts`` block (runner.spec.model.HostsSpec), or ``xferlab run SPEC
--inventory INV``, runs each cell like this (docs/multi-host.md):

1. The hosts come from the Ansible inventory (``ansible-inventory --list``): groups
   ``servers`` and ``clients``; per host ``ansible_host``, ``ansible_user``,
   ``ansible_port``, ``ansible_ssh_private_key_file``, ``ansible_ssh_common_args``,
   ``ansible_ssh_extra_args``, and xferlab's own ``xferlab_command`` (path of ``xferlab``
   there, default ``xferlab``), ``xferlab_env`` (environment variables for it) and
   ``xferlab_address`` (the address the server binds / clients connect to; default
   ``ansible_host``).
2. ``xferlab serve`` (:func:`runner.multihost.serve.serve_main`) starts over SSH on the server host: it starts
   the server with the spec's backend bound to the server's address, samples its
   process tree's memory and CPU *on that host* (runner.metrics.sampler.TreeSampler),
   and answers one-line commands on stdin (``fixture SIZE``, ``checkpoint NAME``,
   ``cpu``, ``alive``, ``stop``) with one JSON line each. EOF (the SSH connection
   closing) stops the server too.
3. ``xferlab loadgen`` (runner.multihost.loadgen) starts over SSH on every client host with
   a common ``--start-at`` (``hosts.start_delay`` seconds ahead) and runs the spec's
   driver (runner.load.registry); the N clients of the workload are split over the hosts
   (150 + 150 for 300; the catalogue's ``client_split``); STOR/RETR run one stream per host.
4. The JSON results are combined (:func:`runner.multihost.combine.combine`) and stored as one cell with the usual
   sample rows (runner.cell.samples.phase_samples), plus one ``client_host`` sample per
   client host with that host's own figures in ``raw``.

Combining, per docs/methodology.md: bytes, ops and errors are summed; latencies are
concatenated (the percentiles are of the merged distribution); per-client figures are
concatenated, so fairness (Jain's index) covers the clients of every host; client CPU
is summed over hosts. For concurrent workloads ``elapsed`` is the earliest measured
start to the latest measured end over all hosts (wall clocks: the hosts' clocks must be
NTP-synchronised); for single-stream workloads the throughput is the sum of the hosts'
throughputs and ``elapsed`` is set so that bytes / elapsed equals it.

The environment of a multi-host cell is the server host's snapshot (kernel, CPU,
sysctls, the tuning record of ansible/roles/tuning) with ``backend`` ``<name>+multihost``
and ``hosts``: ``{"server": NAME, "clients": {NAME: snapshot}}``.

Modules: :mod:`.inventory` (hosts from the Ansible inventory), :mod:`.serve` (the
server-host side, ``xferlab serve``), :mod:`.control` (the runner side: RemoteServer,
the loadgens, the multi-host cell runner), :mod:`.combine` (merging per-host results).
"""
from __future__ import annotations


class MultiHostError(Exception):
    """The multi-host setup is wrong or a remote step failed; the message names the
    host, the command and the cause."""
