/* follow_send.h: follow_send.c, for follow.c. Not installed; after internal.h. */
#ifndef MT_FOLLOW_SEND_H
#define MT_FOLLOW_SEND_H

#include "internal.h"

/* Replace the transport by one to the receivers of *rv (its contents moved into c), say
 * HELLO, send again the `needed` steps from the window (`sorted`: mt_replay_sorted's),
 * then the open step's fields sent so far (a send that waited followed). *counts (each
 * new receiver's BYE count) is moved into c. MT_OK (or a newer run followed meanwhile),
 * else the error, the client failed. */
mt_status mt_follow_reconnect(mt_client *c, mt_rendezvous *rv, uint64_t **counts,
                              const uint64_t *needed, size_t n_needed,
                              const mt_replay_entry *sorted, size_t n_sorted);

#endif
