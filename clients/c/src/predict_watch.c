/* predict_watch.c: a trainer gone is not waited for (melissa_trainer/client/predict_link.py
 * PredictLink: the same rules, the same messages). The prediction socket has a monitor:
 * a connection attempt refused (nothing listens there: a dead trainer's port) fails a
 * request waiting to send at once, and a connection dropped fails a request waiting
 * for its answer at once (its answer cannot come: a new connection is another peer to
 * the trainer's socket), both MT_ETIMEDOUT, the status to fall back from. After such a
 * failure, the requests of a backoff (0.05 s, doubling to 1 s while the trainer stays
 * away) fail at once without dialling: no socket per request while the trainer is away
 * (a solver asking in a loop would make thousands a second and run out of file
 * descriptors); it ends early once the rendezvous directory changed since the last
 * lookup (a trainer resumed published its serve file: asked at the next request). Only
 * an unreachable host (a node gone) takes the whole timeout, and says that no answer
 * came from it (predict_dial.c: not a refusal). A server
 * that refuses the handshake (a CURVE key that is not its own) is MT_EENV as soon as
 * that is certain: a mistake to fix, not a fallback (the Python client's ValueError); so
 * are an endpoint given that answers but is not a serving socket (the receiver's, of
 * rank_{r}.json) and a host name that does not resolve. A peer that accepts TCP and never
 * answers the greeting (a trainer whose process is stopped, another program) is not a
 * refusal: libzmq ends such a handshake after ZMQ_HANDSHAKE_IVL with a failure without
 * detail, which is read by handshake.c's rule (one that may end a connection
 * mt_timeout_bound old is a timeout: next_kept), and the request's MT_ETIMEDOUT says what
 * was seen (SILENT; client/predict_events.py). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "internal.h"
#include "serve.h"

#define HANDSHAKE_FAILED                                                                  \
    (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |         \
     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
/* a connection attempt that failed (refused), an established connection dropped */
#define GONE (ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_DISCONNECTED)
/* what next_kept gives for a handshake failure that libzmq's timeout may have caused */
#define TIMED_OUT 0x10000
/* what next_kept gives for a connect abandoned at the connect bound (predict_dial.c) */
#define NO_ANSWER 0x20000
/* what a serving peer that accepted TCP and never completed a ZeroMQ handshake is, and
 * the fix (client/predict_errors.py SILENT, word for word) */
#define SILENT                                                                            \
    "a trainer whose process is stopped (SIGSTOP, a suspended job) answers once "         \
    "continued; else it is not a serving socket: check the endpoint (the `endpoint` of "  \
    "serve_N.json in the rendezvous directory)"
/* why a serving socket refused a client with a CURVE key with the detail of a mechanism
 * mismatch (client/predict_errors.py PLAIN_SERVE, word for word) */
#define PLAIN_SERVE                                                                       \
    "the serving socket is not encrypted (it takes plain connections: ZeroMQ reports a "  \
    "mechanism mismatch), and this client has a CURVE key for it"
/* what PLAIN_SERVE goes on with when that key was read from the serve file of rank %lld
 * (no one gave it: a stale file; client/predict_errors.py PLAIN_SERVE_FILE, word for
 * word, its {env_rendezvous} MELISSA_TRAINER_RENDEZVOUS) */
#define PLAIN_SERVE_FILE                                                                  \
    ", read from its serve file (the curve_public_key of serve_%lld.json): a stale "      \
    "serve file? (its trainer gone, its port another's that serves without CURVE): check " \
    "the rendezvous directory (MELISSA_TRAINER_RENDEZVOUS) and the trainer serving there"
#define BACKOFF_FIRST 0.05
#define BACKOFF_MOST 1.0
/* Seconds a connection closed at the handshake may wait for ZeroMQ to dial again
 * (CONNECT_RETRIED, posted by its I/O thread right after the DISCONNECTED): none comes
 * after a protocol error, a socket of another kind (a receiver's PULL), whose session
 * ZeroMQ ends for good; one comes after a trainer that died mid-handshake. (Both events
 * are posted in one turn of the I/O thread: the bound is for that thread descheduled on
 * a loaded node, where a wrong guess would fail a solver whose trainer is alive.) */
#define NO_REDIAL 0.5
/* where a rank's serving endpoint is, and the endpoint it is confused with */
#define SERVE_FILE                                                                        \
    "the serving endpoint is the `endpoint` of serve_%lld.json in the rendezvous "        \
    "directory, not that of rank_%lld.json (the stream receiver's)"

mt_status mt_watch_start(mt_client *c, void *s) {
    char address[96];
    int zero = 0;
    snprintf(address, sizeof address, "inproc://mt-predict-%p-%u", (void *)c,
             c->predict_monitors++); /* (an address is freed only once its socket is reaped) */
    /* (and connects in progress: they tell a connect abandoned from one refused) */
    int events = HANDSHAKE_FAILED | GONE | ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CONNECT_DELAYED;
    if (zmq_socket_monitor(s, address, events) != 0)
        return mt_fail(c, MT_EZMQ, "zmq_socket_monitor: %s", zmq_strerror(errno));
    void *m = zmq_socket(c->zctx, ZMQ_PAIR);
    /* RCVHWM 0 (unbounded), as handshake.c's: the monitor is read only during a request,
     * and libzmq's I/O thread blocks on a full one (between requests a socket whose
     * trainer died queues about 10 small events a second, read at the next request). */
    if (m == NULL || zmq_setsockopt(m, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_setsockopt(m, ZMQ_RCVHWM, &zero, sizeof zero) != 0 || zmq_connect(m, address) != 0) {
        mt_status st = mt_fail(c, MT_EZMQ, "the serving socket's monitor: %s",
                               zmq_strerror(errno));
        if (m != NULL) zmq_close(m);
        zmq_socket_monitor(s, NULL, 0);
        return st;
    }
    c->predict_monitor = m;
    c->predict_drained = mt_now();
    c->predict_opened = -1.0;
    c->predict_bound = mt_timeout_bound(s);
    c->predict_after_timeout = false;
    c->predict_timed_out = 0;
    c->predict_mismatched = false;
    int connect_ms = 0; /* (set by predict.c before: the request's, mt_connect_timeout_ms) */
    size_t size = sizeof connect_ms;
    if (zmq_getsockopt(s, ZMQ_CONNECT_TIMEOUT, &connect_ms, &size) != 0) connect_ms = 0;
    c->predict_connect_bound = connect_ms / 1000.0;
    c->predict_dialled = mt_now(); /* (dialled next: predict.c connect_serving) */
    c->predict_dialling = -1.0;
    c->predict_answered = false;
    return MT_OK;
}

void mt_watch_stop(mt_client *c) {
    if (c->predict_monitor == NULL) return;
    if (c->predict_socket != NULL) zmq_socket_monitor(c->predict_socket, NULL, 0);
    zmq_close(c->predict_monitor);
    c->predict_monitor = NULL;
}

/* The next waiting event of the monitor (0: none); a mechanism mismatch's detail sets
 * predict_mismatched. */
static uint16_t next_event(mt_client *c) {
    uint8_t frame[6]; /* u16 event, u32 value; then a frame with the endpoint */
    int n;
    while ((n = zmq_recv(c->predict_monitor, frame, sizeof frame, ZMQ_DONTWAIT)) < 0 &&
           errno == EINTR)
        continue;
    if (n < 0) return 0;
    char address[256];
    while (zmq_recv(c->predict_monitor, address, sizeof address, 0) < 0 && errno == EINTR)
        continue; /* (always follows) */
    uint16_t event = 0;
    uint32_t value = 0;
    if (n >= 2) memcpy(&event, frame, sizeof event);
    if (n >= 6) memcpy(&value, frame + 2, sizeof value);
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
        value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
        c->predict_mismatched = true; /* (ServeEvents.mismatched) */
    return event;
}

/* The next event kept (0: none waiting), by handshake.c's rule (client/predict_events.py
 * ServeEvents.read, the same): a failure without detail that may end a connection
 * mt_timeout_bound old or more is TIMED_OUT (libzmq's handshake timeout: a silent peer),
 * and the DISCONNECTED and CONNECT_RETRIED that follow it are left out (the peer is
 * there: not a refusal, not a trainer gone). Events carry no time: a connection began
 * no earlier than the last read that found the monitor empty before its CONNECTED, and
 * each failure let off puts later events the bound later (`*floor`, from
 * predict_drained at the first read of a burst). */
static uint32_t next_kept(mt_client *c, double *floor) {
    for (;;) {
        double before = mt_now();
        uint16_t event = c->predict_monitor == NULL ? 0 : next_event(c);
        if (event == 0) {
            c->predict_drained = before;
            return 0;
        }
        if (event == ZMQ_EVENT_CONNECT_DELAYED) { /* (a connect in progress) */
            c->predict_dialling = mt_now();
            continue;
        }
        if (event == ZMQ_EVENT_CONNECTED) {
            c->predict_dialling = -1.0;
            c->predict_answered = true;
            c->predict_opened = *floor;
            c->predict_bound = mt_timeout_bound(c->predict_socket);
            c->predict_after_timeout = false;
        } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            double opened = c->predict_opened;
            c->predict_opened = -1.0;
            if (opened >= 0 && mt_now() - opened >= c->predict_bound) {
                if (opened + c->predict_bound > *floor) *floor = opened + c->predict_bound;
                c->predict_timed_out++;
                c->predict_after_timeout = true;
                return TIMED_OUT;
            }
        } else if (event == ZMQ_EVENT_DISCONNECTED) {
            c->predict_opened = -1.0;
            if (c->predict_after_timeout) continue;
        } else if (event == ZMQ_EVENT_CONNECT_RETRIED && c->predict_after_timeout) {
            c->predict_after_timeout = false;
            continue;
        } else if (event == ZMQ_EVENT_CONNECT_RETRIED) {
            c->predict_opened = -1.0;
            if (mt_dial_abandoned(c, *floor)) return NO_ANSWER; /* (not refused) */
        } else {
            c->predict_opened = -1.0; /* (a failure with detail ends the connection) */
        }
        return event;
    }
}

bool mt_watch_lost(mt_client *c, bool *last) {
    bool lost = false, up = true; /* (up: no DISCONNECTED after the last CONNECTED) */
    uint32_t event;
    double floor = c->predict_drained;
    while ((event = next_kept(c, &floor)) != 0) {
        if (event == ZMQ_EVENT_CONNECTED || event == ZMQ_EVENT_DISCONNECTED)
            up = event == ZMQ_EVENT_CONNECTED;
        lost = lost || event == ZMQ_EVENT_DISCONNECTED;
    }
    if (last != NULL) *last = !up;
    return lost;
}

mt_status mt_gone(mt_client *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->gone_why, sizeof c->gone_why, fmt, ap);
    va_end(ap);
    mt_predict_release(c);
    double doubled = 2 * c->backoff;
    c->backoff = c->backoff == 0 ? BACKOFF_FIRST : doubled < BACKOFF_MOST ? doubled : BACKOFF_MOST;
    c->retry_at = mt_now() + c->backoff;
    return mt_fail(c, MT_ETIMEDOUT, "%s; the next request looks the endpoint up again",
                   c->gone_why);
}

mt_status mt_backoff_check(mt_client *c) {
    double now = mt_now();
    if (c->predict_socket != NULL || now >= c->retry_at) return MT_OK;
    if (mt_serve_dir_changed(c)) { /* (a trainer published its serve file: look at once) */
        c->retry_at = 0;
        return MT_OK;
    }
    return mt_fail(c, MT_ETIMEDOUT, "%s (at an earlier request; the next attempt in %.2f s at "
                                    "most)", c->gone_why, c->retry_at - now);
}

/* The error of a handshake the server refused (client/predict_errors.py
 * handshake_refused: the same causes and fix, in the C client's names); the socket is
 * released, and no backoff follows (the server is there: its key is the mistake). A key
 * given that the server refused with a mechanism mismatch's detail is certain: the
 * server takes no CURVE (PLAIN_SERVE), and the fix is to drop the key; a serve file's
 * key so refused says the file is stale (PLAIN_SERVE_FILE). */
static mt_status refused_handshake(mt_client *c) {
    if (c->predict_mismatched && c->predict_key == MT_KEY_GIVEN) {
        mt_predict_release(c);
        return mt_fail(c, MT_EENV, "mt_predict: the serving endpoint %s refused this client's "
                                   "CURVE handshake: " PLAIN_SERVE ": drop the key given "
                                   "(MELISSA_TRAINER_SERVE_KEY), or check the endpoint if that "
                                   "serving socket should use CURVE", c->predict_endpoint);
    }
    if (c->predict_mismatched && c->predict_key == MT_KEY_SERVE_FILE) { /* (a stale file) */
        mt_predict_release(c);
        return mt_fail(c, MT_EENV, "mt_predict: the serving endpoint %s refused this client's "
                                   "CURVE handshake: " PLAIN_SERVE PLAIN_SERVE_FILE,
                       c->predict_endpoint, c->predict_rank);
    }
    static const char fix[] = "read it from the rendezvous directory (MELISSA_TRAINER_RENDEZVOUS: "
                              "the serve files carry it), or set MELISSA_TRAINER_SERVE_KEY to "
                              "the stream's ReceiverConfig.curve_public_key";
    const char *cause =
        c->predict_key == MT_KEY_NONE
            ? "handshake: it takes CURVE (encrypted) connections only, and no CURVE key is known "
              "for it here"
        : c->predict_key == MT_KEY_GIVEN
            ? "CURVE handshake: the key given (MELISSA_TRAINER_SERVE_KEY) is not its public key, "
              "or it takes no CURVE"
            : "CURVE handshake: the key of its serve file (curve_public_key) is not its public "
              "key, or it takes no CURVE";
    mt_predict_release(c);
    long long r = c->predict_rank;
    return mt_fail(c, MT_EENV, "mt_predict: the serving endpoint %s refused this client's %s: %s; "
                               "or it is not a serving socket: " SERVE_FILE,
                   c->predict_endpoint, cause, fix, r, r);
}

/* The error of an endpoint that answers but is not a serving socket (predict_errors.py
 * not_serving): MT_EENV when given (no backoff: a mistake to fix); a trainer gone
 * (mt_gone: MT_ETIMEDOUT) when read from a serve file (a stale one: its port taken by
 * another socket since). */
static mt_status not_serving(mt_client *c) {
    long long r = c->predict_rank;
    if (!c->predict_given)
        return mt_gone(c, "the serving endpoint %s of serve_%lld.json answers but is not a "
                          "serving socket: it closed the connection at the handshake (a stale "
                          "serve file, its port another socket's now?)", c->predict_endpoint, r);
    mt_predict_release(c);
    return mt_fail(c, MT_EENV, "mt_predict: the endpoint %s answers but is not a serving "
                               "socket: it closed the connection at the handshake (a socket of "
                               "another kind: the stream receiver's?). The serving endpoint is "
                               "the `endpoint` of serve_%lld.json in the rendezvous directory, "
                               "not that of rank_%lld.json (the stream receiver's): give that "
                               "one (mt_set_serve_endpoints or MELISSA_TRAINER_SERVE_ENDPOINTS), "
                               "or give the directory (MELISSA_TRAINER_RENDEZVOUS or "
                               "mt_set_rendezvous) and no endpoint", c->predict_endpoint, r, r);
}

mt_status mt_watch_connected(mt_client *c, double deadline, const char *timeout) {
    bool refused = false; /* a connection attempt failed (and no handshake was refused) */
    int undetailed = 0;
    int retried = 0; /* reconnections scheduled since a connection made (2: one failed) */
    double dropped = 0; /* when a connection closed before it served, not dialled again yet */
    unsigned timed_out = c->predict_timed_out; /* (a handshake timed out since: SILENT) */
    for (;;) {
        double now = mt_now(), left = deadline - now;
        double wait = dropped && dropped + NO_REDIAL - now < left ? dropped + NO_REDIAL - now
                                                                  : left;
        if (c->predict_dialling >= 0 && wait > MT_DIAL_DRAIN) /* (dates its end) */
            wait = MT_DIAL_DRAIN;
        zmq_pollitem_t items[2] = {{c->predict_socket, 0, ZMQ_POLLOUT, 0},
                                   {c->predict_monitor, 0, ZMQ_POLLIN, 0}};
        int ready = 0;
        if (wait > 0) {
            long ms = mt_ms(wait); /* (capped: the loop looks at the deadline again) */
            while ((ready = zmq_poll(items, 2, ms < 1 ? 1 : ms)) < 0 && errno == EINTR)
                continue;
        }
        if (ready < 0) {
            mt_status st = mt_fail(c, MT_EZMQ, "zmq_poll: %s", zmq_strerror(errno));
            mt_predict_release(c);
            return st;
        }
        if (items[0].revents & ZMQ_POLLOUT) return MT_OK;
        uint32_t event;
        double floor = c->predict_drained;
        while ((event = next_kept(c, &floor)) != 0) {
            if (event == ZMQ_EVENT_CONNECTED) retried = 0;
            if (event == TIMED_OUT || event == ZMQ_EVENT_CONNECTED) continue; /* (it is there) */
            if (event == NO_ANSWER) /* (the connect bound ended an attempt: not refused) */
                return mt_dial_no_answer(c, c->predict_connect_bound);
            if (event == ZMQ_EVENT_DISCONNECTED) {
                dropped = mt_now();
                mt_predict_forget(c); /* (another trainer there next, maybe: asked again) */
                continue;
            }
            if (event & GONE) { /* (ZeroMQ dials again: not a protocol error) */
                refused = true;
                dropped = 0;
                retried += event == ZMQ_EVENT_CONNECT_RETRIED;
                continue;
            }
            /* A mechanism mismatch (CURVE on one side only) is certain at once. A failure
             * without detail is also a connection lost mid-handshake (a trainer
             * stopping): a key given here, refused twice, is not the server's; one read
             * from a serve file may be stale (a restarted trainer's new key), which the
             * lookup after the timeout reads again (as the Python client's Predictor).
             * Without CURVE, twice is a socket of another kind that closed the connection
             * before this one saw why (the race of the next rule), or a CURVE server that
             * did (the race of its mismatch: 2 runs in 4 of a test here): an
             * endpoint given gets the message naming both, a serve file's is stale. */
            undetailed += event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
            if (event != ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL ||
                (undetailed >= 2 && c->predict_given))
                return refused_handshake(c);
            if (undetailed >= 2 && c->predict_key == MT_KEY_NONE) return not_serving(c);
        }
        /* Closed at the handshake and never dialled again: ZeroMQ's protocol error, a
         * socket of another kind there (a receiver's PULL: its endpoint is the `endpoint`
         * of rank_{r}.json, beside serve_{r}.json). */
        if (dropped && mt_now() - dropped >= NO_REDIAL) return not_serving(c);
        /* Nothing listens there (a dead trainer's port refuses at once): fall back now,
         * not at the timeout; ZeroMQ would retry every 0.1 s in vain until then. (After a
         * handshake failure, the retries are the handshake's: the rule above decides;
         * unless a reconnection failed without connecting: a trainer killed as its kernel
         * accepted this connection, its port closed since.) A host name that does not
         * resolve is refused too: a mistake to fix. */
        if (refused && (!undetailed || retried >= 2)) {
            mt_status st = mt_dial_check_host(c);
            if (st != MT_OK) return st;
            return mt_gone(c, "the trainer's serving endpoint %s refused the connection: "
                              "nothing listens there (the trainer is gone or restarting)",
                           c->predict_endpoint);
        }
        if (left <= 0) {
            double waited = mt_dial_unanswered(c); /* (a connect in progress since dialled) */
            if (waited >= 0 && strncmp(c->predict_endpoint, "tcp://", 6) == 0)
                return mt_dial_no_answer(c, waited);
            bool went_silent = c->predict_silent_at[0] != '\0' &&
                               strcmp(c->predict_silent_at, c->predict_endpoint) == 0;
            bool silent = c->predict_timed_out > timed_out ||
                          (c->predict_opened >= 0 &&
                           (went_silent || mt_now() - c->predict_opened >= c->predict_bound));
            if (silent) {
                /* (still silent: the next request says so too) */
                snprintf(c->predict_silent_at, sizeof c->predict_silent_at, "%s",
                         c->predict_endpoint);
                mt_status st = mt_fail(c, MT_ETIMEDOUT, "the trainer's serving endpoint %s "
                                                        "accepted a TCP connection but no ZeroMQ "
                                                        "handshake completed within %s s: " SILENT,
                                       c->predict_endpoint, timeout);
                mt_predict_release(c);
                return st;
            }
            mt_predict_release(c);
            /* (predict_errors.py TOO_SHORT: a live trainer too, under a timeout
             * shorter than a connection takes; user trial 39) */
            return mt_fail(c, MT_ETIMEDOUT, "no connection to the trainer's serving endpoint "
                                            "within %s s (the trainer is gone or restarting; "
                                            "or a timeout shorter than a connection takes: "
                                            "give a few of the trainer's steps)",
                           timeout);
        }
    }
}
