/* send_notice.h: a blocked send's one notice (send_notice.c). Not installed; after
 * internal.h. */
#ifndef MT_SEND_NOTICE_H
#define MT_SEND_NOTICE_H

#include "internal.h"

/* Once per wait (*told, false at its start): on stderr, once a receiver has been
 * disconnected mt_notice_after seconds (counted from `started`, the wait's first slice,
 * at the earliest), what the send of `step` (NULL: "a message") waits for, until when
 * (`deadline`, the send timeout's, < 0: none) and the settings that shorten it, in the
 * Python client's words (send_wait.py SendWait._tell), the C setters named. */
void mt_send_notice(mt_client *c, double started, double deadline, const uint64_t *step,
                    bool *told);

#endif
