/* errors.h: the errors, dtypes, clock and waits of errors.c. Not installed;
 * internal.h, which every source includes, includes it at its end, after the types it
 * uses. */
#ifndef MT_ERRORS_H
#define MT_ERRORS_H

#include "internal.h"

/* errors.c */
mt_status mt_fail(mt_client *c, mt_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mt_clear_error(mt_client *c); /* (and frees the message) */
size_t mt_itemsize(mt_dtype dtype);
const char *mt_dtype_name(mt_dtype dtype);
const char *mt_dtype_str(mt_dtype dtype);
/* The enumerator's name ("MT_FLOAT32"): the fix a wrong dtype's message names. */
const char *mt_dtype_constant(mt_dtype dtype);
double mt_now(void); /* monotonic seconds */
#ifdef MT_TESTING
void mt_testing_advance_clock(double seconds); /* (tests only: see errors.c) */
#endif
/* pthread_cond_timedwait on `cv` (made on CLOCK_MONOTONIC: mt_init_sync) until `deadline`,
 * a time of mt_now(): its result (ETIMEDOUT once the deadline passed). Under MT_TESTING, a
 * clock moved before or during the wait is honoured (errors.c: it may return 0 early,
 * as a spurious wake-up: the caller's loop looks again); else one call, as before. */
int mt_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double deadline);

#endif
