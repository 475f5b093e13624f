/* The program tests/watchpoints.rs watches. Its memory is a page mapped at 0x10000000.
 *   watched write N   writes 8 bytes there N times, 20 ms apart
 *   watched thread N  a thread it creates does so
 *   watched forever   a thread created at once writes there every 20 ms until killed
 *   watched exec N    calls a function copied there N times, 20 ms apart
 *   watched sleep     re-pins itself to CPU 1 and sleeps 2 ms, over and over (voluntary context switches on CPU 1)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define AT ((void *)0x10000000)

static volatile long *memory;

static void writes(long n) {
  for (long i = 0; i < n; i++) {
    usleep(20000);
    memory[0] = i;
  }
}

static void *writer(void *n) {
  writes((long)n);
  return NULL;
}

static void *forever(void *unused) {
  (void)unused;
  for (;;) writes(1);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  const char *mode = argv[1];
  long n = argc > 2 ? atol(argv[2]) : 1;
  if (!strcmp(mode, "sleep")) {
    for (;;) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(1, &set);
      sched_setaffinity(0, sizeof set, &set);
      usleep(2000);
    }
  }
  int exec = !strcmp(mode, "exec");
  int prot = PROT_READ | PROT_WRITE | (exec ? PROT_EXEC : 0);
  memory = mmap(AT, 4096, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  if (memory == MAP_FAILED) return 1;
  if (exec) {
#if defined(__x86_64__)
    static const unsigned char ret[] = {0xc3};
#elif defined(__aarch64__)
    static const unsigned char ret[] = {0xc0, 0x03, 0x5f, 0xd6};
#endif
    memcpy((void *)memory, ret, sizeof ret);
    __builtin___clear_cache((char *)memory, (char *)memory + sizeof ret);
    for (long i = 0; i < n; i++) {
      usleep(20000);
      ((void (*)(void))AT)();
    }
    return 0;
  }
  pthread_t thread;
  if (!strcmp(mode, "write")) {
    writes(n);
  } else if (!strcmp(mode, "thread")) {
    pthread_create(&thread, NULL, writer, (void *)n);
    pthread_join(thread, NULL);
  } else if (!strcmp(mode, "forever")) {
    pthread_create(&thread, NULL, forever, NULL);
    pthread_join(thread, NULL);
  }
  return 0;
}
