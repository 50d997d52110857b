"""Link conditions: what the path between the load generator and the server looks like.

A *link* is ``loopback`` (the default: nothing is shaped; the load reaches the server
over loopback or the container's namespace, as without this module) or a shaped path:
a rate, a one-way delay and a loss rate applied with ``tc`` on both ends of a veth pair
between two network namespaces the lab creates (runner.net.link). This module is
the plain-data half: the validated :class:`LinkSpec`, its text form, and the ``tc``
argument lists it stands for. Nothing here runs a command.

Text form (the spec's ``link:`` entries, ``xferlab run --link``, the variant value and
the server label): ``loopback``, or ``/``-separated parts told apart by their unit,
canonical order rate/delay/loss::

    100mbit            rate only (tbf)
    100mbit/1ms        rate and a one-way delay (netem + tbf)
    100mbit/1ms/0.1%   ... and a loss rate
    1ms/0.5%           delay and loss without a rate limit (netem)

Units as tc(8) ("PARAMETERS", rates and times): rates ``bit``, ``kbit``, ``mbit``,
``gbit`` (SI: 1 kbit = 1000 bit/s); tc's ``bps``/``mbps`` mean *bytes* per second and
are refused here so that "100mbps" cannot silently mean 800 Mbit/s. Times ``s``, ``ms``,
``us``. Loss in percent. Delay and loss apply to each direction (each veth end's
egress), so the round-trip time is twice the delay and a round trip loses ``1 - (1 -
loss)^2``.

tbf parameters (tc-tbf(8)): ``burst`` is the bucket size, at least ``rate / HZ`` to
reach the rate (kernels with HZ up to 1000: 1 ms of traffic) and at least one 64 KiB
GSO packet, which tbf otherwise splits into MTU-sized segments (net/sched/sch_tbf.c,
tbf_segment); so ``burst = max(64 KiB, 1 ms at the rate)``. ``latency`` is the longest a
packet may wait in the queue, which sets tbf's queue limit.

**The queue** of a rated link is a parameter (docs/methodology.md, "The link's queue"):
``queue=250ms`` (the longest wait, tbf's ``latency``), ``queue=256kb`` (bytes, tbf's
``limit``; ``b``, ``kb``, ``mb`` are tc(8)'s binary sizes: 1 kb = 1024 bytes), and the
queueing discipline under tbf: ``tbf`` (tbf's own byte FIFO, the default), ``pfifo`` (a
packet FIFO of ``ceil(bytes / 1514)`` packets, 1514 bytes the largest Ethernet frame) or
``fq_codel`` (per-flow queues with CoDel, RFC 8290; its ``memory_limit`` the queue's
bytes). A queue given in ms is ``ms x rate / 8`` bytes for pfifo and fq_codel.

The default queue (:data:`DEFAULT_QUEUE_S`) is 250 ms at the rate, the rule of thumb by
which router line cards were sized: one bandwidth-delay product, ``B = RTT x C`` (C. Villamizar
and C. Song, "High performance TCP in ANSNET", ACM CCR 24(5), 1994), with the 250 ms
round trip assumed for Internet paths (G. Appenzeller, I. Keslassy and N. McKeown,
"Sizing Router Buffers", SIGCOMM 2004, section 1: "a 10Gb/s router linecard needs
approximately 250ms x 10Gb/s = 2.5Gbits of buffers"). At 100 Mbit/s that is 3,125,000
bytes, of the order of the packet memory a commodity switch can give one congested port.
Cells stored before this default was chosen ran with 50 ms (:data:`LEGACY_QUEUE_S`).

Text form: ``100mbit/queue=250ms``, ``100mbit/queue=256kb/pfifo``: the text of a rated link
always carries its queue, the default's included (``100mbit`` reads as
``100mbit/queue=250ms``), so no label or history key of a new cell is the bare text
(``100mbit``) that meant a 50 ms queue in the cells stored before (migration 0011 wrote
their texts out as ``100mbit/queue=50ms``). The default discipline (tbf) adds nothing.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

#: Rate units of tc(8), bits per second (SI multiples).
RATE_UNITS = {"bit": 1, "kbit": 1_000, "mbit": 1_000_000, "gbit": 1_000_000_000}
#: Time units of tc(8), seconds.
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
MIN_RATE_BIT = 8_000  # 8 kbit/s: one 1500-byte packet every 1.5 s, already a stall
MAX_RATE_BIT = 100_000_000_000  # 100 gbit/s: above any veth here
MAX_DELAY_S = 10.0  # netem's delay is unbounded; ten seconds is past any FTP timeout
#: tbf's bucket: at least one 64 KiB GSO packet (module docstring).
MIN_BURST_BYTES = 64 * 1024
#: The default queue of a rated link as the longest wait, seconds: 250 ms at the rate, one
#: bandwidth-delay product of the Internet's assumed 250 ms round trip (module docstring).
DEFAULT_QUEUE_S = 0.25
#: The default queue of the links of cells stored before :data:`DEFAULT_QUEUE_S`, seconds:
#: tbf's ``latency 50ms``; their texts carry it since migration 0011 (module docstring).
LEGACY_QUEUE_S = 0.05
#: Queueing disciplines of a rated link's queue (module docstring); the first is the default.
QDISCS = ("tbf", "pfifo", "fq_codel")
#: Bounds of a queue: one 64 KiB GSO packet (a tbf limit below it drops every such packet:
#: 8 KiB carried 0.4 Mbit/s of a 100 Mbit/s link here) to 1 GiB; 1 ms to 10 s.
MIN_QUEUE_BYTES, MAX_QUEUE_BYTES = MIN_BURST_BYTES, 1 << 30
MIN_QUEUE_S, MAX_QUEUE_S = 0.001, 10.0
#: The largest Ethernet frame with its header, bytes: the packet count of a pfifo queue.
FRAME_BYTES = 1514
_SIZE_UNITS = {"b": 1, "kb": 1024, "mb": 1 << 20}
_SIZE_RE = re.compile(r"^([0-9]+)(b|kb|mb)$")

_RATE_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(bit|kbit|mbit|gbit)$")
_TIME_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(s|ms|us)$")
_LOSS_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)%$")


class LinkError(ValueError):
    """A link description is not valid; the message names the part and why."""


@dataclass(frozen=True)
class LinkSpec:
    """A link condition. All None / 0: loopback (nothing shaped).

    Attributes:
        rate_bit: rate limit, bits per second (tbf on each end's egress), or None.
        delay_s: one-way delay, seconds (netem on each end's egress), 0 for none.
        loss_pct: loss rate per direction, percent 0 <= loss < 100 (netem), 0 for none.
        queue_bytes: the rated queue's size in bytes (tbf ``limit``), or None.
        queue_s: the rated queue's longest wait in seconds (tbf ``latency``), or None; a
            rated link given neither gets :data:`DEFAULT_QUEUE_S` (set on construction).
        qdisc: the queue's discipline, one of :data:`QDISCS`.
    """

    rate_bit: int | None = None
    delay_s: float = 0.0
    loss_pct: float = 0.0
    queue_bytes: int | None = None
    queue_s: float | None = None
    qdisc: str = "tbf"

    def __post_init__(self) -> None:
        if self.rate_bit is not None and self.queue_bytes is None and self.queue_s is None:
            object.__setattr__(self, "queue_s", DEFAULT_QUEUE_S)

    @property
    def loopback(self) -> bool:
        """True when nothing is shaped (the default link)."""
        return self.rate_bit is None and not self.delay_s and not self.loss_pct

    @property
    def needs_netem(self) -> bool:
        """True when the link has a delay or a loss rate (only netem applies those)."""
        return bool(self.delay_s or self.loss_pct)

    @property
    def rate_bytes_s(self) -> float | None:
        """The rate in bytes per second, or None (no rate limit)."""
        return None if self.rate_bit is None else self.rate_bit / 8

    def text(self) -> str:
        """The canonical text form (module docstring): ``"100mbit/1ms/0.1%/queue=250ms"``,
        ``"loopback"``; a rated link's text always names its queue."""
        if self.loopback:
            return "loopback"
        parts = []
        if self.rate_bit is not None:
            parts.append(format_rate(self.rate_bit))
        if self.delay_s:
            parts.append(format_time(self.delay_s))
        if self.loss_pct:
            parts.append(f"{self.loss_pct:g}%")
        if self.queue_bytes is not None:
            parts.append(f"queue={format_size(self.queue_bytes)}")
        elif self.queue_s is not None:
            parts.append(f"queue={format_time(self.queue_s)}")
        if self.qdisc != QDISCS[0]:
            parts.append(self.qdisc)
        return "/".join(parts)

    def queue_limit_bytes(self) -> int:
        """The queue's size in bytes: ``queue_bytes``, else the wait ``queue_s`` at the rate
        (at least :data:`MIN_QUEUE_BYTES`). Raises LinkError for a link without a rate."""
        if self.rate_bit is None:
            raise LinkError("a link without a rate has no queue")
        if self.queue_bytes is not None:
            return self.queue_bytes
        wait = self.queue_s if self.queue_s is not None else DEFAULT_QUEUE_S  # set by __post_init__
        return max(MIN_QUEUE_BYTES, math.ceil(wait * self.rate_bit / 8))

    def burst_bytes(self) -> int:
        """tbf's bucket size, bytes: ``max(64 KiB, 1 ms at the rate)`` (module docstring).

        Raises:
            LinkError: the link has no rate.
        """
        if self.rate_bit is None:
            raise LinkError("a link without a rate has no tbf burst")
        return max(MIN_BURST_BYTES, math.ceil(self.rate_bit / 8 / 1000))


LOOPBACK = LinkSpec()


def format_rate(bit: int) -> str:
    """``100_000_000`` -> ``"100mbit"``: the largest tc(8) unit that divides it evenly."""
    for unit in ("gbit", "mbit", "kbit"):
        if bit % RATE_UNITS[unit] == 0:
            return f"{bit // RATE_UNITS[unit]}{unit}"
    return f"{bit}bit"


def format_size(n: int) -> str:
    """``262144`` -> ``"256kb"``: the largest tc(8) binary size unit that divides it evenly."""
    for unit in ("mb", "kb"):
        if n % _SIZE_UNITS[unit] == 0:
            return f"{n // _SIZE_UNITS[unit]}{unit}"
    return f"{n}b"


def parse_queue(v: Any) -> tuple[int | None, float | None]:
    """``"256kb"`` -> ``(262144, None)``; ``"50ms"`` -> ``(None, 0.05)``: a queue as bytes
    (tc(8) binary sizes b, kb, mb) or as the longest wait (s, ms, us).

    Raises:
        LinkError: neither form, or outside 1514 bytes..1 GiB or 1 ms..10 s.
    """
    s = str(v).strip().lower()
    m = _SIZE_RE.match(s)
    if m:
        n = int(m.group(1)) * _SIZE_UNITS[m.group(2)]
        if not MIN_QUEUE_BYTES <= n <= MAX_QUEUE_BYTES:
            raise LinkError(f"queue {v!r}: want 64kb (one GSO packet) to 1024mb")
        return n, None
    if _TIME_RE.match(s):
        sec = parse_time(s)
        if not MIN_QUEUE_S <= sec <= MAX_QUEUE_S:
            raise LinkError(f"queue {v!r}: want 1ms to 10s")
        return None, sec
    raise LinkError(f"queue {v!r}: want bytes (256kb, 1mb, 65536b) or a wait (50ms)")


def format_time(seconds: float) -> str:
    """``0.001`` -> ``"1ms"``: whole microseconds in the largest tc(8) unit that divides them."""
    us = round(seconds * 1e6)
    if us % 1_000_000 == 0:
        return f"{us // 1_000_000}s"
    if us % 1000 == 0:
        return f"{us // 1000}ms"
    return f"{us}us"


def parse_rate(v: Any) -> int:
    """``"100mbit"`` -> 100_000_000 bits per second (tc(8) units, module docstring).

    Raises:
        LinkError: not a rate with a bit unit, bytes-per-second units, or outside 8kbit..100gbit.
    """
    s = str(v).strip().lower()
    if s.endswith("bps"):
        raise LinkError(f"rate {v!r}: tc's 'bps' units are bytes per second; write bits, e.g. 100mbit")
    m = _RATE_RE.match(s)
    if not m:
        raise LinkError(f"rate {v!r}: want a number and bit, kbit, mbit or gbit, e.g. 100mbit")
    bit = round(float(m.group(1)) * RATE_UNITS[m.group(2)])
    if not MIN_RATE_BIT <= bit <= MAX_RATE_BIT:
        raise LinkError(f"rate {v!r}: want 8kbit to 100gbit")
    return bit


def parse_time(v: Any) -> float:
    """``"1ms"`` -> 0.001 s; a bare 0 is 0 (tc(8) time units s, ms, us).

    Raises:
        LinkError: not a time with a unit, not a whole number of microseconds, or over 10 s.
    """
    if (v == 0 and not isinstance(v, bool)) or (isinstance(v, str) and v.strip() == "0"):
        return 0.0
    s = str(v).strip().lower()
    m = _TIME_RE.match(s)
    if not m:
        raise LinkError(f"delay {v!r}: want a number and s, ms or us, e.g. 1ms")
    sec = float(m.group(1)) * TIME_UNITS[m.group(2)]
    if abs(sec * 1e6 - round(sec * 1e6)) > 1e-6:
        raise LinkError(f"delay {v!r}: want whole microseconds")
    if sec > MAX_DELAY_S:
        raise LinkError(f"delay {v!r}: want at most 10s")
    return sec


def parse_loss(v: Any) -> float:
    """``"0.1%"`` or ``0.1`` -> 0.1 (percent per direction).

    Raises:
        LinkError: not a number (with an optional %), or outside 0 <= loss < 100.
    """
    if isinstance(v, bool):
        raise LinkError(f"loss {v!r}: want a percentage such as 0.1 or '0.1%'")
    if isinstance(v, (int, float)):
        pct = float(v)
    else:
        s = str(v).strip()
        m = _LOSS_RE.match(s) or re.match(r"^([0-9]+(?:\.[0-9]+)?)$", s)
        if not m:
            raise LinkError(f"loss {v!r}: want a percentage such as 0.1 or '0.1%'")
        pct = float(m.group(1))
    if not 0 <= pct < 100 or math.isnan(pct):
        raise LinkError(f"loss {v!r}: want 0 <= loss < 100 (percent)")
    return pct


def parse_link(v: Any) -> LinkSpec:
    """A link from its text form (module docstring) or a mapping ``{rate, delay, loss}``
    (each optional; ``{}`` is loopback), as a spec or the CLI gives it.

    Examples: ``"loopback"`` -> LOOPBACK; ``"100mbit"``; ``{"rate": "100mbit", "delay":
    "1ms", "loss": 0}`` -> ``LinkSpec(100_000_000, 0.001, 0.0)``.

    Raises:
        LinkError: an unknown key, a part given twice, or a bad rate/delay/loss (the
            message names it).
    """
    if isinstance(v, LinkSpec):
        return v
    if isinstance(v, dict):
        unknown = sorted(set(v) - {"rate", "delay", "loss", "queue", "qdisc"})
        if unknown:
            raise LinkError(f"unknown link key {', '.join(map(str, unknown))}; a link takes rate, delay, loss, "
                            "queue, qdisc")
        rate = v.get("rate")
        rate_bit = None if rate in (None, 0, "", "unlimited") else parse_rate(rate)
        qbytes, qs = parse_queue(v["queue"]) if v.get("queue") not in (None, "") else (None, None)
        qdisc = str(v.get("qdisc") or QDISCS[0]).strip().lower()
        if qdisc not in QDISCS:
            raise LinkError(f"qdisc {v.get('qdisc')!r}: want one of {', '.join(QDISCS)}")
        if rate_bit is None and (qbytes is not None or qs is not None or qdisc != QDISCS[0]):
            raise LinkError("queue and qdisc: the queue is the rate limiter's; give a rate")
        return LinkSpec(rate_bit, parse_time(v.get("delay") or 0), parse_loss(v.get("loss") or 0), qbytes, qs, qdisc)
    if not isinstance(v, str) or not v.strip():
        raise LinkError(f"link {v!r}: want 'loopback', a text such as 100mbit/1ms/0.1% or "
                        "a mapping {rate, delay, loss}")
    s = v.strip().lower()
    if s == "loopback":
        return LOOPBACK
    found: dict[str, Any] = {}
    for part in (p.strip() for p in s.split("/")):
        if part.startswith("queue="):
            kind, part = "queue", part[len("queue="):]
        elif part in QDISCS:
            kind = "qdisc"
        else:
            kind = "loss" if part.endswith("%") else "rate" if "bit" in part or part.endswith("bps") \
                else "delay" if _TIME_RE.match(part) else ""
        if not kind:
            raise LinkError(f"link {v!r}: part {part!r} is no rate (100mbit), delay (1ms), loss (0.1%), "
                            f"queue (queue=256kb) or qdisc ({', '.join(QDISCS)})")
        if kind in found:
            raise LinkError(f"link {v!r}: two {kind} parts")
        found[kind] = part
    return parse_link(found)


def link_text(v: Any) -> str:
    """The canonical text of a link given in any form :func:`parse_link` takes (raises as it)."""
    return parse_link(v).text()


# --- the tc argument lists (run by runner.net.link) ---------------------------------

def qdisc_argvs(link: LinkSpec, dev: str, netns: str) -> list[list[str]]:
    """The ``tc`` commands that shape the egress of ``dev`` in the named namespace
    ``netns`` for ``link``, in order (empty for loopback):

    - rate only: ``tc -n NS qdisc add dev DEV root handle 1: tbf rate R burst B latency Wus``
      (the queue's wait, 250000us by default, or ``limit BYTES`` for a queue in bytes), and for a ``pfifo`` or
      ``fq_codel`` queue that qdisc as tbf's child (``parent 1:1 handle 20:``, or ``10:1``
      under netem);
    - delay/loss only: ``... root handle 1: netem delay D loss L%``;
    - both: netem at the root and tbf as its child (``parent 1:1 handle 10:``), the
      combination of the netem documentation (tc-netem(8) and the Linux Foundation's
      netem page, "Rate control": netem does the delay, tbf the rate).

    Rates are written in bit (``100000000bit``), times in us, so nothing is rounded by tc's
    unit parsing. Raises nothing for a valid LinkSpec.
    """
    if link.loopback:
        return []
    base = ["tc", "-n", netns, "qdisc", "add", "dev", dev]
    tbf: list[str] = []
    child: list[list[str]] = []
    if link.rate_bit is not None:
        size = (["limit", str(link.queue_bytes)] if link.queue_bytes is not None
                else ["latency", f"{round((link.queue_s or DEFAULT_QUEUE_S) * 1e6)}us"])
        tbf = ["tbf", "rate", f"{link.rate_bit}bit", "burst", str(link.burst_bytes())] + size
        tbf_handle = "10:" if link.needs_netem else "1:"
        qbytes = link.queue_limit_bytes()
        if link.qdisc == "pfifo":
            child = [base + ["parent", f"{tbf_handle}1", "handle", "20:", "pfifo", "limit",
                             str(max(1, math.ceil(qbytes / FRAME_BYTES)))]]
        elif link.qdisc == "fq_codel":
            child = [base + ["parent", f"{tbf_handle}1", "handle", "20:", "fq_codel", "memory_limit", str(qbytes)]]
    if not link.needs_netem:
        return [base + ["root", "handle", "1:"] + tbf] + child
    netem = ["netem"]
    if link.delay_s:
        netem += ["delay", f"{round(link.delay_s * 1e6)}us"]
    if link.loss_pct:
        netem += ["loss", f"{link.loss_pct:g}%"]
    out = [base + ["root", "handle", "1:"] + netem]
    if tbf:
        out.append(base + ["parent", "1:1", "handle", "10:"] + tbf)
    return out + child


def parse_qdisc_json(data: Any) -> list[dict[str, Any]]:
    """The qdiscs of one device from ``tc -s -j qdisc show dev DEV`` (iproute2's JSON),
    each as ``{"kind", "handle", "parent", "options", "bytes", "packets", "drops",
    "overlimits", "requeues", "backlog"}`` (counts since the qdisc was added; bytes and
    backlog in bytes).

    Raises:
        ValueError: ``data`` is not the list of objects tc prints.
    """
    if not isinstance(data, list) or not all(isinstance(q, dict) for q in data):
        raise ValueError(f"tc -j qdisc show: expected a list of objects, got {str(data)[:200]!r}")
    out = []
    for q in data:
        out.append({"kind": q.get("kind"), "handle": q.get("handle"), "parent": q.get("parent", "root")
                    if not q.get("root") else "root", "options": q.get("options", {}),
                    **{k: int(q.get(k, 0) or 0) for k in ("bytes", "packets", "drops", "overlimits",
                                                           "requeues", "backlog")}})
    return out
