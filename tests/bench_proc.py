#!/usr/bin/env python3
"""bench_proc.py REPEAT STDERR_FILE CMD... — run CMD REPEAT times as its own process (stdout to
/dev/null) and print, for the run that used the least CPU, "wall_s cpu_s maxrss_kib": its wall time,
its CPU time (user + system, its children included, from wait4: microseconds, not clock ticks) and
the peak RSS of its largest process. The kernel keeps a process's peak RSS across exec, so a child
forked from this Python process would report at least Python's own size: the peak RSS comes from
one more run under GNU time (/usr/bin/time -f %M, a small process that forks CMD), and where that
is missing from wait4 (then an upper bound: at least this launcher's size). The least-CPU run's
stderr is left in STDERR_FILE. A failed run prints "fail <its last stderr line>" and exits 1. Used
by tests/bench.sh; asserts nothing."""
import os
import shutil
import sys
import time


def main():
    reps, err_path, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    best = None
    scratch = err_path + ".run"
    for _ in range(max(reps, 1)):
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            try:
                out = os.open(os.devnull, os.O_WRONLY)
                err = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(out, 1)
                os.dup2(err, 2)
                os.execvp(cmd[0], cmd)
            finally:
                os._exit(127)
        _, status, ru = os.wait4(pid, 0)
        wall = time.monotonic() - t0
        if status != 0:
            with open(scratch, errors="replace") as f:
                lines = [l.strip() for l in f if l.strip()]
            print("fail " + (lines[-1] if lines else "exit status %d" % status))
            sys.exit(1)
        cpu = ru.ru_utime + ru.ru_stime
        if best is None or cpu < best[1]:
            best = (wall, cpu, ru.ru_maxrss)
            shutil.copyfile(scratch, err_path)
    wall, cpu, rss = best
    gnu_time = "/usr/bin/time"
    if os.access(gnu_time, os.X_OK):
        out = scratch + ".rss"
        pid = os.fork()
        if pid == 0:
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 1)
                os.dup2(null, 2)
                os.execv(gnu_time, [gnu_time, "-f", "%M", "-o", out] + cmd)
            finally:
                os._exit(127)
        _, status, _ = os.wait4(pid, 0)
        try:
            with open(out) as f:
                rss = int(f.read().split()[-1])
            os.unlink(out)
        except (OSError, ValueError, IndexError):
            pass
    os.unlink(scratch)
    print("%.6f %.6f %d" % (wall, cpu, rss))


if __name__ == "__main__":
    main()
