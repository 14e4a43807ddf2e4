/* close_wait.c: how mt_client_close delivers what is left (the batches, the BYE, the
 * arrays ZeroMQ still reads, the handshakes), waiting as the Python client's close does
 * (melissa_trainer/client/closing.py, patience.CloseWait): in slices of SLICE_S seconds,
 * as long as the trainer is there, up to the close timeout *without progress*
 * (melissa_trainer/client/delivery.py): each progress puts the deadline a close timeout
 * from then, a message the socket accepted (a batch, a BYE) or a frame ZeroMQ let go of
 * (c->pending falling: an array sent without a copy, a BYE; c->batches_flying: a batch,
 * outbox.c; c->marks_flying: the marks among small steps sent unbatched, MT_MARK_EVERY's
 * rule, send.c, as delivery.py's). A trainer alive but slow (a
 * resumed one ingesting a replay) is waited for; one stuck, connected but reading
 * nothing, ends the close after the close timeout (`stuck`: the caller says so in the
 * receipt's words). In all, progress moves the deadline no further than
 * MT_CLOSE_CAP_FACTOR close timeouts from the start (`capped`: a trickle, delivery.py's
 * cap, in its words). A close after a failure sends nothing here; one without BYE (a
 * time step left incomplete) waits for no receiver down (close_failed.c).
 *
 * The BYE goes without a copy and is held until ZeroMQ lets go of it (closing.py
 * send_tracked): a socket's messages leave in order, so its release says that everything
 * before it left too, and a BYE stuck in the queue to a dead trainer is seen as such, not
 * only when the linger (the rest of the close timeout) ran out. Between two slices:
 *
 * - a receiver that refused the handshake: MT_EENV naming it (handshake.c), at once;
 * - a receiver disconnected: every receiver's rendezvous file is read for a stop record
 *   (stop_record.c; closing.py's `stopped`): a trainer that ended or failed (its record
 *   complete or not: what was not delivered is in none) is MT_ETIMEDOUT at once, one
 *   that stopped on this simulation's non-finite sample MT_ESIMREFUSED, saying so as
 *   closing.py's stop_first does, the reason first (stop_said.c; no restarted trainer
 *   is waited for);
 * - with a replay window, a rendezvous that names a new run (a restarted trainer; looked
 *   at once a second at most): MT_ETIMEDOUT, c->receipt_restart 1 (the close follows it at
 *   once, follow.c), as the Python close does (patience.py, `seen`);
 * - a receiver disconnected, without a new connection, for the disconnected timeout
 *   (counted from the start of the close's wait at the earliest): MT_ETIMEDOUT naming it,
 *   c->receipt_restart 2 (with a window, the close waits the follow timeout for a
 *   restarted trainer and follows it). It, and the notice below, say "the trainer was
 *   preempted (MESSAGE; its stop record in DIR)" where a stop record of this run says so
 *   (stop_said.c mt_stop_preempted_words; closing.py's `preempted`), not that it died.
 * - a receiver disconnected NOTICE_AFTER seconds (half the disconnected timeout if
 *   shorter), with a BYE: one line on stderr (`tell`) says what the close waits for and
 *   how long in all, as the Python close's warning (closing.py waiting_notice); nothing
 *   more until the close ends.
 *
 * Not thread-safe: the closing thread (the flusher stopped). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "internal.h"
#include "close_wait.h"
#include "restarts_said.h"

#define SLICE_S 0.5     /* (send_wait.c's, melissa_trainer/client/sockets.py SLICE) */
#define RESTART_LOOK 1.0 /* s between two looks at the rendezvous (follow.c's interval) */

/* The state of one close's waits. */
typedef struct waiting {
    double deadline, started, look_due;
    double timeout;   /* the close timeout: how far each progress puts the deadline */
    double cap;       /* the deadline progress cannot pass (< 0: none) */
    bool capped;      /* the cap held the deadline back at the last progress */
    uint64_t pending; /* c->pending at the last look (`progress`) */
    const char *what; /* what is being delivered, for the messages */
    bool bye;         /* a BYE is said (else: a close after a failure) */
    bool expired;     /* the close timeout passed (the caller's message) */
    bool told;        /* its notice said (`tell`: once) */
    bool stuck;       /* expired with every receiver connected, its handshake done */
    mt_stop_look *looks; /* each receiver's rendezvous file, for a stop record */
} waiting;

/* A tracked BYE's buffer let go by ZeroMQ (it left, or was dropped). */
static void bye_released(void *data, void *hint) {
    free(data);
    mt_client *c = hint;
    pthread_mutex_lock(&c->held_mu);
    if (--c->pending == 0) pthread_cond_broadcast(&c->held_cv);
    pthread_mutex_unlock(&c->held_mu);
}

/* One try (c->mu held): 0, or the errno (EAGAIN: nothing sent, tried again). */
typedef int (*try_fn)(mt_client *c, size_t i);

static int try_batches(mt_client *c, size_t i) { return mt_outbox_send(c, i, 0); }

static int try_bye(mt_client *c, size_t i) {
    uint8_t *frame = malloc(28);
    if (frame == NULL) return ENOMEM;
    mt_encode_bye(frame, c->simulation_id, c->rank, c->ranks, c->steps_per_receiver[i]);
    pthread_mutex_lock(&c->held_mu);
    ++c->pending;
    pthread_mutex_unlock(&c->held_mu);
    zmq_msg_t msg;
    if (zmq_msg_init_data(&msg, frame, 28, bye_released, c) != 0) {
        int err = errno;
        bye_released(frame, c);
        return err;
    }
    int rc;
    while ((rc = zmq_msg_send(&msg, c->sockets[i], 0)) < 0 && errno == EINTR) continue;
    if (rc < 0) {
        int err = errno;
        zmq_msg_close(&msg); /* (calls bye_released) */
        return err;
    }
    return 0;
}

/* Whether the rendezvous names another run than the client's (a restarted trainer). */
static bool restarted(mt_client *c, char *run, size_t size) {
    mt_rendezvous rv;
    if (mt_rendezvous_read(c->rendezvous_used, &rv, NULL, false) != MT_OK)
        return false; /* (stopped, being written: not a new run yet) */
    bool other = rv.n != c->n_endpoints || (rv.run_id == NULL) != (c->run_id == NULL) ||
                 (rv.run_id != NULL && strcmp(rv.run_id, c->run_id) != 0);
    for (size_t r = 0; !other && r < rv.n; ++r)
        other = strcmp(rv.endpoints[r], c->endpoints[r]) != 0;
    snprintf(run, size, "%s", rv.run_id != NULL ? rv.run_id : "None");
    mt_rendezvous_free(&rv);
    return other;
}

/* Once, on stderr, what a close waits for on receiver `i`, disconnected since `since`
 * (mt_now()): the words of the Python close's warning (closing.py waiting_notice, with
 * the C setters' names). */
static void tell(mt_client *c, waiting *w, const char *whose, size_t i, double since,
                 double now) {
    w->told = true;
    double from = since > w->started ? since : w->started, left = -1;
    const char *bound = NULL;
    char bt[32], clock[16], capb[128] = "";
    if (c->disconnected_timeout >= 0) {
        left = c->disconnected_timeout - (now - from);
        bound = "mt_set_disconnected_timeout";
        mt_format_double(c->disconnected_timeout, bt);
    }
    if (w->deadline >= 0 && (bound == NULL || w->deadline - now < left)) {
        left = w->deadline - now;
        bound = "mt_set_close_timeout";
        mt_format_double(c->close_timeout, bt);
        /* (the cap held the deadline back: it, not a close timeout past a progress, ends
         * the wait; close_cap.c) */
        if (w->capped) mt_close_cap_bound(capb, sizeof capb, bound, c->close_timeout);
    }
    left = left < 0 ? 0 : left;
    time_t wall = time(NULL) - (time_t)(now - since);
    struct tm tm;
    if (localtime_r(&wall, &tm) == NULL || strftime(clock, sizeof clock, "%H:%M:%S", &tm) == 0)
        snprintf(clock, sizeof clock, "?");
    /* (never: a receiver down now was never connected, closing.py's `never`; named with
     * every one down, as Python's "at E1, E2 (tried since ...)") */
    mt_buf down = {0};
    bool never = false;
    for (size_t k = 0; k < c->n_endpoints; ++k) {
        if (mt_handshake_down_since(c, k) < 0) continue;
        mt_buf_printf(&down, "%s%s", down.len > 0 ? ", " : "", c->endpoints[k]);
        if (!c->handshakes[k].ever && strncmp(c->endpoints[k], "inproc:", 7) != 0) never = true;
    }
    /* (a close gives a receiver its timeout from its start: said when it went down before) */
    char of[48] = "";
    if (since < w->started - 0.5)
        snprintf(of, sizeof of, ", %.0f s of them in this wait", now - w->started);
    const char *what = never ? "connect" : "reconnect"; /* (never connected: no "re") */
    mt_buf b = {0};
    char cause[MT_CAUSE_SIZE] = "the trainer died or stopped, or its node";
    /* (its record says preempted? then a resume is waited for: closing.py's `resumed`) */
    bool resumed = !never && mt_stop_preempted_words(c, cause, sizeof cause);
    if (never)
        mt_buf_printf(&b, "%s: closing, no receiver ever accepted a connection at %s (tried "
                          "since %s): check the endpoint (the trainer's rank_N.json) or start "
                          "the trainer first. ", whose, down.oom ? "?" : down.data, clock);
    else
        mt_buf_printf(&b,
                      "%s: closing, the trainer's receiver at %s is disconnected since %s "
                      "(%.0f s%s: %s): %llu time step(s) were sent to it; what ZeroMQ still "
                      "holds of them and the BYE are not delivered. ",
                      whose, c->endpoints[i], clock, now - since, of,
                      cause,
                      (unsigned long long)c->steps_per_receiver[i]);
    /* (the follow's words, and the settings that shorten the wait: the receipt
     * notice's, close_notice.c, one implementation of gave_up.py waits_for) */
    char bounded[160] = "";
    if (capb[0])
        snprintf(bounded, sizeof bounded, "%s", capb);
    else if (bound != NULL)
        snprintf(bounded, sizeof bounded, "%s=%s s", bound, bt);
    bool window = c->replay.max_bytes > 0 && c->rendezvous_used != NULL;
    mt_waits_for(&b, bound == NULL ? -1 : left, bounded, what,
                 window ? c->rendezvous_used : "", window, c->follow_timeout,
                 now - w->started, resumed);
    if (!b.oom) fprintf(stderr, "melissa_trainer: mt_client_close: %s\n", b.data);
    free(b.data);
    free(down.data);
}

/* Between two slices (module comment): MT_OK to wait on, else the close's error. */
static mt_status between(mt_client *c, waiting *w) {
    char whose[96];
    snprintf(whose, sizeof whose, "simulation %llu rank %d",
             (unsigned long long)c->simulation_id, c->rank);
    for (size_t i = 0; i < c->n_endpoints; ++i)
        if (mt_handshake_check(c, i) != MT_OK) return MT_EENV;
    double now = mt_now();
    bool window = c->replay.max_bytes > 0 && c->rendezvous_used != NULL;
    char run[80];
    if (window && now >= w->look_due) {
        w->look_due = now + RESTART_LOOK;
        if (restarted(c, run, sizeof run)) {
            c->receipt_restart = 1;
            return mt_fail(c, MT_ETIMEDOUT,
                           "%s: %s not delivered: the trainer was restarted (the rendezvous %s "
                           "now names run %s) before it took them. What it sent after the "
                           "trainer's last checkpoint may be lost: run it again, with the same "
                           "simulation id (MELISSA_TRAINER_SIMULATION_ID=%llu): the resumed "
                           "trainer keeps the steps it holds and takes the others, each once",
                           whose, w->what, c->rendezvous_used, run,
                           (unsigned long long)c->simulation_id);
        }
    }
    bool down = false;
    mt_buf gone = {0}; /* (the disconnected ones: whose messages were not delivered) */
    for (size_t i = 0; i < c->n_endpoints; ++i) {
        if (mt_handshake_down_since(c, i) < 0) continue;
        mt_buf_printf(&gone, "%s%s", down ? ", " : "", c->endpoints[i]);
        down = true;
    }
    /* While one is down, every receiver's record (closing.py: StopRecords.for_good): the
     * receivers are one trainer's, whose every record says why it stopped (one killed
     * writes none), and what was not delivered is in none (complete or not). */
    for (size_t r = 0; down && c->rendezvous_used != NULL && w->looks != NULL &&
                       r < c->n_endpoints; ++r) { /* (a stat of each while unchanged) */
        mt_stop_said *s = calloc(1, sizeof *s); /* (16 KiB: its reason's message whole) */
        if (s == NULL || gone.oom) {
            free(s);
            free(gone.data);
            return mt_fail(c, MT_ENOMEM, "out of memory");
        }
        /* (the steps sent there: the count held said only of those, gave_up.taken_of) */
        mt_stop_sent sent = mt_stop_sent_of(c, r, c->n_endpoints, c->steps_per_receiver[r]);
        mt_restarts_said_load(c, r, &w->looks[r]); /* (once per client: restarts_said.h) */
        mt_stop_outcome o = mt_stop_record_for_good(c->rendezvous_used, r, c->endpoints[r],
                                                    c->run_id, c->simulation_id, &sent,
                                                    &w->looks[r], s);
        mt_restarts_said_keep(c, r, &w->looks[r]);
        mt_status st = MT_OK;
        if (o == MT_STOP_ENDED && w->bye && mt_stop_all_taken(c)) { /* (stop_said.c) */
            free(s);
            free(gone.data);
            c->taken_all = true; /* (the receipts confirm it, warned: mt_close_deliver) */
            return MT_ETIMEDOUT;
        }
        if (o == MT_STOP_REFUSED || o == MT_STOP_ENDED) /* (the reason first) */
            st = mt_stop_record_undelivered(c, o, s, r, c->endpoints[r], gone.data, w->what,
                                            w->bye);
        free(s);
        if (o == MT_STOP_REFUSED || o == MT_STOP_ENDED) {
            free(gone.data);
            return st;
        }
    }
    free(gone.data);
    if (!w->bye) /* (none down waited for, nor a peer not a receiver: close_failed.c) */
        return mt_close_unwaited(c, whose, w->what);
    for (size_t i = 0; i < c->n_endpoints; ++i) {
        double since = mt_handshake_down_since(c, i);
        if (since < 0) continue;
        double from = since > w->started ? since : w->started;
        double after = mt_notice_after(c->disconnected_timeout); /* (close_notice.c) */
        if (w->bye && !w->told && now - from >= after) tell(c, w, whose, i, since, now);
        if (c->disconnected_timeout < 0 || now - from <= c->disconnected_timeout) continue;
        char t[32], never[600];
        mt_format_double(c->disconnected_timeout, t);
        mt_handshake_never(c, never, sizeof never);
        c->receipt_restart = 2;
        if (!c->handshakes[i].ever) /* (nothing died: no connection was ever made) */
            return mt_fail(c, MT_ETIMEDOUT, "%s: %s not delivered to %s: the receiver is "
                                            "unreachable, tried for %.0f s "
                                            "(mt_set_disconnected_timeout=%s s): %s",
                           whose, w->what, c->endpoints[i], now - since, t, never);
        char of[64] = ""; /* (a close counts from its start: said when it went down before) */
        char cause[MT_CAUSE_SIZE]; /* (preempted, its record says? else mt_gone_cause) */
        snprintf(cause, sizeof cause, "%s", mt_gone_cause(c, i));
        mt_stop_preempted_words(c, cause, sizeof cause);
        if (since < w->started - 0.5)
            snprintf(of, sizeof of, ", counted from this close's start %.0f s ago",
                     now - w->started);
        return mt_fail(c, MT_ETIMEDOUT,
                       "%s: %s not delivered to %s: the receiver is unreachable, disconnected "
                       "for %.0f s without a new connection (mt_set_disconnected_timeout=%s s%s; "
                       "%s)%s%s. What it sent after the trainer's "
                       "last checkpoint may be lost: once a trainer runs there again (a "
                       "preempted one: --resume_from_checkpoint latest), run it again with the "
                       "same simulation id (MELISSA_TRAINER_SIMULATION_ID=%llu): the trainer "
                       "takes the steps it lacks, each once",
                       whose, w->what, c->endpoints[i], now - since, t, of, cause,
                       never[0] ? "; " : "",
                       never,
                       (unsigned long long)c->simulation_id);
    }
    return MT_OK;
}

/* Whether the delivery progressed since the last look (`accepted`: a try just queued a
 * message; else c->pending fell): if so, the deadline is put a close timeout from now. */
static void progress(mt_client *c, waiting *w, bool accepted) {
    uint64_t pending = 0;
    if (c->held_init) {
        pthread_mutex_lock(&c->held_mu);
        pending = c->pending + c->batches_flying + c->marks_flying;
        pthread_mutex_unlock(&c->held_mu);
    }
    bool moved = accepted || pending < w->pending;
    w->pending = pending;
    double until = mt_now() + w->timeout;
    /* (a close after a failure stays bounded in all, as the Python one: delivery.py) */
    if (!moved || !w->bye || w->deadline < 0) return;
    w->deadline = mt_close_capped(w->deadline, until, w->cap, &w->capped); /* (close_cap.c) */
}

static mt_status expired(mt_client *c, waiting *w) {
    w->expired = true;
    bool all = c->handshakes != NULL; /* (connected, handshake done: it is not reading) */
    for (size_t i = 0; all && i < c->n_endpoints; ++i)
        all = c->handshakes[i].state == MT_HANDSHAKE_OK && c->handshakes[i].ever &&
              mt_handshake_down_since(c, i) < 0;
    w->stuck = all;
    return MT_ETIMEDOUT;
}

/* try_(c, i) in slices until done: MT_OK, MT_ETIMEDOUT with no message (the deadline:
 * the caller's), or the error of `between` or ZeroMQ's. */
static mt_status sliced(mt_client *c, waiting *w, size_t i, try_fn try_) {
    for (;;) {
        double slice = SLICE_S, now = mt_now();
        if (w->deadline >= 0 && w->deadline - now < slice) slice = w->deadline - now;
        int ms = mt_ms(slice), err;
        pthread_mutex_lock(&c->mu);
        if (zmq_setsockopt(c->sockets[i], ZMQ_SNDTIMEO, &ms, sizeof ms) != 0)
            err = errno == EAGAIN ? EINVAL : errno;
        else
            err = try_(c, i);
        pthread_mutex_unlock(&c->mu);
        if (err != 0 && err != EAGAIN) return mt_send_fail(c, err, w->what);
        progress(c, w, err == 0);
        if (err == 0) return MT_OK;
        if (w->deadline >= 0 && mt_now() >= w->deadline) return expired(c, w);
        mt_status st = between(c, w);
        if (st != MT_OK) return st;
    }
}

mt_status mt_close_deliver(mt_client *c, bool bye, double *deadline, const char **failure,
                           bool *stuck, bool *capped) {
    *failure = NULL;
    *stuck = *capped = false;
    c->receipt_restart = 0;
    double cap = *deadline < 0 ? -1.0 : mt_close_cap(c); /* (from c->close_began) */
    waiting w = {*deadline, mt_now(), mt_now() + RESTART_LOOK, c->close_timeout, cap, false,
                 0, "batched data", bye, false, false, false, NULL};
    progress(c, &w, false); /* (what is pending now: the first look) */
    w.looks = calloc(c->n_endpoints, sizeof *w.looks); /* (NULL: no record read) */
    mt_status st = MT_OK;
    for (size_t i = 0; st == MT_OK && i < c->n_endpoints; ++i)
        st = sliced(c, &w, i, try_batches);
    if (st == MT_OK && bye) w.what = "BYE";
    for (size_t i = 0; st == MT_OK && bye && i < c->n_endpoints; ++i)
        st = sliced(c, &w, i, try_bye);
    if (st == MT_OK) w.what = "queued messages";
    while (st == MT_OK) { /* (the BYE's release: all before it left) */
        double until = mt_now() + SLICE_S;
        if (w.deadline >= 0 && w.deadline < until) until = w.deadline;
        if (mt_wait_held(c, until) == MT_OK) break;
        progress(c, &w, false); /* (an array or a BYE let go of: written to the connection) */
        st = w.deadline >= 0 && mt_now() >= w.deadline ? expired(c, &w) : between(c, &w);
    }
    while (st == MT_OK) { /* (the linger starts once every receiver accepted) */
        double until = mt_now() + SLICE_S;
        if (w.deadline >= 0 && w.deadline < until) until = w.deadline;
        st = mt_handshake_wait(c, until, !bye);
        if (st != MT_ETIMEDOUT) break;
        st = w.deadline >= 0 && mt_now() >= w.deadline ? expired(c, &w) : between(c, &w);
    }
    free(w.looks);
    *deadline = w.deadline; /* (moved by progress: the linger is what is left of it) */
    if (c->taken_all) return MT_OK; /* (not delivered, nothing lost: the receipts say so) */
    if (st == MT_ETIMEDOUT && w.expired) {
        *failure = w.what; /* (the deadline: the caller says "not delivered within ...") */
        *stuck = w.stuck && bye;
        *capped = w.capped && bye;
        return MT_OK;
    }
    if (st != MT_OK) *failure = "";
    return st;
}
