/* `app:guarded`: a probe behind a semaphore, as `dtrace -h` headers write it. The program only reaches
 * the probe (and returns 1) while a tracer has counted the semaphore up. */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

__extension__ volatile unsigned short app_guarded_semaphore __attribute__((unused))
__attribute__((section(".probes")));

int guarded(int i) {
    if (__builtin_expect(app_guarded_semaphore, 0)) {
        DTRACE_PROBE1(app, guarded, i * 10);
        return 1;
    }
    return 0;
}
