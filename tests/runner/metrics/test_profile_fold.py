"""Folding the profilers' output (runner.metrics.profile_fold), on text in the tools' own
formats (``perf script -F comm,tid,time,event,trace,ip,sym,dso`` of perf 6.1, py-spy 0.4's
raw format, ``perf trace -s``), with the expected sums worked out by hand."""
from __future__ import annotations

import pytest

from runner.metrics.profile_fold import (
    off_cpu_stacks,
    on_cpu_stacks,
    parse_perf_script,
    perf_trace_summary,
    pyspy_stacks,
)


def _switch(comm: str, tid: int, t: float, prev_state: str, nxt: tuple[str, int], frames: tuple[str, ...] = ()) -> str:
    """A ``sched:sched_switch`` sample as perf script prints it: with its call chain on
    tab-indented lines, or (no call chain) its one ip on the header line."""
    head = (f"{comm:>8} {tid:5} {t:10.6f}: sched:sched_switch: prev_comm={comm} prev_pid={tid} prev_prio=120 "
            f"prev_state={prev_state} ==> next_comm={nxt[0]} next_pid={nxt[1]} next_prio=120")
    if not frames:
        return head + " ffffffff821facd8 __schedule ([kernel.kallsyms])\n"
    return head + "\n" + "".join(f"\tffffffff821facd8 {f} ([kernel.kallsyms])\n" for f in frames) + "\n"


SCRIPT = ("tpd 23265   310.704216:   10101010 cpu-clock: \n"
          "\tffffffff816b9ea6 do_sendfile+0x376 ([kernel.kallsyms])\n"
          "\t           fc80a __GI_sendfile64+0xa (inlined)\n"
          "\t            887f io_send_file+0x26f (/cache/tpd)\n"
          "\t            4931 main+0x131 (/cache/tpd)\n\n"
          "tpd 23265   310.714216:   10101010 cpu-clock: \n"
          "\t            1234 [unknown] (/usr/sbin/vsftpd)\n"
          "\t            4931 main+0x131 (/cache/tpd)\n\n"
          + _switch("tpd", 23265, 10.0, "S", ("swapper/0", 0), ("__schedule", "do_epoll_wait"))
          + _switch("swapper/0", 0, 10.25, "R", ("tpd", 23265))
          + _switch("tpd", 23265, 10.3, "R+", ("cat", 7), ("__schedule",))
          + _switch("cat", 7, 10.4, "S", ("tpd", 23265))
          + _switch("tpd", 23266, 10.5, "D", ("x", 9), ("__schedule", "io_schedule")))


def test_on_cpu_folds_root_first_with_kernel_prefix_and_unresolved_frames():
    on = on_cpu_stacks(parse_perf_script(SCRIPT))
    assert on.samples == 2 and on.unresolved == 1 and on.unresolved_dsos == ("[vsftpd]",)
    assert on.folded.splitlines() == ["tpd;main;[vsftpd] 1",
                                      "tpd;main;io_send_file;__GI_sendfile64;[k] do_sendfile 1"]


def test_off_cpu_pairs_switch_out_with_switch_in():
    off = off_cpu_stacks(parse_perf_script(SCRIPT), end=11.0)
    # asleep 10.0 -> 10.25 (epoll) and 10.5 -> 11.0 (io, never back: counted to the end);
    # preempted 10.3 -> 10.4
    assert off.blocked_s == pytest.approx(0.75) and off.runqueue_s == pytest.approx(0.1)
    assert off.switches == 3 and off.unmatched == 1
    assert off.folded.splitlines() == ["tpd;[k] io_schedule;[k] __schedule 500000",
                                       "tpd;[k] do_epoll_wait;[k] __schedule 250000"]


def test_pyspy_root_frame_loses_the_command_line_and_idle_is_split():
    raw = ('process 42:"python serve.py --password s3cret";<module> (serve.py:95);handle_write (asynchat.py:194);'
           'os_sendfile (libpython3.11.so.1.0);sendfile64 (libc.so.6) 5\n'
           'process 42:"python serve.py --password s3cret";0x7ff11cc4524a (libc.so.6);poll (pyftpdlib/ioloop.py:548);'
           'epoll_wait (libc.so.6) 7\n')
    busy, idle, n_busy, n_idle = pyspy_stacks(raw, {42: "python3"}, frozenset({"epoll_wait"}))
    assert (n_busy, n_idle) == (5, 7)
    assert "s3cret" not in busy + idle
    assert busy.startswith("python3;<module> (serve.py:95);handle_write (asynchat.py:194)")
    assert idle == "python3;[libc.so.6];poll (pyftpdlib/ioloop.py:548);epoll_wait (libc.so.6) 7\n"


def test_perf_trace_summary_sums_threads():
    text = """
 tpd (100), 10 events, 50.0%

   syscall            calls  errors  total       min       avg       max       stddev
                                     (msec)    (msec)    (msec)    (msec)        (%)
   --------------- --------  ------ -------- --------- --------- ---------     ------
   sendfile             10      2     5.000     0.100     0.500     1.000      5.00%
   epoll_wait            3      0     9.000     1.000     3.000     5.000     10.00%

 tpd (101), 4 events, 50.0%

   syscall            calls  errors  total       min       avg       max       stddev
   --------------- --------  ------ -------- --------- --------- ---------     ------
   sendfile              4      1     1.000     0.100     0.250     0.400      5.00%
"""
    rows = perf_trace_summary(text)
    assert [(r.name, r.count, r.errors) for r in rows] == [("epoll_wait", 3, 0), ("sendfile", 14, 3)]
    assert rows[1].total_s == pytest.approx(0.006)
