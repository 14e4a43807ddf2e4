/* send_wait.c: how long a blocked send waits: as long as the trainer is there, not for a
 * dead one (melissa_trainer/client/send_wait.py is the Python client's).
 *
 * A send blocks when ZeroMQ's queue to a receiver is full (sndhwm messages) or, for a
 * large array, until ZeroMQ is done with it. Back-pressure is a feature: a trainer that is
 * slow, busy or paused (SIGSTOP, a suspended job) keeps its connections, and the solver
 * waits for it as long as it lasts (or the send timeout). To the queue a trainer gone
 * looks the same, and with the default send timeout (none) such a send used to block for
 * ever: what tells them apart is the connection, which a dead trainer's kernel closes
 * (ZeroMQ's reconnections are then refused; a lost node's, after TCP gives up).
 *
 * So every blocking call of a send is bounded by a slice of SLICE_S seconds (SNDTIMEO,
 * or a timed wait for the arrays ZeroMQ still reads), which a send whose queue is not full
 * never reaches. Between two slices, the mutex released, the send reads the sockets'
 * monitors (handshake.c) and the rendezvous:
 *
 * - a receiver that refused the handshake never reads: MT_EENV naming it, at once;
 * - a receiver disconnected, and a receiver's stop record of this run says that the
 *   trainer stopped for good (stop_record.c mt_stop_record_for_good: it ended or failed,
 *   "end", "error", "nonfinite"; not "preempted" nor "stopped"): no trainer comes back, so
 *   nothing is waited for nor followed: at once, the close's sentence (stop_said.c; the
 *   Python client's SendWait._check, StoppedForGood), MT_ESIMREFUSED if this simulation's
 *   non-finite sample stopped it, else MT_ETIMEDOUT. The record is read while a receiver
 *   is down, once a slice at most and again only once its file changed;
 * - with a replay window (external mode), a new run in the rendezvous is followed (follow.c,
 *   at most once a second): the follow sends again the steps its checkpoint lacks and the
 *   open step's fields sent so far, this send's included (its part is in the window
 *   before it is sent), so the send is then done;
 * - a receiver disconnected, without a new connection, for the disconnected timeout
 *   (counted from the start of the wait at the earliest), and with a window no new run
 *   within the follow timeout after that: MT_ETIMEDOUT, naming the endpoint, the time
 *   waited, the settings and what to do, and why it went: "the trainer was preempted
 *   (MESSAGE; its stop record in DIR)" when a receiver's stop record of this run says so
 *   (stop_said.c mt_stop_preempted_words, read once, as it gives up; the Python client's
 *   SendWait says the same), else "the trainer died, or its node"; for an endpoint that
 *   never accepted a connection (a wrong port, a trainer not started: nothing died),
 *   "tried for N s" and what to check, in the Python client's words (client/patience.py
 *   PeerWatch.gone).
 *
 * A send whose queue is not full never blocks, and a solver started by hand went on
 * computing into its queue after its trainer ended (a user trial: 2,400 steps, 27 s): so
 * a send that opens a step reads the same stop records the same way (mt_send_stop_look,
 * from send.c: while a receiver is down, once a slice at most, a file again only once it
 * changed) and fails with the same status and sentence, then "(the send gave up before it
 * blocked: no trainer comes back there)" (the Python client's SendWait.look).
 *
 * A send that gives up, by the send timeout or the disconnected timeout, reads every
 * receiver's stop record afresh as it does (stop_first; the Python client's
 * SendWait.timeout and _check): a record written since the wait's last look (a slice
 * before, or none: a send timeout shorter than a slice) that says the trainer stopped
 * for good leads its message, the close's sentence then "(send_timeout=T s ended the
 * send)" or "(the send gave up after S s, disconnected_timeout=D s)", Python's words,
 * with that kind's status. A send timeout's message says a preempted record in its
 * clause of a receiver disconnected (send_words.c). Once a receiver has been
 * disconnected a few seconds (mt_notice_after), a blocked send says, once, what it waits
 * for, how long and the setters that shorten it (send_notice.c, the Python send's
 * notice). Not thread-safe: the client's thread. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "internal.h"
#include "close_wait.h"
#include "follow.h"
#include "send_notice.h"

#define SLICE_S 0.5 /* (melissa_trainer/client/sockets.py SLICE) */

/* One blocked send's wait: when its first slice began, and each receiver's rendezvous
 * file as last read for a stop record (allocated at the first look, freed at the end). */
typedef struct waiting {
    double started;
    mt_stop_look *looks;
    double deadline; /* the send timeout's (< 0: none), for the notice */
    bool told;       /* the notice said (send_notice.c): once per wait */
} waiting;

/* What a failed wait names: "time step N", or "a message". */
static void what_text(const uint64_t *step, char out[48]) {
    if (step == NULL) snprintf(out, 48, "a message");
    else snprintf(out, 48, "time step %llu", (unsigned long long)*step);
}

/* The bound of a seconds setting, as the messages say it ("None" when there is none). */
static void bound_text(double seconds, char out[32]) {
    if (seconds < 0) snprintf(out, 32, "None");
    else mt_format_double(seconds, out);
}

/* While a receiver is disconnected, every receiver's stop record (the receivers are one
 * trainer's; send_verdict.py _stop_said): the send's error if one says the trainer stopped
 * for good (module comment), the close's sentence then "(`after`)" (NULL: "the send gave
 * up after S s blocked: no trainer comes back there", the wait's own look), else MT_OK. */
static mt_status stopped_for_good(mt_client *c, waiting *w, const uint64_t *step,
                                  const char *after) {
    if (c->rendezvous_used == NULL) return MT_OK;
    mt_buf down = {0}; /* (the disconnected receivers: whose messages were not delivered) */
    for (size_t i = 0; i < c->n_endpoints; ++i)
        if (mt_handshake_down_since(c, i) >= 0)
            mt_buf_printf(&down, "%s%s", down.len > 0 ? ", " : "", c->endpoints[i]);
    if (down.len == 0 && !down.oom) return MT_OK;
    if (w->looks == NULL) w->looks = calloc(c->n_endpoints, sizeof *w->looks);
    mt_stop_said *s = calloc(1, sizeof *s); /* (16 KiB: its reason's message whole) */
    mt_status st = MT_OK;
    if (s == NULL || w->looks == NULL || down.oom) st = mt_fail(c, MT_ENOMEM, "out of memory");
    char blocked[96];
    if (after == NULL)
        snprintf(blocked, sizeof blocked, "the send gave up after %.1f s blocked: no trainer "
                                          "comes back there", mt_now() - w->started);
    for (size_t r = 0; st == MT_OK && r < c->n_endpoints; ++r) {
        mt_stop_outcome o = mt_stop_record_for_good(c->rendezvous_used, r, c->endpoints[r],
                                                    c->run_id, c->simulation_id, NULL,
                                                    &w->looks[r], s);
        if (o == MT_STOP_REFUSED || o == MT_STOP_ENDED) {
            st = mt_stop_record_send_gave_up(c, o, s, r, down.data, step,
                                             after != NULL ? after : blocked);
            break;
        }
        memset(s, 0, sizeof *s); /* (the next receiver's record read afresh) */
    }
    free(s);
    free(down.data);
    if (st != MT_OK) c->failed = true; /* (only mt_client_abort may follow, as gone) */
    return st;
}

/* A send that gives up (the send timeout, the disconnected timeout) says a stop record
 * first, as Python's (SendWait.timeout, _check): every receiver's file read afresh now
 * (one written since the wait's last look, which a slice may have preceded by 0.5 s, or
 * a send timeout shorter than a slice, which made none), the error stopped_for_good's
 * with `after`; MT_OK if none says the trainer stopped for good (or none is down). */
static mt_status stop_first(mt_client *c, const uint64_t *step, const char *after) {
    waiting fresh = {mt_now(), NULL, -1.0, false};
    mt_status st = stopped_for_good(c, &fresh, step, after);
    free(fresh.looks);
    return st;
}

mt_status mt_send_stop_look(mt_client *c, const uint64_t *step, double now) {
    if (c->rendezvous_used == NULL || now < c->stop_look_due) return MT_OK;
    c->stop_look_due = now + SLICE_S; /* (a blocked send's cadence: once a slice at most) */
    waiting w = {now, c->stop_looks, -1.0, false};
    mt_status st = stopped_for_good(c, &w, step, "the send gave up before it blocked: no "
                                                 "trainer comes back there");
    c->stop_looks = w.looks; /* (kept: a file read again only once it changed) */
    return st;
}

/* MT_ETIMEDOUT if a receiver has been down too long (module comment), else MT_OK. */
static mt_status gone(mt_client *c, double started, const uint64_t *step) {
    if (c->disconnected_timeout < 0) return MT_OK;
    bool window = c->replay.max_bytes > 0;
    if (window && c->follow_timeout < 0) return MT_OK; /* (a restart waited for, ever) */
    double now = mt_now(), bound = c->disconnected_timeout + (window ? c->follow_timeout : 0);
    for (size_t i = 0; i < c->n_endpoints; ++i) {
        double since = mt_handshake_down_since(c, i);
        if (since < 0 || now - (since > started ? since : started) <= bound) continue;
        char what[48], after[32], sent[32], follow[32], restarted[256] = "", never[600];
        char how[MT_CAUSE_SIZE + 512], cause[MT_CAUSE_SIZE], ended[96];
        bound_text(c->disconnected_timeout, after);
        snprintf(ended, sizeof ended, "the send gave up after %.1f s, disconnected_timeout=%s s",
                 now - started, after);
        mt_status stop = stop_first(c, step, ended); /* (the record's sentence first) */
        if (stop != MT_OK) return stop;
        mt_handshake_never(c, never, sizeof never); /* (a wrong endpoint: said) */
        what_text(step, what);
        bound_text(c->send_timeout, sent);
        bound_text(c->follow_timeout, follow);
        if (window)
            snprintf(restarted, sizeof restarted, ", and no restarted trainer published in "
                                                  "the rendezvous within "
                                                  "mt_set_follow_timeout=%s s after", follow);
        if (c->handshakes[i].ever) {
            if (!mt_stop_preempted_words(c, cause, sizeof cause)) /* (its record says?) */
                snprintf(cause, sizeof cause, "%s", mt_gone_cause(c, i));
            snprintf(how, sizeof how, "disconnected for %.0f s without a new connection "
                                      "(mt_set_disconnected_timeout=%s s; %s)",
                     now - since, after, cause);
        }
        else /* (nothing died: no connection was ever made; `never` says why, as Python) */
            snprintf(how, sizeof how, "tried for %.0f s (mt_set_disconnected_timeout=%s s)",
                     now - since, after);
        c->failed = true;
        return mt_fail(c, MT_ETIMEDOUT, "simulation %llu rank %d: could not send %s, blocked "
                                        "%.1f s waiting for the trainer to take the messages "
                                        "queued to %s: the receiver is unreachable, "
                                        "%s%s%s%s. A send waits for a trainer that is "
                                        "connected, slow or paused, as long as it lasts or "
                                        "mt_set_send_timeout allows (now %s). Close the client "
                                        "with mt_client_abort and run this simulation again, "
                                        "with the same simulation id "
                                        "(MELISSA_TRAINER_SIMULATION_ID=%llu), once a trainer "
                                        "runs there again",
                       (unsigned long long)c->simulation_id, c->rank, what, now - started,
                       c->endpoints[i], how, restarted,
                       never[0] ? (c->handshakes[i].ever ? "; " : ": ") : "", never, sent,
                       (unsigned long long)c->simulation_id);
    }
    return MT_OK;
}

/* Between two slices (c->mu not held): the checks of the module comment. */
static mt_status between(mt_client *c, waiting *w, const uint64_t *step) {
    for (size_t i = 0; i < c->n_endpoints; ++i)
        if (mt_handshake_check(c, i) != MT_OK) {
            c->failed = true;
            return MT_EENV;
        }
    mt_status stop = stopped_for_good(c, w, step, NULL); /* (first: Python's order) */
    if (stop != MT_OK) return stop;
    if (c->replay.max_bytes > 0) {
        unsigned followed = c->followed;
        mt_status st = mt_follow_poll(c, false); /* (a look at most once a second) */
        if (st != MT_OK || c->followed != followed) return st;
    }
    mt_send_notice(c, w->started, w->deadline, step, &w->told); /* (before it gives up) */
    return gone(c, w->started, step);
}

/* The wait's end: its looks freed, `st` returned. */
static mt_status done(waiting *w, mt_status st) {
    free(w->looks);
    w->looks = NULL;
    return st;
}

/* The send timeout passed: its error. A receiver that refused the handshake first
 * (MT_EENV), then a stop record saying the trainer stopped for good ("... (send_timeout=T
 * s ended the send)": SendWait.timeout's words), else mt_send_fail's, with EAGAIN. */
static mt_status timed_out(mt_client *c, const uint64_t *step) {
    for (size_t i = 0; i < c->n_endpoints; ++i)
        if (mt_handshake_check(c, i) != MT_OK) {
            c->failed = true;
            return MT_EENV;
        }
    char what[48], t[32], ended[64];
    mt_format_double(c->send_timeout, t);
    snprintf(ended, sizeof ended, "send_timeout=%s s ended the send", t);
    mt_status stop = stop_first(c, step, ended);
    if (stop != MT_OK) return stop;
    what_text(step, what);
    return mt_send_fail(c, EAGAIN, what);
}

mt_status mt_send_sliced(mt_client *c, size_t index, double deadline, mt_try try_, void *arg,
                         const uint64_t *step) {
    unsigned followed = c->followed;
    waiting w = {-1.0, NULL, deadline, false};
    pthread_mutex_lock(&c->mu);
    for (;;) {
        double slice = SLICE_S, now = mt_now();
        if (deadline >= 0 && deadline - now < slice) slice = deadline - now;
        int ms = mt_ms(slice), err = 0;
        if (zmq_setsockopt(c->sockets[index], ZMQ_SNDTIMEO, &ms, sizeof ms) != 0)
            err = errno == EAGAIN ? EINVAL : errno;
        else
            err = try_(c, arg);
        if (err != EAGAIN) {
            pthread_mutex_unlock(&c->mu);
            if (err == 0) return done(&w, MT_OK);
            char what[48];
            what_text(step, what);
            return done(&w, mt_send_fail(c, err, what));
        }
        pthread_mutex_unlock(&c->mu);
        if (deadline >= 0 && mt_now() >= deadline) return done(&w, timed_out(c, step));
        if (w.started < 0) w.started = now; /* (the first slice began then) */
        mt_status st = between(c, &w, step);
        if (st != MT_OK || c->followed != followed) return done(&w, st);
        pthread_mutex_lock(&c->mu);
    }
}

mt_status mt_wait_sent(mt_client *c, double deadline, const uint64_t *step) {
    /* Nothing held (small fields' path, and most calls): one look, no clock read. A look,
     * not mt_wait_held with a deadline passed: that is a condition wait too (a futex call
     * that times out at once, then a wake-up by released(): send.c), which a 1 MB send,
     * its array still held at the look, paid on top of the wait proper (+25% of its
     * thread's CPU time: benchmarks/c_client.py, unit_send.c counts the waits). */
    if (mt_held_none(c)) return MT_OK;
    unsigned followed = c->followed;
    waiting w = {mt_now(), NULL, deadline, false};
    for (;;) {
        double until = mt_now() + SLICE_S;
        if (deadline >= 0 && deadline < until) until = deadline;
        if (mt_wait_held(c, until) == MT_OK) return done(&w, MT_OK);
        if (deadline >= 0 && mt_now() >= deadline) return done(&w, timed_out(c, step));
        mt_status st = between(c, &w, step);
        /* (a follow released the old transport: ZeroMQ let go of every array then) */
        if (st != MT_OK || c->followed != followed) return done(&w, st);
    }
}
