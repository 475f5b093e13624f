/* A program with USDT probes, for tests/usdt.rs: `app:tick` fires N times (N is the first argument),
 * with the loop counter and a value on the stack as its arguments; `app:done` once at the end. */
#include <stdlib.h>
#include <sys/sdt.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1;
    volatile long total = 0;
    for (int i = 0; i < n; i++) {
        total += i;
        DTRACE_PROBE2(app, tick, i, total);
    }
    DTRACE_PROBE(app, done);
    return 0;
}
