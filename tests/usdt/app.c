/* A program with USDT probes, for tests/usdt.rs: `app:tick` fires N times (N is the first argument) with
 * arguments of each kind the compiler describes (a register, the stack, a constant, signed and
 * unsigned values of several sizes); `app:guarded` (guarded.c) fires only while a tracer holds its
 * semaphore; `app:done` once at the end. */
#include <stdlib.h>
#include <sys/sdt.h>

int guarded(int i);

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1;
    volatile long total = 0;
    int enabled = 0;
    for (int i = 0; i < n; i++) {
        total += i;
        signed char small = (signed char)(-i - 1);
        unsigned short wide = (unsigned short)(60000 + i);
        DTRACE_PROBE5(app, tick, i, total, -3 * i, small, wide);
        DTRACE_PROBE2(app, constant, 5, -7);
        enabled += guarded(i);
    }
    DTRACE_PROBE1(app, done, enabled);
    return 0;
}
