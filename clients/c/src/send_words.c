/* send_words.c: what a failed send says (mt_send_fail), and so the client is for
 * mt_client_abort only from then on.
 *
 * A send that the send timeout ended (EAGAIN) says what the sockets' monitors know
 * (handshake.c), in the words of the Python client's (client/send_wait.py
 * SendWait.timeout; client/handshake.py never_note, pending_note, down_note) and of this
 * client's close (close_wait.c): a receiver that refused the handshake (MT_EENV, naming
 * the key to check); no connection ever accepted, or a peer that is not a receiver
 * (check the endpoint: mt_handshake_never); a peer connected at the TCP level whose
 * handshake has not come yet (sooner than handshake.c decides it is not a receiver: a
 * send timeout shorter than that); a receiver once connected, disconnected for N s (the
 * trainer died or was restarted: run the simulation again; "the trainer was preempted
 * (MESSAGE; its stop record in DIR)" instead when a stop record says so,
 * mt_stop_preempted_words); and back-pressure only when
 * none of these is known: every receiver connected past its handshake, the one cause
 * left. It said "(back-pressure)" in all these cases before. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <zmq.h>

#include "internal.h"

/* Into `b`, joined by "; ", what the monitors know of receivers that are not taking
 * messages (module comment; events read without blocking); whether one is disconnected
 * (the sentence then ends with what to do). Nothing: none is known. */
static bool known(mt_client *c, mt_buf *b) {
    char never[600];
    mt_handshake_never(c, never, sizeof never); /* (reads every socket's events first) */
    mt_buf_printf(b, "%s", never);
    double now = mt_now();
    for (size_t i = 0; c->handshakes != NULL && i < c->n_endpoints; ++i) {
        const mt_handshake *h = &c->handshakes[i];
        if (h->monitor == NULL || h->zmtp || h->tcp_at <= 0 || h->down ||
            mt_handshake_not_receiver(h))
            continue;
        mt_buf_printf(b, "%s%s is connected at the TCP level, but no ZeroMQ handshake "
                         "completed yet (%.1f s after its connection was seen; a receiver's "
                         "completes in milliseconds): if this persists, it is not a trainer's "
                         "receiver: check the endpoint (the trainer's rank_N.json)",
                      b->len ? "; " : "", c->endpoints[i], now - h->tcp_at);
    }
    bool down = false;
    char cause[MT_CAUSE_SIZE] = ""; /* (a preempted trainer's stop record, read once: not "died") */
    for (size_t i = 0; c->handshakes != NULL && i < c->n_endpoints; ++i) {
        const mt_handshake *h = &c->handshakes[i];
        /* (once connected, and a receiver: never_note speaks of the others) */
        if (h->monitor == NULL || !h->ever || mt_handshake_not_receiver(h)) continue;
        double since = mt_handshake_down_since(c, i);
        if (since < 0) continue;
        if (!cause[0] && !mt_stop_preempted_words(c, cause, sizeof cause))
            snprintf(cause, sizeof cause, "the trainer died or was restarted, or its node");
        mt_buf_printf(b, "%sthe trainer's receiver at %s is disconnected for %.0f s without a "
                         "new connection (%s)",
                      b->len ? "; " : "", c->endpoints[i], now - since, cause);
        down = true;
    }
    return down;
}

mt_status mt_send_fail(mt_client *c, int err, const char *what) {
    c->failed = true;
    if (err != EAGAIN)
        return mt_fail(c, MT_EZMQ, "simulation %llu rank %d: sending %s failed: %s",
                       (unsigned long long)c->simulation_id, c->rank, what, zmq_strerror(err));
    /* (a receiver that refused the handshake never reads: that, not back-pressure) */
    for (size_t i = 0; i < c->n_endpoints; ++i)
        if (mt_handshake_check(c, i) != MT_OK) return MT_EENV;
    char t[32];
    mt_format_double(c->send_timeout, t);
    mt_buf b = {0};
    bool down = known(c, &b);
    if (b.oom) { /* (the message without what the monitors know) */
        free(b.data);
        b = (mt_buf){0};
    }
    char fix[256] = "; close the client with mt_client_abort";
    if (down) /* (what to do: send_wait.c's words for a receiver gone) */
        snprintf(fix, sizeof fix, ". Close the client with mt_client_abort and run this "
                                  "simulation again, with the same simulation id "
                                  "(MELISSA_TRAINER_SIMULATION_ID=%llu), once a trainer runs "
                                  "there again", (unsigned long long)c->simulation_id);
    mt_status st = mt_fail(
        c, MT_ETIMEDOUT, "simulation %llu rank %d: could not send %s within send_timeout=%s s: "
                         "%s%s",
        (unsigned long long)c->simulation_id, c->rank, what, t,
        b.len ? b.data : "the trainer is not receiving (back-pressure)", fix);
    free(b.data);
    return st;
}
