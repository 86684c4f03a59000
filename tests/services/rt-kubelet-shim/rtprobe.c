/* rtprobe: a static program run inside test containers (no libc beyond glibc's static one).
 *   rtprobe fifo        try SCHED_FIFO priority 10: prints "fifo ok" (exit 0) or
 *                       "fifo refused: <errno text>" (exit 1)
 *   rtprobe burn <ms>   SCHED_FIFO busy loop for <ms> of wall time; prints
 *                       "burn <cpu fraction>" (CPU time of this thread / wall time)
 *   rtprobe hog <s>     SCHED_OTHER busy loop for <s> seconds (a CPU hog)
 *   rtprobe periodic <C_us> <T_us> <n> <prio>
 *                       a periodic task: every T_us, C_us of CPU work; prints one line per
 *                       job "job <T_us> <i> <response_us>" and finally "misses <T_us> <count>"
 *                       (response > T). prio 0: SCHED_OTHER, else SCHED_FIFO at that priority. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long long nowNs(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int fifoAt(int prio) {
  struct sched_param p = {.sched_priority = prio};
  return sched_setscheduler(0, SCHED_FIFO, &p);
}

static int fifo(void) { return fifoAt(10); }

static void work(long long cpuNs) {
  const long long end = nowNs(CLOCK_THREAD_CPUTIME_ID) + cpuNs;
  while (nowNs(CLOCK_THREAD_CPUTIME_ID) < end) {
  }
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "fifo") == 0) {
    if (fifo() != 0) {
      printf("fifo refused: %s\n", strerror(errno));
      return 1;
    }
    printf("fifo ok\n");
    return 0;
  }
  if (argc >= 3 && strcmp(argv[1], "burn") == 0) {
    if (fifo() != 0) {
      printf("fifo refused: %s\n", strerror(errno));
      return 1;
    }
    const long long wall0 = nowNs(CLOCK_MONOTONIC), cpu0 = nowNs(CLOCK_THREAD_CPUTIME_ID);
    const long long end = wall0 + atoll(argv[2]) * 1000000LL;
    while (nowNs(CLOCK_MONOTONIC) < end) {
    }
    const double frac = (double)(nowNs(CLOCK_THREAD_CPUTIME_ID) - cpu0) / (double)(nowNs(CLOCK_MONOTONIC) - wall0);
    printf("burn %.4f\n", frac);
    return 0;
  }
  if (argc >= 3 && strcmp(argv[1], "hog") == 0) {
    const long long end = nowNs(CLOCK_MONOTONIC) + atoll(argv[2]) * 1000000000LL;
    while (nowNs(CLOCK_MONOTONIC) < end) {
    }
    return 0;
  }
  if (argc >= 6 && strcmp(argv[1], "periodic") == 0) {
    const long long c = atoll(argv[2]) * 1000LL, t = atoll(argv[3]) * 1000LL;
    const int n = atoi(argv[4]);
    if (atoi(argv[5]) != 0 && fifoAt(atoi(argv[5])) != 0) {
      printf("fifo refused: %s\n", strerror(errno));
      return 1;
    }
    long long release = nowNs(CLOCK_MONOTONIC) + t;
    int misses = 0;
    /* Responses are kept and printed at the end, one write per line: several probes share the
     * output pipe, and nothing is written while the task set runs. */
    long long* responses = calloc((size_t)(n > 0 ? n : 1), sizeof(long long));
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 0; i < n; ++i) {
      struct timespec ts = {.tv_sec = release / 1000000000LL, .tv_nsec = release % 1000000000LL};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
      }
      work(c);
      const long long resp = nowNs(CLOCK_MONOTONIC) - release;
      if (resp > t) {
        ++misses;
      }
      responses[i] = resp / 1000;
      release += t;
    }
    for (int i = 0; i < n; ++i) {
      printf("job %lld %d %lld\n", t / 1000, i, responses[i]);
    }
    free(responses);
    printf("misses %lld %d\n", t / 1000, misses);
    return 0;
  }
  fprintf(stderr, "usage: rtprobe fifo | burn <ms> | hog <s> | periodic <C_us> <T_us> <n> <prio>\n");
  return 2;
}
