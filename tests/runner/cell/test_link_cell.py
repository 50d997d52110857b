"""Whole cells over a shaped 100 Mbit link (the spec's link axis): the local backend
starts the server in the link's server namespace, the driver runs in its client
namespace, the cell stores the qdisc counters. xferlab-ftp and wget against tpd and
pyftpdlib. Needs root, ip and tc (skipped with the reason otherwise)."""
from __future__ import annotations

import os

import pytest

from runner.cell.local import run_local_cell
from runner.metrics.runqueue import cpu_pressure_us
from runner.net import link as linknet
from runner.spec.model import parse_spec
from runner.spec.request import ServerRequest
from runner.store.models import Cell
from tests.runner.support import check_or_skip, driver_or_skip
from tests.support.skips import machine_lacks, not_root, skip_if_problem
from tests.support.steal import Steal

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300),
              skip_if_problem(linknet.base_problem(), machine=not_root())]

MIB = 1 << 20
#: 100 Mbit/s as payload: tbf counts whole Ethernet frames, 1448 payload bytes in 1514
#: (docs/methodology.md), so a TCP stream carries 95.6 Mbit/s = 11.4 MiB/s.
PAYLOAD_MIB_S = 100e6 / 8 * 1448 / 1514 / MIB
#: The single-stream figure's band over 100 Mbit/s: within 2% of the payload rate, a band
#: that excludes the raw line rate (11.92 MiB/s). Each 8 MiB transfer may start with tbf's
#: refilled 64 KiB bucket (+0.8% at most) and spends a few round trips on PASV, STOR or
#: RETR and 226 (4-8 ms of a 0.71 s transfer here: under 1.2%).
BAND = (0.98 * PAYLOAD_MIB_S, 1.02 * PAYLOAD_MIB_S)
#: Most cells run for one single-stream figure. tbf is a software shaper: the link idles
#: when the machine runs its dequeue timer or softirq more than a bucket's worth late
#: (64 KiB: 5.2 ms at 100 Mbit/s), so a busy or descheduled virtual CPU can only lower
#: the figure (here, with an image build running beside it, a RETR cell read 11.024 MiB/s,
#: 3.3% under; a CI run's STOR 11.135, 2.3% under; three STOR cells in a row 11.006,
#: 10.854 and 11.134 while the host took 570-940 ms of the two CPUs' time in each). So
#: the band's lower edge is lowered by the share of the machine's CPU time the host took
#: over the cell (:class:`tests.support.steal.Steal`; 0 on a machine that lost none), and
#: a figure under it is measured again, in a new cell; one above the band is not. A
#: figure the lab gets wrong (bytes or time miscounted) lies outside the band in every cell.
ATTEMPTS = 3


def _mine() -> list[str]:
    return [n for n in linknet.lab_namespaces() if n.startswith(f"xl-{os.getpid()}-")]


def run_link_cell(backend, server: str, driver: str, workload: str, link: str, *, spec: dict | None = None,
                  variant: dict | None = None, **params):
    """One cell of ``server`` (with ``variant``) x ``workload`` (``params``) by ``driver`` over
    ``link``, run by run_local_cell on ``backend``; ``spec``: more campaign spec fields (e.g.
    ``{"backend": "docker"}``). Skipped when the driver or the server cannot run here.
    Returns (the ServerSpec, the CellOutcome); asserts the cell's namespaces are gone."""
    driver_or_skip(driver)
    check_or_skip(backend, ServerRequest(server))
    spec = parse_spec({"name": "link", "repeats": 1, "warmup": True, "driver": driver, "pinning": {}, **(spec or {}),
                       "link": [link], "servers": [{"name": server, **({"variant": variant} if variant else {})}],
                       "workloads": [{"name": workload, "params": params}]})
    srv = spec.servers[0]
    p = spec.workloads[0].params
    cell = Cell(id=1, seq=0, server=server, server_label=srv.display(), server_spec=srv.model_dump(mode="json"),
                workload=workload, params=p.model_dump(mode="json"), params_key="", repeat=0)
    out = run_local_cell(cell, spec, backend)
    assert _mine() == [], "the cell's link was not deleted"
    return srv, out


def _rows(out):
    return {(s.metric, s.stat): s for s in out.samples}


def _single_stream(backend, server: str, workload: str, *, duration: float):
    """An xferlab-ftp cell of ``workload`` (8 MiB transfers for ``duration`` s) on ``server``
    over 100 Mbit/s, run again (at most :data:`ATTEMPTS` cells) while its throughput lies
    under its floor: :data:`BAND`'s lower edge x (1 - the host's steal share over the
    cell). Returns (the ServerSpec, the last CellOutcome, its throughput in MiB/s, its
    floor in MiB/s, a line per cell: its figure, floor, the steal and CPU pressure over it)."""
    seen: list[str] = []
    for _ in range(ATTEMPTS):
        psi0 = cpu_pressure_us()
        with Steal() as steal:
            srv, out = run_link_cell(backend, server, "xferlab-ftp", workload, "100mbit", transfer_size=8 * MIB,
                                     duration=duration)
        psi1 = cpu_pressure_us()
        assert out.status == "done", out.error
        mib_s = _rows(out)[("throughput", "value")].value
        floor = BAND[0] * (1 - steal.share)
        pressure = f"{(psi1 - psi0) / 1000:.0f} ms" if psi0 is not None and psi1 is not None else "-"
        seen.append(f"{mib_s:.3f} MiB/s, floor {floor:.3f} ({steal}, CPU pressure {pressure})")
        if mib_s >= floor:
            break
    return srv, out, mib_s, floor, "; ".join(seen)


@pytest.mark.parametrize("server", ["tpd", "pyftpdlib"])
def test_xferlab_ftp_retr_over_100mbit(backend, server):
    srv, out, mib_s, floor, seen = _single_stream(backend, server, "retr", duration=2.0)
    assert srv.display() == f"{server} [link=100mbit/queue=250ms]"  # the default queue, named
    rows = _rows(out)
    assert floor <= mib_s <= BAND[1], f"over 100mbit: {seen}"
    sent = rows[("link_qdisc", "server_sent_bytes")]
    assert sent.value >= rows[("bytes", "value")].value  # the RETR's bytes went through the server's tbf
    assert rows[("link_qdisc", "client_sent_bytes")].value < sent.value / 10  # ACKs and commands
    assert sent.raw["link"] == "100mbit/queue=250ms"
    assert sent.raw["after"]["server"][0]["kind"] == "tbf"
    assert sent.raw["after"]["server"][0]["options"]["rate"] == 12_500_000
    assert ("link_qdisc", "server_drops") in rows
    assert out.build_info["link"]["tc"] == [f"tc qdisc add dev {dev} root handle 1: tbf rate 100000000bit "
                                            "burst 65536 latency 250000us" for dev in ("xl-rc", "xl-rs")]
    assert out.build_info["link"]["queues"] == "router"


def test_xferlab_ftp_stor_is_shaped_too(backend):
    _srv, out, mib_s, floor, seen = _single_stream(backend, "tpd", "stor", duration=1.5)
    assert floor <= mib_s <= BAND[1], f"over 100mbit: {seen}"
    rows = _rows(out)
    assert rows[("link_qdisc", "client_sent_bytes")].value >= rows[("bytes", "value")].value


def test_wget_clients_share_the_link(backend):
    """Seed 004's shape, small: 8 wget processes download 1 MiB each over 100 Mbit/s:
    8 MiB at 11.4 MiB/s take at least 0.7 s (at most a burst of 64 KiB comes early)."""
    _srv, out = run_link_cell(backend, "tpd", "wget", "retr_concurrent", "100mbit", clients=8, file_size=MIB)
    assert out.status == "done", out.error
    rows = _rows(out)
    assert rows[("bytes", "value")].value == 8 * MIB
    elapsed = rows[("elapsed", "value")].value
    assert elapsed >= 0.95 * 8 * MIB / (PAYLOAD_MIB_S * MIB), f"8 MiB in {elapsed:.2f} s is faster than the link"
    assert rows[("link_qdisc", "server_sent_bytes")].value >= 8 * MIB
    assert ("fairness", "jain") in rows


def test_loopback_cell_has_no_link_rows(backend):
    _srv, out = run_link_cell(backend, "tpd", "xferlab-ftp", "retr", "loopback", transfer_size=4 * MIB, duration=0.3)
    assert out.status == "done", out.error
    assert not [s for s in out.samples if s.metric == "link_qdisc"]


def test_delay_is_skipped_with_the_reason_without_netem(backend):
    why = linknet.link_problem(linknet.LinkSpec(100_000_000, 0.001))
    if why is None:
        machine_lacks("a kernel without netem (this one has it: a delay can be applied)")
    _srv, out = run_link_cell(backend, "tpd", "xferlab-ftp", "retr", "100mbit/1ms", transfer_size=MIB, duration=0.3)
    assert out.status == "skipped"
    assert "netem" in out.error and "tpd [link=100mbit/1ms/queue=250ms]" in out.error


def test_http_download_over_the_link(backend):
    """An HTTP cell over the link: tpd's HTTP listener in the server namespace, the
    xferlab-http driver in the client namespace; 4 clients GET 1 MiB for 2 s share
    100 Mbit/s."""
    _srv, out = run_link_cell(backend, "tpd", "xferlab-http", "http_download", "100mbit", clients=4, file_size=MIB,
                              duration=2.0)
    assert out.status == "done", out.error
    rows = _rows(out)
    moved = rows[("link_qdisc", "server_sent_bytes")].value
    elapsed = rows[("elapsed", "value")].value  # the phase's wall time: it runs past the 2 s duration
    assert moved >= 2 * MIB
    rate = moved * 8 / elapsed  # bits of whole frames, as tbf counts them
    assert 0.8e8 <= rate <= 1.05e8, f"{rate / 1e6:.1f} Mbit/s through the server's 100 Mbit/s tbf"
