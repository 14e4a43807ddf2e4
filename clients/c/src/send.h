/* send.h: the send path: the batches (outbox.c), the step set, the handshake monitors
 * (handshake.c), the sends (send.c) and the waits for the arrays ZeroMQ holds
 * (send_held.c), a blocked send's slices (send_wait.c). Not installed; internal.h, which
 * every source includes, includes it at its end, after the types it uses. */
#ifndef MT_SEND_H
#define MT_SEND_H

#include "internal.h"

/* outbox.c */
mt_status mt_outbox_init(mt_client *c);
void mt_outbox_free(mt_client *c);
mt_status mt_outbox_append(mt_client *c, size_t field, const void *data);
bool mt_outbox_due(const mt_client *c, size_t index, double now);
/* Send group `index` as one message (mu held); flags 0 or ZMQ_DONTWAIT. Returns 0, or
 * the errno of the failed send (EAGAIN: nothing sent, the group intact). */
int mt_outbox_send(mt_client *c, size_t index, int flags);
mt_status mt_outbox_start_flusher(mt_client *c);
void mt_outbox_stop_flusher(mt_client *c);

/* steps (in outbox.c) */
int mt_stepset_add(mt_stepset *s, uint64_t v); /* 1 new, 0 present, -1 no memory */
void mt_stepset_free(mt_stepset *s);
/* The least and greatest of the steps of `s` that receiver `rank` of `world` gets
 * (mt_receiver_of with `routing`); false if none (StepSet.span: what a close compares
 * with a stop record's first and last step held, stop_record.c). O(steps). */
bool mt_stepset_span(const mt_stepset *s, uint64_t simulation_id, size_t rank, size_t world,
                     bool routing, uint64_t *first, uint64_t *last);

/* handshake.c */
/* Seconds from which a handshake failure without detail of socket s may be
 * libzmq's timeout (ZMQ_HANDSHAKE_IVL: a silent peer), not a refusal (client/handshake.py
 * timeout_bound: 2 s, or half the interval when less; 0: none) */
double mt_timeout_bound(void *s);
/* The ZMQ_CONNECT_TIMEOUT (ms) of a data socket (client/sockets.py
 * connect_timeout_ms): the disconnected timeout, at least 2 s; 0 (the kernel's) for none
 * (< 0). A connect to a host that never answers is then abandoned (CONNECT_RETRIED: down,
 * since the socket connected) instead of lasting the kernel's ~127 s in progress. */
int mt_connect_timeout_ms(double disconnected_timeout);
/* Monitor socket i's handshakes (before it connects: none is missed). */
mt_status mt_handshake_watch(mt_client *c, size_t i);
/* MT_EENV, naming the endpoint and the fix, if socket i's receiver refused its handshake
 * (events read without blocking); MT_OK otherwise. */
mt_status mt_handshake_check(mt_client *c, size_t i);
/* Wait until every receiver accepted the handshake (MT_OK), one refused it (MT_EENV, the
 * message set), or the deadline (< 0: none) passed (MT_ETIMEDOUT, no message set); with
 * `down_ends` (a close without BYE, close_failed.c), also once one is down (MT_ETIMEDOUT,
 * no message set: its caller says why, as the Python Handshakes.wait's down_ends). */
mt_status mt_handshake_wait(mt_client *c, double deadline, bool down_ends);
/* Since when socket i's receiver has been down (events read without blocking), or < 0
 * while it is connected or not known down. */
double mt_handshake_down_since(mt_client *c, size_t i);
/* Into `out` (`size` > 0 bytes), for the messages of a close or send that gave up: "no
 * receiver ever accepted a connection at E1, E2: check the endpoint (...) or start the
 * trainer first" for the sockets no connection of which was ever accepted (events read
 * without blocking: a wrong endpoint, or a trainer not started), else "". */
void mt_handshake_never(mt_client *c, char *out, size_t size);
/* Whether `h`'s peer is known not to be a receiver (TCP accepted a while ago, no
 * handshake: what mt_handshake_never says of it), as the events read last say. */
bool mt_handshake_not_receiver(const mt_handshake *h);
/* What such a peer is (client/handshake.py NOT_RECEIVER, word for word). */
#define NOT_RECEIVER                                                                       \
    "not a melissa-trainer receiver (it accepted a TCP connection but no ZeroMQ handshake "  \
    "completed): check the endpoint (the trainer's rank_N.json); unless it is a trainer "    \
    "whose process is stopped (SIGSTOP, a suspended job), which answers once continued"
/* Stop the monitors and close their sockets (before the data sockets, and the context). */
void mt_handshake_release(mt_client *c);

/* send_held.c */
mt_status mt_arm(mt_client *c, void *sock, double deadline);
/* Whole milliseconds in `seconds` for ZeroMQ's int options and waits (SNDTIMEO, LINGER,
 * zmq_poll): 0 if <= 0, at most INT_MAX (24.8 days; a cast past it is undefined, in
 * practice INT_MIN: "forever"). A longer bound is capped there: a send or close blocked
 * that long fails then (a poll loop, which looks at its deadline again, is exact). */
int mt_ms(double seconds);
/* Wait until ZeroMQ holds none of this client's arrays (MT_OK) or the deadline (< 0:
 * none) passed (MT_ETIMEDOUT). mt_held_none: whether it holds none now (no wait). */
mt_status mt_wait_held(mt_client *c, double deadline);
bool mt_held_none(mt_client *c);
#ifdef MT_TESTING
extern _Atomic unsigned mt_testing_held_waits; /* condition waits of mt_wait_held */
#endif
/* send_words.c. A failed send (errno `err` of sending `what`): the client is for
 * mt_client_abort only from now on. EAGAIN (the send timeout passed): MT_EENV if a
 * receiver refused the handshake, else MT_ETIMEDOUT saying what the monitors know, and
 * back-pressure only when they know nothing else; another errno: MT_EZMQ. */
mt_status mt_send_fail(mt_client *c, int err, const char *what);

/* send_wait.c. One try of a send on a socket (c->mu held): 0, or the errno (EAGAIN:
 * nothing sent, the try can be repeated). mt_send_sliced: try_(c, arg), socket `index`
 * armed for a slice, until done: MT_OK (sent; or a restarted trainer was followed
 * meanwhile, c->followed changed, which sent what this send carried), or the error, the
 * client failed (the send timeout passed, a handshake refused, a receiver disconnected
 * for the disconnected timeout, ZeroMQ). `step`: for messages (NULL: "a message"). */
typedef int (*mt_try)(mt_client *c, void *arg);
mt_status mt_send_sliced(mt_client *c, size_t index, double deadline, mt_try try_, void *arg,
                         const uint64_t *step);
/* mt_wait_held in slices, as mt_send_sliced waits. */
mt_status mt_wait_sent(mt_client *c, double deadline, const uint64_t *step);
/* A send of `step` whose queue is not full (mt_send, as it opens a step at `now`): at most
 * once a slice, while a receiver is disconnected, every receiver's stop record (read
 * again only once its file changed: c->stop_looks), as a blocked send reads them; the
 * blocked send's error, "(the send gave up before it blocked: no trainer comes back
 * there)", if one says the trainer stopped for good; else MT_OK (client/send_wait.py
 * SendWait.look). */
mt_status mt_send_stop_look(mt_client *c, const uint64_t *step, double now);

#endif
