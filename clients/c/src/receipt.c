/* receipt.c: a close that returns only once the trainer has this rank's BYE, asked at
 * mt_client_close (docs/protocol.md, section 17b; melissa_trainer/client/confirm.py and
 * receipts.py, whose rules and messages these are; the following of a restarted trainer
 * is follow.c's, which the close calls on c->receipt_restart).
 *
 * PUSH/PULL acknowledges nothing: a BYE released by ZeroMQ has left the solver, not
 * reached the trainer. A trainer killed (SIGKILL, a preempted job) while the BYE and the
 * last steps wait in its queues never had them, and a solver that returned MT_OK
 * meanwhile cannot send them again: silent loss. So in external mode (endpoints from a
 * rendezvous, MELISSA_TRAINER_ATTEMPT unset), when every receiver's rendezvous file lists
 * 13 in "follow_kinds", the close asks each follow socket a RECEIPT_QUERY once its
 * sockets are closed, and returns MT_OK only once each one confirmed that it ingested this
 * rank's BYE with the count it carried (or that the simulation finished there): a
 * receiver reads one connection's messages in order, so it then has all this rank sent.
 *
 * Outcomes: refused (its HELLO): MT_ESIMREFUSED with the reason; "not yet" (a full buffer:
 * back-pressure; the receiver holds the query up to 0.5 s) is asked again, with growing
 * pauses, as long as it makes progress (the steps its answers say it holds grow: a
 * trainer ingesting at its sample-to-insert pace, a resumed one taking a replay), and up
 * to the close timeout without progress (mt_set_close_timeout, counted from the question
 * and from each progress), then MT_ETIMEDOUT (receipts.py `unconfirmed`'s words), and at
 * most MT_CLOSE_CAP_FACTOR close timeouts from the close's start in all (close_cap.c:
 * one budget with the delivery; its words past it); a receiver silent with no connection
 * to its follow socket (its monitor says so: receipt_wire.c) for the disconnected timeout
 * (mt_set_disconnected_timeout) is gone (said once, before: close_notice.c), and a
 * rendezvous rewritten by a new run (a restarted trainer) is followed only with a replay
 * window (c->receipt_restart set, follow.c): else both MT_ETIMEDOUT, saying that the
 * steps may be lost and to run the simulation again with the same
 * MELISSA_TRAINER_SIMULATION_ID. A confirmed receipt also says how many samples
 * the trainer refused as non-finite: a warning on stderr, MT_ESIMREFUSED if all were.
 * A malformed reply is ignored (counted in the timeout's message). The words of a close
 * that gives up on its receipts: receipt_gave_up.c. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "internal.h"
#include "receipt_wire.h"
#include "close_wait.h"
#include "restarts_said.h"
#include "receipt_gave_up.h"

#define ROUND_TIMEOUT 2.0 /* s: a query unanswered that long is asked again (a receiver
                           * answers within its 0.5 s hold; a lost query is not waited on) */
#define PAUSE_FIRST 0.01
#define PAUSE_MOST 0.5

static void nap(double seconds) {
    if (seconds <= 0) return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
}

/* One receiver asked. */
typedef struct peer {
    void *s, *monitor;
    bool linked;       /* a TCP connection to its follow socket, as its monitor said last */
    double heard;      /* when it last answered, or was seen connected */
    uint64_t asked;    /* the request id awaiting its answer (0: none) */
    double asked_at;
    bool done;         /* confirmed */
    uint64_t steps, nonfinite, bye_steps;
    int64_t held;      /* the most steps its answers said it holds (-1: none yet) */
    int bye;
    mt_stop_look look; /* its rendezvous file, for a stop record (stop_record.c) */
} peer;

/* The round's state shared by its steps. */
typedef struct asking {
    mt_client *c;
    const mt_rendezvous *rv;
    const uint64_t *bye_steps;
    peer *peers;
    uint64_t request_id;
    unsigned bad;
    const char *bad_last;
    uint8_t *buf;
    bool progressed;   /* since the last look: a receiver holds more steps, or confirmed */
    bool told;         /* its notice said (close_notice.c: once, before it gives up) */
} asking;

static const size_t BUF_CAP = RECEIPT_HEAD + MAX_REASON_BYTES + 64;

/* Ask each receiver not done and not awaiting an answer (or awaiting one too long). */
static void ask_round(asking *a) {
    mt_client *c = a->c;
    for (size_t r = 0; r < a->rv->n; ++r) {
        peer *p = &a->peers[r];
        if (p->done || (p->asked != 0 && mt_now() - p->asked_at < ROUND_TIMEOUT)) continue;
        uint8_t query[QUERY_FIXED + MAX_RUN_ID];
        uint64_t id = ++a->request_id;
        size_t n = mt_receipt_query(query, c->simulation_id, id, a->bye_steps[r], c->rank,
                                    c->ranks, c->run_id);
        if (zmq_send(p->s, query, n, ZMQ_DONTWAIT) == (int)n) { /* (else: asked next round) */
            p->asked = id;
            p->asked_at = mt_now();
        }
    }
}

/* Read the answers that came within `until`: MT_OK, or MT_ESIMREFUSED (a receiver refused
 * the simulation). */
static mt_status collect(asking *a, double until) {
    size_t n = a->rv->n;
    zmq_pollitem_t *items = calloc(n, sizeof *items);
    if (items == NULL) return mt_fail(a->c, MT_ENOMEM, "out of memory");
    mt_status st = MT_OK;
    for (;;) {
        size_t waiting = 0;
        for (size_t r = 0; r < n; ++r) {
            items[r] = (zmq_pollitem_t){a->peers[r].s, 0, ZMQ_POLLIN, 0};
            waiting += !a->peers[r].done && a->peers[r].asked != 0;
        }
        double left = until - mt_now();
        if (waiting == 0 || left <= 0) break;
        int ready = zmq_poll(items, (int)n, mt_ms(left) + 1);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) break;
        for (size_t r = 0; r < n && st == MT_OK; ++r) {
            peer *p = &a->peers[r];
            size_t len = 0;
            int frames = 0;
            if (!(items[r].revents & ZMQ_POLLIN)) continue;
            if (mt_follow_receive(p->s, a->buf, BUF_CAP, &len, &frames) != 0) continue;
            mt_receipt got;
            const char *why = frames != 1 ? "unexpected_frame"
                              : p->asked == 0 ? "bad_request_id"
                                              : mt_receipt_parse(a->buf, len, a->c->simulation_id,
                                                                 p->asked, (uint32_t)r,
                                                                 (uint32_t)n, &got);
            if (why != NULL) { /* counted and ignored */
                a->bad++;
                a->bad_last = why;
                continue;
            }
            p->asked = 0;
            p->heard = mt_now();
            if (p->held >= 0 && (uint64_t)p->held < got.steps) a->progressed = true;
            if (p->held < 0 || (uint64_t)p->held < got.steps) p->held = (int64_t)got.steps;
            int decided = mt_receipt_decides(&got, a->bye_steps[r]);
            if (decided < 0) {
                char reason[MAX_REASON_BYTES + 1];
                snprintf(reason, sizeof reason, "%.*s", (int)got.reason_len, got.reason);
                st = mt_admission_refused(a->c, r, a->rv->endpoints[r], reason);
            } else if (decided > 0) {
                p->done = true;
                a->progressed = true;
                p->steps = got.steps, p->nonfinite = got.nonfinite;
                p->bye = got.bye, p->bye_steps = got.bye_steps;
            }
        }
        if (st != MT_OK) break;
    }
    free(items);
    return st;
}

/* Whether the rendezvous now names another run than the one streamed to (its run id, or
 * its endpoints): a trainer restarted. Read as it stands, stopped or not; one not
 * complete (being rewritten) is not taken for one: the receivers' silence decides. */
static bool rewritten(mt_client *c, const mt_rendezvous *mine, char *run, size_t size) {
    mt_rendezvous now;
    if (mt_rendezvous_read(c->rendezvous_used, &now, NULL, true) != MT_OK)
        return false;
    bool other = now.n != mine->n ||
                 (now.run_id == NULL) != (c->run_id == NULL) ||
                 (now.run_id != NULL && strcmp(now.run_id, c->run_id) != 0);
    for (size_t r = 0; !other && r < now.n; ++r)
        other = strcmp(now.endpoints[r], mine->endpoints[r]) != 0;
    snprintf(run, size, "%s", now.run_id != NULL ? now.run_id : "None");
    mt_rendezvous_free(&now);
    return other;
}

/* What the confirmed receipts tell (confirm.py report): samples refused as non-finite
 * (a warning; MT_ESIMREFUSED if every one was), steps lost on the way (a warning). */
static mt_status report(asking *a, const char *whose) {
    mt_client *c = a->c;
    uint64_t steps = 0, nonfinite = 0;
    for (size_t r = 0; r < a->rv->n; ++r)
        steps += a->peers[r].steps, nonfinite += a->peers[r].nonfinite;
    static const char fix[] =
        "NaN or Inf in its fields (the trainer's receivers refuse such samples: "
        "nonfinite='refuse'): fix the solver (a diverging scheme: a smaller time step?), "
        "or let the trainer take them with ReceiverConfig(nonfinite='accept') if the "
        "loss handles them";
    if (nonfinite > 0 && nonfinite >= steps)
        return mt_fail(c, MT_ESIMREFUSED, "%s: the trainer refused all %llu samples of this "
                                          "simulation as non-finite, and trained on none: %s",
                       whose, (unsigned long long)nonfinite, fix);
    if (nonfinite > 0)
        fprintf(stderr, "melissa_trainer: mt_client_close: %s: the trainer refused %llu of the "
                        "%llu samples of this simulation as non-finite: %s\n",
                whose, (unsigned long long)nonfinite, (unsigned long long)steps, fix);
    for (size_t r = 0; c->ranks == 1 && r < a->rv->n; ++r) {
        const peer *p = &a->peers[r];
        if (p->bye == MT_RECEIPT_BYE && p->steps < a->bye_steps[r])
            fprintf(stderr, "melissa_trainer: mt_client_close: %s: the trainer's receiver %zu "
                            "has %llu of the %llu steps this simulation sent it (the others "
                            "were lost on the way): run it again with the same simulation "
                            "id, the trainer takes the missing ones once\n",
                    whose, r, (unsigned long long)p->steps,
                    (unsigned long long)a->bye_steps[r]);
    }
    return MT_OK;
}

/* A receiver that stopped answers from its stop record (stop_record.c; confirm.py's
 * StopRecords, whose messages these are): confirmed (done), MT_ESIMREFUSED (the trainer
 * stopped on this simulation's non-finite sample), MT_ETIMEDOUT (it ended or failed
 * without this BYE); MT_OK otherwise. */
static mt_status from_records(asking *a, const char *whose) {
    mt_client *c = a->c;
    for (size_t r = 0; r < a->rv->n; ++r) {
        peer *p = &a->peers[r];
        if (p->done) continue;
        mt_stop_said s;
        memset(&s, 0, sizeof s);
        mt_stop_sent sent = mt_stop_sent_of(c, r, a->rv->n, a->bye_steps[r]);
        /* (r: the client's endpoint r as well, `mine` being its endpoints, close.c; its
         * flags freed as they change: handshake.c mt_handshake_release) */
        mt_restarts_said_load(c, r, &p->look); /* (once per client: restarts_said.h) */
        mt_stop_outcome o = mt_stop_record_decide(c->rendezvous_used, r, a->rv->endpoints[r],
                                                  c->run_id, c->simulation_id, c->rank, &sent,
                                                  &p->look, &s);
        mt_restarts_said_keep(c, r, &p->look);
        if (o == MT_STOP_CONFIRMED) {
            if (s.taken) mt_stop_taken_warning(c, &s, r, a->rv->endpoints[r], whose);
            p->done = true;
            p->steps = s.steps, p->nonfinite = s.nonfinite, p->bye = s.bye;
            p->bye_steps = s.bye_steps;
        } else if (o != MT_STOP_UNDECIDED) {
            return mt_stop_record_fail(c, o, &s, r, a->rv->endpoints[r], whose);
        }
    }
    return MT_OK;
}

/* Until every receiver confirmed, one refused, is gone, the run changed or the deadline. */
static mt_status wait_receipts(asking *a, const char *whose) {
    mt_client *c = a->c;
    size_t n = a->rv->n;
    double timeout = c->close_timeout, gone_after = c->disconnected_timeout;
    double deadline = timeout < 0 ? INFINITY : mt_now() + timeout;
    double cap = mt_close_cap(c); /* (one budget for the whole close: close_cap.c) */
    bool capped = false; /* (the cap held the deadline back: the message says so) */
    if (timeout >= 0) deadline = mt_close_capped(-INFINITY, deadline, cap, &capped);
    double pause = PAUSE_FIRST, began = mt_now();
    for (;;) {
        mt_status said = from_records(a, whose);
        if (said != MT_OK) return said;
        size_t confirmed = 0;
        for (size_t r = 0; r < n; ++r) confirmed += a->peers[r].done;
        if (confirmed == n) return report(a, whose);
        ask_round(a);
        double until = mt_now() + ROUND_TIMEOUT;
        mt_status st = collect(a, until < deadline ? until : deadline);
        if (st != MT_OK) return st;
        double now = mt_now();
        if (a->progressed && timeout >= 0) /* (it bounds a wait without progress) */
            deadline = mt_close_capped(deadline, now + timeout, cap, &capped);
        a->progressed = false;
        size_t done = 0, silent = n, waiting = 0, quiet = n;
        for (size_t r = 0; r < n; ++r) {
            peer *p = &a->peers[r];
            p->linked = mt_receipt_linked_now(p->monitor, p->linked);
            if (p->linked) p->heard = now; /* (its process is there: paused, not gone) */
            done += p->done;
            if (!p->done && gone_after >= 0 && now - p->heard > gone_after && silent == n)
                silent = r;
            if (!p->done && now - p->heard >= mt_notice_after(gone_after) && quiet == n) quiet = r;
        }
        if (quiet < n && !a->told && (a->told = true)) /* (receipts.py: `silent` is quieter) */
            mt_receipt_notice(c, whose, quiet, a->rv->follows[quiet], a->peers[quiet].heard,
                              deadline, capped, began);
        if (done == n) return report(a, whose);
        char run[80];
        if (rewritten(c, a->rv, run, sizeof run)) {
            c->receipt_restart = 1; /* (followed with a window: follow.c) */
            return mt_receipt_restarted(c, whose, run);
        }
        if (silent < n) {
            c->receipt_restart = 2; /* (followed with a window: follow.c) */
            return mt_receipt_silent(c, whose, silent, a->rv->endpoints[silent]);
        }
        if (now >= deadline) {
            char list[256] = "";
            size_t used = 0;
            uint64_t sent = 0, have = 0;
            for (size_t r = 0; r < n && used < sizeof list; ++r) {
                const peer *p = &a->peers[r];
                if (p->done) continue;
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%zu",
                                         waiting++ ? ", " : "", r);
                uint64_t held = p->held < 0 ? 0 : (uint64_t)p->held;
                sent += a->bye_steps[r];
                have += held < a->bye_steps[r] ? held : a->bye_steps[r];
            }
            return mt_receipt_unconfirmed(c, whose, list, have, sent, a->bad, a->bad_last, capped);
        }
        double left = deadline - mt_now();
        nap(pause < left ? pause : left);
        pause = pause * 2 < PAUSE_MOST ? pause * 2 : PAUSE_MOST;
    }
}

mt_status mt_receipt_check(mt_client *c, const mt_rendezvous *rv, const uint64_t *bye_steps) {
    size_t n = rv->n;
    char whose[96];
    snprintf(whose, sizeof whose, "simulation %llu rank %d", (unsigned long long)c->simulation_id,
             c->rank);
    asking a = {c, rv, bye_steps, calloc(n, sizeof(peer)), 0, 0, NULL, malloc(BUF_CAP),
                false, false};
    void *ctx = zmq_ctx_new();
    mt_status st = MT_OK;
    if (a.peers == NULL || a.buf == NULL || ctx == NULL)
        st = mt_fail(c, MT_ENOMEM, "out of memory (the close's receipt)");
    double now = mt_now();
    for (size_t r = 0; st == MT_OK && r < n; ++r) {
        char address[96];
        snprintf(address, sizeof address, "inproc://mt-receipt-%p-%zu", (void *)c, r);
        peer *p = &a.peers[r];
        p->heard = now;
        p->held = -1;
        p->s = mt_follow_dial(ctx, rv->follows[r], rv->keys[r], address, &p->monitor,
                              c->disconnected_timeout);
        if (p->s == NULL)
            st = mt_fail(c, MT_EZMQ, "the close's receipt: cannot ask the trainer's receiver %zu "
                                     "(follow socket %s): %s", r, rv->follows[r],
                         zmq_strerror(errno));
    }
    if (st == MT_OK) st = wait_receipts(&a, whose);
    for (size_t r = 0; a.peers != NULL && r < n; ++r) {
        if (a.peers[r].s != NULL) zmq_socket_monitor(a.peers[r].s, NULL, 0);
        if (a.peers[r].monitor != NULL) zmq_close(a.peers[r].monitor);
        if (a.peers[r].s != NULL) zmq_close(a.peers[r].s);
    }
    if (ctx != NULL) {
        while (zmq_ctx_term(ctx) != 0 && errno == EINTR) continue;
    }
    free(a.peers);
    free(a.buf);
    return st;
}
