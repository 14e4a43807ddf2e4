/* admission_watch.h: admission_watch.c's watch of a running admission. Not installed;
 * internal.h, which every source includes, includes it at its end, after the types it
 * uses. */
#ifndef MT_ADMISSION_WATCH_H
#define MT_ADMISSION_WATCH_H

#include "internal.h"

/* admission_watch.c: started once the HELLO left (where the close would ask); polled by
 * mt_send at a step's opening once watch.due (never blocks: MT_ESIMREFUSED on a trusted
 * refusal); released with the transport (before zmq_ctx_term). describes: whether a
 * receiver's refusal `reason` is one this client's HELLO gets (admission_watch.py). */
void mt_admission_watch_start(mt_client *c);
mt_status mt_admission_watch_poll(mt_client *c, double now);
void mt_admission_watch_release(mt_client *c);
bool mt_admission_describes(const mt_client *c, const char *reason);

#endif
