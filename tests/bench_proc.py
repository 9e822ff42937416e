#!/usr/bin/env python3
"""bench_proc.py REPEAT STDERR_FILE CMD... — run CMD REPEAT times as its own process (stdout to
/dev/null) and print, for the run that used the least CPU, "wall_s cpu_s maxrss_kib": its wall time,
its CPU time (user + system, its children included, from wait4: microseconds, not clock ticks) and
the peak RSS of its largest process (the kernel's ru_maxrss over the process and the children it
waited for). That run's stderr is left in STDERR_FILE. A failed run prints "fail <its last stderr
line>" and exits 1. Used by tests/bench.sh; asserts nothing."""
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
    os.unlink(scratch)
    print("%.6f %.6f %d" % best)


if __name__ == "__main__":
    main()
