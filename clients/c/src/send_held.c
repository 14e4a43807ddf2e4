/* send_held.c: what the sends share: a socket's send timeout armed for a deadline
 * (mt_arm, mt_ms), the marks (MT_MARK_EVERY's rule: mt_mark_due, mt_mark_sent) and the
 * waits for the arrays ZeroMQ still reads (mt_wait_held, mt_held_none); the sends
 * themselves: send.c. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <zmq.h>

#include "internal.h"

mt_status mt_arm(mt_client *c, void *sock, double deadline) {
    /* (-1: no deadline; its failure is reported as a deadline's is, never left to a
     * send that would keep the previous timeout) */
    int ms = deadline < 0 ? -1 : mt_ms(deadline - mt_now());
    if (zmq_setsockopt(sock, ZMQ_SNDTIMEO, &ms, sizeof ms) != 0)
        return mt_fail(c, MT_EZMQ, "zmq_setsockopt(ZMQ_SNDTIMEO): %s", zmq_strerror(errno));
    return MT_OK;
}

int mt_ms(double seconds) {
    double ms = seconds * 1000;
    return ms > 0 ? ms < (double)INT_MAX ? (int)ms : INT_MAX : 0; /* (NaN: 0) */
}

bool mt_mark_due(const mt_marks *m) {
    return m->messages >= MT_MARK_MOST ||
           (m->messages >= MT_MARK_EVERY && m->bytes >= MT_MARK_BYTES);
}

void mt_mark_sent(mt_marks *m, bool mark, size_t bytes) {
    if (mark) {
        m->messages = 1;
        m->bytes = bytes;
    } else {
        ++m->messages;
        m->bytes += bytes;
    }
}

#ifdef MT_TESTING
_Atomic unsigned mt_testing_held_waits = 0;
#endif

bool mt_held_none(mt_client *c) {
    if (!c->held_init) return true;
    pthread_mutex_lock(&c->held_mu);
    bool none = c->pending == 0;
    pthread_mutex_unlock(&c->held_mu);
    return none;
}

mt_status mt_wait_held(mt_client *c, double deadline) {
    if (!c->held_init) return MT_OK;
    pthread_mutex_lock(&c->held_mu);
    int rc = 0;
    while (c->pending > 0 && rc != ETIMEDOUT) {
#ifdef MT_TESTING
        ++mt_testing_held_waits;
#endif
        if (deadline < 0) {
            pthread_cond_wait(&c->held_cv, &c->held_mu);
        } else {
            rc = mt_cond_wait_until(&c->held_cv, &c->held_mu, deadline);
        }
    }
    bool done = c->pending == 0;
    pthread_mutex_unlock(&c->held_mu);
    return done ? MT_OK : MT_ETIMEDOUT;
}
