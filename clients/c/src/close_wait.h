/* close_wait.h: the close's delivery of what is left (close_wait.c). Not installed; after
 * internal.h. */
#ifndef MT_CLOSE_WAIT_H
#define MT_CLOSE_WAIT_H

#include "internal.h"

/* Send the batches and (with `bye`) each receiver's BYE, wait until ZeroMQ let go of
 * every array and BYE and every receiver accepted the handshake, in slices, by *deadline
 * (< 0: none), which each progress puts c->close_timeout from then (close_wait.c); on
 * return, *deadline is where it ended. MT_OK with *failure NULL: delivered; MT_OK with
 * *failure "batched data", "BYE" or "queued messages": the deadline passed there (the
 * caller's message; *stuck: every receiver connected, its handshake done, none reading,
 * said in the receipt's words, mt_close_no_progress); else the
 * error, its message set, *failure "" (nothing more is waited for): a refused handshake
 * (MT_EENV), a stop record that ends the close (MT_ETIMEDOUT, MT_ESIMREFUSED), a restarted
 * trainer or a receiver gone (MT_ETIMEDOUT, c->receipt_restart 1 or 2: follow.c follows a
 * new run with a window), ZeroMQ's. */
mt_status mt_close_deliver(mt_client *c, bool bye, double *deadline, const char **failure,
                           bool *stuck, bool *capped);

/* close_cap.c: the close's cap in all, both phases (delivery.py capped_deadline). The
 * mt_now() past which no deadline goes: c->close_began plus MT_CLOSE_CAP_FACTOR close
 * timeouts (< 0: none, a close timeout of forever). */
double mt_close_cap(const mt_client *c);
/* The deadline once a progress would put it at `until`: never earlier than `deadline`,
 * never past `cap` (< 0: none); *capped: the cap held it back (say mt_close_capped_words). */
double mt_close_capped(double deadline, double until, double cap, bool *capped);
/* delivery.py capped_words ("close_timeout", mt_set_close_timeout), word for word. */
void mt_close_capped_words(char *out, size_t size, uint64_t simulation_id);
/* What a close's waiting notice names as its bound once the cap holds the deadline back:
 * "SETTER=T s, 10 times it in all: the close's cap" (delivery.py cap_bound, word for
 * word; `setter` "mt_set_close_timeout"). */
void mt_close_cap_bound(char *out, size_t size, const char *setter, double timeout);

#endif
