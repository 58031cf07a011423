/* The wall clock moved by TIMESHIFT_SECONDS seconds for a process and its children
   (LD_PRELOAD; built and used by devtools/timeshift.py, `make test-dates`). Only the wall clock
   moves: the monotonic clock, sleeps and timed waits stay real. */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static long long offset_s(void) {
    static int read_ = 0;
    static long long offset = 0;
    if (!read_) {
        const char *text = getenv("TIMESHIFT_SECONDS");
        offset = text ? atoll(text) : 0;
        read_ = 1;
    }
    return offset;
}

static int moved(clockid_t clock) {
    return clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE || clock == CLOCK_TAI;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(clock, ts);
    if (rc == 0 && ts && moved(clock)) ts->tv_sec += offset_s();
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    static int (*real)(struct timeval *restrict, void *restrict);
    if (!real) real = dlsym(RTLD_NEXT, "gettimeofday");
    int rc = real(tv, tz);
    if (rc == 0 && tv) tv->tv_sec += offset_s();
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}

int timespec_get(struct timespec *ts, int base) {
    if (base != TIME_UTC) return 0;
    return clock_gettime(CLOCK_REALTIME, ts) == 0 ? base : 0;
}
