/* close_failed.c: what a close without BYE (a time step left incomplete, MT_EFIELD: the
 * run did not finish) does not wait for, as the Python client's close after a failure,
 * close(bye=False) (melissa_trainer/client/patience.py CloseWait.not_connected and
 * _no_receiver, in its words): a receiver disconnected, or never connected once its
 * connect failed, and a peer that is not a receiver (TCP accepted, no ZeroMQ handshake).
 * Safe as there: no BYE is sent, so the trainer does not take the simulation for
 * complete; it is run again and sends every step again, the receivers keep one copy of
 * each. Before, such a close waited the whole close timeout (or the disconnected
 * timeout) for a receiver that could take nothing (tests/c/test_c_close_without_bye.py).
 * A receiver connected but slow is waited for at most failed_close_timeout in all
 * (mt_close_bound), as the Python close(bye=False): before, only the close timeout (1800 s
 * by default) bounded it (tests/c/test_c_failed_close_timeout.py).
 * Not thread-safe: the closing thread. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "close_wait.h"

/* (patience.py _NO_WAIT, word for word) */
#define NO_WAIT "a close after a failure does not wait for a disconnected receiver"

const char *mt_gone_cause(const mt_client *c, size_t i) {
    if (c->handshakes == NULL || c->handshakes[i].zmtp) return "the trainer died, or its node";
    return "the peer closed the connection before any ZeroMQ handshake completed: a trainer "
           "that died as it started, or a program that is not a receiver (check the "
           "endpoint: the trainer's rank_N.json)";
}

mt_status mt_close_unwaited(mt_client *c, const char *whose, const char *what) {
    char never[600];
    for (size_t i = 0; c->handshakes != NULL && i < c->n_endpoints; ++i) {
        double since = mt_handshake_down_since(c, i); /* (reads its monitor's events) */
        if (since < 0) continue;
        double now = mt_now();
        mt_handshake_never(c, never, sizeof never);
        if (!c->handshakes[i].ever) /* (nothing died: no connection was ever made) */
            return mt_fail(c, MT_ETIMEDOUT, "%s: %s not delivered to %s: the receiver is "
                                            "unreachable, tried for %.0f s (%s): %s",
                           whose, what, c->endpoints[i], now - since, NO_WAIT, never);
        char cause[MT_CAUSE_SIZE]; /* (preempted, its record says? else mt_gone_cause) */
        snprintf(cause, sizeof cause, "%s", mt_gone_cause(c, i));
        mt_stop_preempted_words(c, cause, sizeof cause);
        return mt_fail(c, MT_ETIMEDOUT, "%s: %s not delivered to %s: the receiver is "
                                        "unreachable, disconnected for %.0f s without a new "
                                        "connection (%s; %s)%s%s",
                       whose, what, c->endpoints[i], now - since, NO_WAIT, cause,
                       never[0] ? "; " : "", never);
    }
    for (size_t i = 0; c->handshakes != NULL && i < c->n_endpoints; ++i) {
        if (c->handshakes[i].monitor == NULL || !mt_handshake_not_receiver(&c->handshakes[i]))
            continue;
        return mt_fail(c, MT_ETIMEDOUT, "%s: %s not delivered to %s: %s; a close after a "
                                        "failure does not wait for it",
                       whose, what, c->endpoints[i], NOT_RECEIVER);
    }
    return MT_OK;
}

double mt_close_bound(const mt_client *c, bool bye, const char **setting) {
    double close = c->close_timeout, failed = c->failed_close_timeout;
    *setting = "close_timeout";
    /* (the lower bound is the one that ends the wait, the one the message names:
     * closing.py's rule) */
    if (!bye && failed >= 0 && (close < 0 || failed < close)) {
        *setting = "failed_close_timeout";
        return failed;
    }
    return close;
}

const char *mt_close_bound_how(const char *setting) {
    if (strcmp(setting, "failed_close_timeout") != 0) return "";
    return " (the bound of a close without BYE, not close_timeout: "
           "mt_set_failed_close_timeout sets it; < 0 leaves only close_timeout)";
}

mt_status mt_close_also(mt_client *c, mt_status first, const char *said, mt_status then) {
    if (then == MT_OK || said == NULL) return first;
    char *more = strdup(mt_client_error(c));
    if (more == NULL) return first;
    mt_fail(c, first, "%s; and %s", said, more);
    free(more);
    return first;
}
