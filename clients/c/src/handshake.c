/* handshake.c: whether each receiver accepted the data socket's handshake (CURVE keys).
 *
 * ZeroMQ reports a refused handshake only to a socket monitor: with a key the receiver
 * does not hold it reconnects for ever (each attempt closed by the server during the
 * handshake, HANDSHAKE_FAILED_NO_DETAIL), and with a key for a receiver without CURVE
 * (or none for one with it) it gives the connection up (HANDSHAKE_FAILED_PROTOCOL) and
 * drops what was queued, so that the close used to return MT_OK with nothing delivered.
 * Each data socket gets a monitor at start; the close waits for every receiver's
 * handshake before it lingers, and a refused one is MT_EENV, naming the endpoint and
 * the fix. As the Python client's serving socket (client/predict_link.py): a failure without
 * detail counts as a refusal when it comes twice in a row (once may be a receiver that
 * stopped mid-handshake). Not one that may end a connection mt_timeout_bound old or more
 * (NOT_ZMQ_AFTER_S, or half a shorter ZMQ_HANDSHAKE_IVL):
 * libzmq ends a handshake its peer never answers (ZMQ_HANDSHAKE_IVL, 30 s) so too, and a
 * silent peer, or a receiver whose trainer is stopped (SIGSTOP), is not a refused key
 * (NOT_RECEIVER and the waits apply). Events carry no time and may be read late: a
 * connection began after the last read that found the monitor empty before its
 * CONNECTED, and each failure let off puts later events the bound later, so that at
 * most one per bound is let off: a key refused at each reconnection (100 ms)
 * still is (the limits: client/handshake.py's module docstring). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "internal.h"

/* seconds a TCP connection may go without a completed handshake before its peer counts
 * as NOT_RECEIVER (a receiver's libzmq I/O thread answers in milliseconds); and the most
 * of mt_timeout_bound */
#define NOT_ZMQ_AFTER_S 2.0
/* a silent peer's silence (s) at which warn says it again, then at each doubling
 * (client/handshake_timing.py REPEAT_AFTER) */
#define REPEAT_AFTER_S 15.0

double mt_timeout_bound(void *s) {
    int ivl = 0;
    size_t size = sizeof ivl;
    if (s == NULL || zmq_getsockopt(s, ZMQ_HANDSHAKE_IVL, &ivl, &size) != 0 || ivl <= 0)
        return NOT_ZMQ_AFTER_S;
    return ivl / 2000.0 < NOT_ZMQ_AFTER_S ? ivl / 2000.0 : NOT_ZMQ_AFTER_S;
}

/* The least ZMQ_CONNECT_TIMEOUT (s) of a data socket: a SYN dropped by a receiver whose
 * accept queue overflowed is retried after 1 s (client/sockets.py CONNECT_TIMEOUT_FLOOR) */
#define CONNECT_TIMEOUT_FLOOR_S 2.0

int mt_connect_timeout_ms(double disconnected_timeout) {
    if (disconnected_timeout < 0) return 0; /* (no bound: the kernel's, ~127 s on Linux) */
    double s = disconnected_timeout > CONNECT_TIMEOUT_FLOOR_S ? disconnected_timeout
                                                              : CONNECT_TIMEOUT_FLOOR_S;
    return s * 1000 >= 2147483647.0 ? 2147483647 : (int)(s * 1000);
}

/* (and whether the connection is up: a blocked send gives up on a receiver down for the
 * disconnected timeout, send_wait.c; CONNECT_RETRIED: an attempt that failed) */
#define WATCHED                                                                           \
    (ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |               \
     ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |              \
     ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CONNECT_RETRIED)

mt_status mt_handshake_watch(mt_client *c, size_t i) {
    if (c->handshakes == NULL) {
        c->handshakes = calloc(c->n_endpoints, sizeof *c->handshakes);
        if (c->handshakes == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    }
    mt_handshake *h = &c->handshakes[i];
    h->drained = h->watched = mt_now();
    h->opened = -1.0;
    h->bound = NOT_ZMQ_AFTER_S;
    char address[64];
    snprintf(address, sizeof address, "inproc://mt-handshake-%p-%zu", (void *)c, i);
    if (zmq_socket_monitor(c->sockets[i], address, WATCHED) != 0)
        return mt_fail(c, MT_EZMQ, "zmq_socket_monitor: %s", zmq_strerror(errno));
    int zero = 0;
    h->monitor = zmq_socket(c->zctx, ZMQ_PAIR);
    /* RCVHWM 0, before connecting: the inproc pipe is then unbounded. Only a close and
     * mt_send (every HANDSHAKE_CHECK_S at most) read the monitor, so a simulation that
     * computes, or waits in a blocked send, while a receiver refuses connections leaves
     * it unread; libzmq's I/O thread blocks on a monitor whose queue is full (about 2,000
     * events), which stops the reconnections of every socket of the context
     * (tests/c/test_c_monitor_unread.py). What queues instead is one small two-frame
     * message per refused connection (at most ~10 a second), read at the next send. */
    if (h->monitor == NULL || zmq_setsockopt(h->monitor, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_setsockopt(h->monitor, ZMQ_RCVHWM, &zero, sizeof zero) != 0 ||
        zmq_connect(h->monitor, address) != 0)
        return mt_fail(c, MT_EZMQ, "the monitor of '%s': %s", c->endpoints[i],
                       zmq_strerror(errno));
    return MT_OK;
}

/* What a peer that accepted TCP but never completed a ZeroMQ handshake is (another
 * program at the endpoint; or, silent, a trainer whose process is stopped: its kernel
 * accepts TCP), after NOT_ZMQ_AFTER_S: a receiver's libzmq I/O thread answers
 * in milliseconds (the Python client's words: client/handshake.py NOT_RECEIVER). */
/* (NOT_RECEIVER: send.h, close_failed.c says it too) */
/* What a peer that ended every ZeroMQ handshake without a detail (and never completed
 * one) is, to a client without a CURVE key: another program (an HTTP server answering
 * junk), or a CURVE-only receiver: it refuses such a client with a mechanism mismatch, a
 * detail, but closes the connection as soon as it reads the client's greeting, and the
 * rest of its own may not be flushed by then: this client's libzmq (4.3.4, under load)
 * then reads a failure without detail on every reconnection
 * (client/handshake.py NOT_RECEIVER_DROPS, word for word). */
#define NOT_RECEIVER_DROPS                                                                 \
    "not a melissa-trainer receiver, or a receiver that takes CURVE (encrypted) "         \
    "connections only (it accepted TCP connections but ended every ZeroMQ handshake "     \
    "without completing one): check the endpoint (the trainer's rank_N.json); if it is a " \
    "receiver, no CURVE key is known for it here: set MELISSA_TRAINER_KEY to its public " \
    "key, or use the rendezvous (MELISSA_TRAINER_RENDEZVOUS: its files carry the key); "  \
    "nothing sent to it was delivered"

/* (Only while that connection is up: one closed since, its port refusing, is a trainer
 * killed between its kernel's accept and its handshake; client/handshake.py alike.) */
static bool not_receiver(const mt_handshake *h) {
    return !h->zmtp && h->tcp_at > 0 && !h->down && mt_now() - h->tcp_at >= NOT_ZMQ_AFTER_S;
}

bool mt_handshake_not_receiver(const mt_handshake *h) { return not_receiver(h); }

/* Say on stderr that socket i's peer is not a receiver (not_receiver) when first seen,
 * and how long it is silent at REPEAT_AFTER_S and each doubling: the wait goes on (a
 * stopped trainer is as silent), ended by the send or close timeout only. The Python
 * client's words (client/handshake.py warn), word for word. */
static void warn(mt_client *c, size_t i) {
    mt_handshake *h = &c->handshakes[i];
    if (!not_receiver(h)) return;
    double silent = mt_now() - h->tcp_at, due = h->warn_due;
    if (silent < due) return;
    h->warn_due = 2 * silent > REPEAT_AFTER_S ? 2 * silent : REPEAT_AFTER_S;
    char still[96] = "";
    if (due > 0)
        snprintf(still, sizeof still, "still no ZeroMQ handshake %.0f s after TCP connected: ",
                 silent);
    fprintf(stderr, "melissa_trainer: simulation %llu rank %d: to %s: %s%s; nothing sent to it "
                    "is delivered%s\n",
            (unsigned long long)c->simulation_id, c->rank, c->endpoints[i], still, NOT_RECEIVER,
            due > 0 ? "; waiting on until send_timeout or close_timeout" : "");
}

/* Read the events that came for socket i (never blocks); say on stderr that its peer is
 * not a receiver (warn). */
static void read_events(mt_client *c, size_t i) {
    mt_handshake *h = &c->handshakes[i];
    double earliest = h->drained; /* (the earliest time of the next event read) */
    for (;;) {
        uint8_t frame[6]; /* u16 event, u32 value; then a frame with the endpoint */
        double before = mt_now();
        int n = zmq_recv(h->monitor, frame, sizeof frame, ZMQ_DONTWAIT);
        if (n < 0) { /* (EAGAIN: none left) */
            h->drained = before;
            /* Events carry no time, and are read late (a simulation computing while its
             * trainer was killed). ZeroMQ announces each reconnection's interval, from
             * the disconnection on: all but the last have passed, so it went down at the
             * latest that long ago (at most one interval later than it did). */
            double dated = mt_now() - h->retried_ms / 1000;
            if (h->down && dated < h->down_since) h->down_since = dated;
            warn(c, i);
            return;
        }
        char address[256];
        zmq_recv(h->monitor, address, sizeof address, 0); /* (always follows) */
        if (n < 6) continue;
        uint16_t event;
        uint32_t value;
        memcpy(&event, frame, sizeof event);
        memcpy(&value, frame + 2, sizeof value);
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            double opened = h->opened;
            h->opened = -1.0;
            if (opened >= 0 && mt_now() - opened >= h->bound) {
                double after = opened + h->bound; /* (a handshake timeout: not counted) */
                if (after > earliest) earliest = after;
                continue;
            }
        }
        if (event == ZMQ_EVENT_CONNECTED) {
            h->opened = earliest;
            h->bound = mt_timeout_bound(c->sockets[i]);
            h->down = false;
            h->ever = true;
            if (h->tcp_at <= 0) h->tcp_at = mt_now();
        } else if (event == ZMQ_EVENT_DISCONNECTED || event == ZMQ_EVENT_CONNECT_RETRIED) {
            if (!h->down) { /* (when read: dated back once all are read, above) */
                /* (a socket never connected has had no connection since it connected: its
                 * first attempt failing after the connect timeout, mt_connect_timeout_ms,
                 * is down since then; client/handshake.py's _read) */
                h->down_since = h->ever ? mt_now() : h->watched;
                h->retried_ms = h->last_ms = 0;
            }
            h->down = true;
            if (event == ZMQ_EVENT_CONNECT_RETRIED) {
                h->retried_ms += h->last_ms;
                h->last_ms = value;
            }
        } else if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            h->down = false;
            h->ever = true;
            h->state = MT_HANDSHAKE_OK;
            h->undetailed = 0;
            h->zmtp = true;
            h->opened = -1.0;
        } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            /* (without a key, failures without detail after a completed handshake are
             * a receiver's trainer dying, not a refusal: handshake.py's _read) */
            bool detailed = h->state == MT_HANDSHAKE_REFUSED &&
                            h->event != ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
            /* (a refusal with detail, such as a CURVE receiver's mechanism mismatch, is
             * kept: the reconnections' failures without detail that may follow it must
             * not turn its words into "not a receiver") */
            if (++h->undetailed >= 2 && (c->curve_keys[i] != NULL || !h->zmtp))
                h->state = MT_HANDSHAKE_REFUSED;
            if (!detailed) h->event = event;
        } else {
            h->state = MT_HANDSHAKE_REFUSED;
            h->event = event;
            h->value = value;
        }
    }
}

/* By where the CURVE key came from (key_source), the words of a key refused: not the
 * receiver's; for a receiver without CURVE; without a detail (either: its mismatch lost).
 * client/handshake_words.py KEYED, word for word (tests/client/
 * test_handshake_words_by_source.py): mt_set_curve_server_key's key is "the
 * curve_server_key given", as its check names it (client.c). */
static const char *const KEYED[3][3] = {
    {/* MELISSA_TRAINER_KEY */
     "the server key does not match: check MELISSA_TRAINER_KEY / the rendezvous file (the "
     "receiver's curve_public_key, that of the trainer running now)",
     "the receiver takes plain (unencrypted) connections and this client has a CURVE key for "
     "it: unset MELISSA_TRAINER_KEY (or check the endpoint / the rendezvous file if that "
     "receiver should use CURVE)",
     "the server key does not match: check MELISSA_TRAINER_KEY / the rendezvous file (the "
     "receiver's curve_public_key, that of the trainer running now); or the receiver takes "
     "plain (unencrypted) connections: unset MELISSA_TRAINER_KEY"},
    {/* mt_set_curve_server_key */
     "the server key does not match: check the curve_server_key given (the receiver's "
     "curve_public_key, that of the trainer running now)",
     "the receiver takes plain (unencrypted) connections and this client has a CURVE key for "
     "it: drop the curve_server_key given (or check the endpoint if that receiver should use "
     "CURVE)",
     "the server key does not match: check the curve_server_key given (the receiver's "
     "curve_public_key, that of the trainer running now); or the receiver takes plain "
     "(unencrypted) connections: drop the curve_server_key given"},
    {/* the rendezvous file */
     "the server key does not match: check the rendezvous file (the receiver's "
     "curve_public_key, that of the trainer running now)",
     "the receiver takes plain (unencrypted) connections and this client has a CURVE key for "
     "it, the curve_public_key of its rendezvous file: check the rendezvous file (a stale "
     "one?) and the endpoint",
     "the server key does not match: check the rendezvous file (the receiver's "
     "curve_public_key, that of the trainer running now); or the receiver takes plain "
     "(unencrypted) connections: check the rendezvous file (a stale one?)"},
};

/* Where the receivers' CURVE keys came from (KEYED's row): a rendezvous file (they
 * were read there; mt_set_curve_server_key's key, if any, is the same), else
 * mt_set_curve_server_key, else MELISSA_TRAINER_KEY (env.c resolve_receivers). */
static int key_source(const mt_client *c) {
    return c->rendezvous_used != NULL ? 2 : c->curve_key_arg != NULL ? 1 : 0;
}

/* The error of socket i's refused handshake: its endpoint, the cause and the fix. */
static mt_status refused(mt_client *c, size_t i) {
    const mt_handshake *h = &c->handshakes[i];
    const char *cause;
    if (c->curve_keys[i] == NULL && h->event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        return mt_fail(c, MT_EENV, "simulation %llu rank %d: to %s: " NOT_RECEIVER_DROPS,
                       (unsigned long long)c->simulation_id, c->rank, c->endpoints[i]);
    if (c->curve_keys[i] == NULL)
        cause = "it takes CURVE (encrypted) connections only, and no CURVE key is known for it "
                "here: set MELISSA_TRAINER_KEY to its public key, or use the rendezvous "
                "(MELISSA_TRAINER_RENDEZVOUS: its files carry the key)";
    else if (h->event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
             h->value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
        cause = KEYED[key_source(c)][1];
    else /* (without detail: maybe a plain receiver's lost mismatch, handshake.py's words) */
        cause = KEYED[key_source(c)][h->event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL ? 2 : 0];
    return mt_fail(c, MT_EENV, "simulation %llu rank %d: the receiver %s refused this client's "
                               "handshake, nothing sent to it was delivered: %s",
                   (unsigned long long)c->simulation_id, c->rank, c->endpoints[i], cause);
}

mt_status mt_handshake_check(mt_client *c, size_t i) {
    if (c->handshakes == NULL || c->handshakes[i].monitor == NULL) return MT_OK;
    read_events(c, i);
    return c->handshakes[i].state == MT_HANDSHAKE_REFUSED ? refused(c, i) : MT_OK;
}

double mt_handshake_down_since(mt_client *c, size_t i) {
    if (c->handshakes == NULL || c->handshakes[i].monitor == NULL) return -1.0;
    read_events(c, i);
    return c->handshakes[i].down ? c->handshakes[i].down_since : -1.0;
}

void mt_handshake_never(mt_client *c, char *out, size_t size) {
    size_t n = 0, at = 0;
    out[0] = '\0';
    for (size_t i = 0; c->handshakes != NULL && i < c->n_endpoints; ++i) {
        if (c->handshakes[i].monitor == NULL) continue;
        read_events(c, i);
        if (c->handshakes[i].ever) continue;
        int w = snprintf(out + at, size - at, "%s%s", n ? ", " : "no receiver ever accepted a "
                                                                 "connection at ",
                         c->endpoints[i]);
        if (w < 0 || (size_t)w >= size - at) { /* (cut: the first ones named, or none) */
            out[at] = '\0';
            break;
        }
        at += (size_t)w;
        ++n;
    }
    if (n > 0 && at < size) {
        int w = snprintf(out + at, size - at, ": check the endpoint (the trainer's "
                                              "rank_N.json) or start the trainer first");
        at = w < 0 || (size_t)w >= size - at ? size : at + (size_t)w;
    }
    for (size_t i = 0; c->handshakes != NULL && i < c->n_endpoints && at < size; ++i) {
        if (c->handshakes[i].monitor == NULL || !not_receiver(&c->handshakes[i])) continue;
        int w = snprintf(out + at, size - at, "%s%s: %s", at ? "; " : "", c->endpoints[i],
                         NOT_RECEIVER);
        if (w < 0 || (size_t)w >= size - at) { /* (cut: those named) */
            out[at] = '\0';
            break;
        }
        at += (size_t)w;
    }
}

mt_status mt_handshake_wait(mt_client *c, double deadline, bool down_ends) {
    if (c->handshakes == NULL) return MT_OK;
    zmq_pollitem_t *items = calloc(c->n_endpoints, sizeof *items);
    if (items == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    mt_status st = MT_OK;
    for (;;) {
        size_t waiting = 0;
        for (size_t i = 0; i < c->n_endpoints && st == MT_OK; ++i) {
            st = mt_handshake_check(c, i);
            if (st == MT_OK && down_ends && c->handshakes[i].down) st = MT_ETIMEDOUT;
            if (c->handshakes[i].state == MT_HANDSHAKE_OK) continue;
            items[waiting].socket = c->handshakes[i].monitor;
            items[waiting++].events = ZMQ_POLLIN;
        }
        if (st != MT_OK || waiting == 0) break;
        double left = deadline < 0 ? 1.0 : deadline - mt_now();
        if (left <= 0) {
            st = MT_ETIMEDOUT; /* (the caller's message: not delivered within close_timeout) */
            break;
        }
        if (zmq_poll(items, (int)waiting, (long)mt_ms(left) + 1) < 0 && errno != EINTR) {
            st = mt_fail(c, MT_EZMQ, "zmq_poll: %s", zmq_strerror(errno));
            break;
        }
    }
    free(items);
    return st;
}

void mt_handshake_release(mt_client *c) {
    for (size_t i = 0; c->handshakes != NULL && i < c->n_endpoints; ++i) {
        if (c->handshakes[i].monitor == NULL) continue;
        if (c->sockets != NULL && c->sockets[i] != NULL)
            zmq_socket_monitor(c->sockets[i], NULL, 0); /* (stops its events) */
        zmq_close(c->handshakes[i].monitor);
    }
    free(c->handshakes);
    c->handshakes = NULL;
    free(c->stop_looks); /* (the sends' looks at the stop records: mt_send_stop_look) */
    c->stop_looks = NULL;
}
