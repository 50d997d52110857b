"""Folding the profilers' output (runner.metrics.profile_fold), on text in the tools' own
formats (``perf script -F comm,tid,time,event,trace,ip,sym,dso`` of perf 6.1, py-spy 0.4's
raw format, ``raw_syscalls`` samples), with the expected sums worked out by hand."""
from __future__ import annotations

import pytest

from runner.metrics.profile_fold import (
    off_cpu_stacks,
    on_cpu_stacks,
    parse_perf_script,
    pyspy_stacks,
    raw_syscalls,
    syscall_names,
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


def test_pyspy_without_native_frames_counts_the_event_loops_wait_as_idle():
    """A container's server (py-spy without --native): the leaf is the Python function that
    calls epoll; only a sample ending there is waiting, one going deeper is running."""
    from runner.metrics.profile import PY_IDLE_LEAVES, PY_WAIT_FRAMES

    root = 'process 7:"python serve.py";<module> (serve.py:95);FTPServer.serve_forever (pyftpdlib/servers.py:254)'
    raw = (f"{root};_BasePollEpoll.poll (pyftpdlib/ioloop.py:548) 67\n"
           f"{root};_BasePollEpoll.poll (pyftpdlib/ioloop.py:563);write (asyncore.py:96);"
           "DTPHandler.initiate_sendfile (pyftpdlib/handlers/ftp/data.py:157) 214\n"
           'process 8:"twistd";EPollReactor.doPoll (twisted/internet/epollreactor.py:214) 3\n')
    busy, idle, n_busy, n_idle = pyspy_stacks(raw, {7: "python3"}, PY_IDLE_LEAVES | PY_WAIT_FRAMES)
    assert (n_busy, n_idle) == (214, 70)
    assert busy.endswith("DTPHandler.initiate_sendfile (pyftpdlib/handlers/ftp/data.py:157) 214\n")


def test_raw_syscalls_pair_enter_and_exit_per_thread():
    text = "".join(f"{'tpd':>8} {tid:5} {t:10.6f}: raw_syscalls:{ev}: {rest} ffffffff81417d70 x ([kernel.kallsyms])\n"
                   for tid, t, ev, rest in [
                       (1, 1.000, "sys_exit", "NR 40 = 5"),  # entered before the recording: no call
                       (1, 1.001, "sys_enter", "NR 40 (5, 7, 0, 400000, 0, 0)"),
                       (2, 1.002, "sys_enter", "NR 232 (4, 7ff, 64, 0, 0, 0)"),
                       (1, 1.004, "sys_exit", "NR 40 = -11"),
                       (1, 1.005, "sys_enter", "NR 40 (5, 7, 0, 400000, 0, 0)"),
                       (1, 1.006, "sys_exit", "NR 40 = 4194304"),
                       (2, 1.012, "sys_exit", "NR 232 = 1"),
                       (2, 1.013, "sys_enter", "NR 999 (0)")])
    rows = raw_syscalls(parse_perf_script(text), {40: "sendfile", 232: "epoll_wait"})
    got = {r.name: (r.count, r.errors, round(r.total_s, 6)) for r in rows}
    assert got == {"epoll_wait": (1, 0, 0.01), "sendfile": (2, 1, 0.004), "nr_999": (1, 0, 0.0)}
    assert [r.name for r in rows] == ["epoll_wait", "sendfile", "nr_999"]


def test_syscall_names_from_the_kernel_header():
    names = syscall_names()
    if not names:
        pytest.skip("/usr/include/x86_64-linux-gnu/asm/unistd_64.h missing: apt-get install linux-libc-dev")
    assert names[40] == "sendfile" and names[0] == "read" and names[232] == "epoll_wait"


def test_profile_travels_as_json_and_bad_fields_are_named():
    """``xferlab serve`` sends a cell's profile as JSON: the round trip keeps every field,
    and a field missing, of the wrong type or unknown is refused by name."""
    import json

    import pytest

    from runner.metrics.profile_data import ServerProfile, SyscallRow, profile_from_dict, profile_to_dict

    p = ServerProfile("perf", "perf version 6.1", 99, 3.2, "tpd;main;[k] do_sendfile 7\n", "tpd;[k] schedule 900",
                      0.0707, 1.5, (SyscallRow("sendfile", 300, 0.05, 0), SyscallRow("epoll_wait", 310, None, None)),
                      ("a note",))
    assert profile_from_dict(json.loads(json.dumps(profile_to_dict(p)))) == p
    d = profile_to_dict(p)
    for change, name in ((lambda x: x.pop("on_cpu"), "'on_cpu' missing"),
                         (lambda x: x.update(rate_hz="99"), "'rate_hz' is str"),
                         (lambda x: x.update(rate_hz=True), "'rate_hz' is bool"),
                         (lambda x: x.update(extra=1), "unknown field"),
                         (lambda x: x["syscalls"].append({"name": "read"}), r"syscalls\[2\]")):
        bad = json.loads(json.dumps(d))
        change(bad)
        with pytest.raises(ValueError, match=name):
            profile_from_dict(bad)
