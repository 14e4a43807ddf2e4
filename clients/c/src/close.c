/* close.c: the close (mt_close_as: mt_client_close and mt_client_fail, fail.c) and the
 * abort; mt_client_start and the release of what it acquires: lifecycle.c. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "follow.h"
#include "close_wait.h"

/* Python's repr of the endpoint list, for messages. */
static void endpoint_list(const mt_client *c, char *out, size_t size) {
    size_t used = (size_t)snprintf(out, size, "[");
    for (size_t i = 0; i < c->n_endpoints && used < size; ++i)
        used += (size_t)snprintf(out + used, size - used, "%s'%s'", i ? ", " : "",
                                 c->endpoints[i]);
    if (used < size) snprintf(out + used, size - used, "]");
}

static void free_client(mt_client *c) {
    mt_release_runtime(c, 0);
    free(c->watch.refused);
    mt_replay_free(&c->replay); /* (these two outlive the transport: a close follows) */
    mt_stepset_free(&c->steps);
    mt_rerun_drop(c); /* (a launched rerun's answers: rerun.c) */
    mt_predict_free(c);
    free(c->endpoints_arg);
    free(c->rendezvous_dir);
    free(c->curve_key_arg);
    free(c->rendezvous_used);
    free(c->run_id);
    for (size_t i = 0; i < c->n_params; ++i) free(c->params[i].name);
    free(c->params);
    for (size_t i = 0; i < c->n_fields; ++i) free(c->fields[i].name);
    free(c->fields);
    mt_clear_error(c);
    free(c);
}

mt_status mt_close_as(mt_client *c, bool failing, char *message, size_t size) {
    if (message != NULL && size > 0) message[0] = '\0';
    if (c == NULL) return MT_EINVAL;
    mt_clear_error(c);
    mt_status st = MT_OK;
    if (!c->started) {
        free_client(c);
        return MT_OK;
    }
    bool bye = !failing; /* (mt_client_fail: what was sent delivered, no BYE: fail.c) */
    if (c->failed) {
        st = mt_fail(c, MT_ESTATE, "the client failed earlier (a send timed out or ZeroMQ "
                                   "failed): closed without BYE, as mt_client_abort does");
        bye = false;
    } else if (!failing && c->step_open && c->step_missing > 0) {
        char missing[512] = "";
        size_t used = 0;
        for (size_t i = 0; i < c->n_fields && used < sizeof missing; ++i)
            if (!c->fields[i].sent && c->fields[i].count > 0)
                used += (size_t)snprintf(missing + used, sizeof missing - used, "%s'%s'",
                                         used ? ", " : "", c->fields[i].name);
        st = mt_fail(c, MT_EFIELD, "closed with time step %llu incomplete: field(s) %s missing; "
                                   "no BYE sent (the run did not finish)",
                     (unsigned long long)c->step, missing);
        bye = false;
    }
    if (bye && !c->failed) { /* a trainer restarted since the last look: followed first */
        mt_status fs = mt_follow_poll(c, true);
        if (fs != MT_OK) st = fs, bye = false; /* (c->failed: nothing more is sent) */
    }
    for (;;) { /* (once, unless a restarted trainer is followed) */
        const char *setting; /* (failed_close_timeout's without BYE: close_failed.c) */
        double timeout = mt_close_bound(c, bye, &setting);
        c->close_began = mt_now(); /* (the cap's start, close_cap.c: a followed trainer's anew) */
        double deadline = timeout < 0 ? -1.0 : c->close_began + timeout;
        const char *failure = NULL;
        bool stuck = false; /* (expired, every receiver connected: none reading) */
        bool capped = false; /* (expired at the cap, with progress: close_wait.c) */
        mt_outbox_stop_flusher(c); /* what it held is sent here */
        /* (in slices: a trainer dead, restarted or stopped is noticed as it happens, not at
         * the close timeout, close_wait.c; after a failure nothing is sent nor waited for:
         * linger 0 drops what is queued) */
        mt_status first = st; /* (a time step incomplete: its delivery's failure said too) */
        char *said = first != MT_OK && !c->failed ? strdup(mt_client_error(c)) : NULL;
        if (said != NULL) st = MT_OK;
        if (!c->failed) {
            mt_status ds = mt_close_deliver(c, bye, &deadline, &failure, &stuck, &capped);
            if (ds != MT_OK && st == MT_OK) st = ds;
        }
        int linger = 0; /* a failure drops what is left */
        if (failure == NULL && !c->failed && !c->taken_all) { /* (taken: nothing to linger) */
            double left = deadline - mt_now();
            linger = timeout < 0 ? -1 : mt_ms(left);
        }
        double started = mt_now();
        char endpoints[512];
        endpoint_list(c, endpoints, sizeof endpoints);
        /* whether the trainer took this simulation is asked once all was delivered (the
         * sockets closed): their endpoints kept for it */
        char **asked = NULL;
        size_t n_asked = 0;
        mt_rendezvous mine = {0}; /* (the receipt's: the receivers streamed to, their counts) */
        uint64_t *bye_steps = NULL;
        if (bye && st == MT_OK && failure == NULL && !c->failed && mt_admission_wanted(c)) {
            if (c->receipts) {
                bye_steps = malloc(c->n_endpoints * sizeof *bye_steps);
                mine.receipts = calloc(c->n_endpoints, sizeof *mine.receipts);
                mine.run_id = c->run_id != NULL ? strdup(c->run_id) : NULL;
                if (bye_steps == NULL || mine.receipts == NULL || (c->run_id && !mine.run_id)) {
                    free(bye_steps), free(mine.receipts), free(mine.run_id);
                    bye_steps = NULL;
                    st = mt_fail(c, MT_ENOMEM, "out of memory");
                } else { /* (moved: mt_release_runtime frees what c holds) */
                    memcpy(bye_steps, c->steps_per_receiver, c->n_endpoints * sizeof *bye_steps);
                    mine.n = c->n_endpoints;
                    mine.endpoints = c->endpoints, mine.keys = c->curve_keys;
                    mine.follows = c->follows;
                    c->endpoints = NULL, c->curve_keys = NULL, c->follows = NULL;
                }
            } else {
                asked = c->endpoints; /* (moved: mt_release_runtime frees what c holds) */
                n_asked = c->n_endpoints;
                c->endpoints = NULL;
            }
        }
        char never[600]; /* (read before the monitors go: a wrong endpoint, said) */
        mt_handshake_never(c, never, sizeof never);
        mt_release_runtime(c, linger);
        /* ZeroMQ drops what the linger period did not deliver, and says nothing; a termination
         * that took the whole period is the sign of it. */
        double elapsed = mt_now() - started;
        if (failure == NULL && linger > 0 && elapsed >= 0.95 * linger / 1000.0)
            failure = "queued messages";
        if (failure != NULL && st == MT_OK) {
            char t[32];
            if (timeout < 0) snprintf(t, sizeof t, "None");
            else mt_format_double(timeout, t);
            char why[700]; /* (no progress: the receipt's words, receipt.c; delivery.py's) */
            if (capped) { /* (delivery.py capped_words, word for word: close_cap.c) */
                mt_close_capped_words(why, sizeof why, c->simulation_id);
                st = mt_fail(c, MT_ETIMEDOUT, "simulation %llu rank %d: %s not delivered "
                             "within %d x close_timeout=%s s in all to %s: %s",
                             (unsigned long long)c->simulation_id, c->rank, failure,
                             MT_CLOSE_CAP_FACTOR, t, endpoints, why);
            } else if (stuck && !never[0])
                snprintf(why, sizeof why, ": the receivers took none of them for "
                         "close_timeout=%s s (no progress: ZeroMQ handed nothing on, the "
                         "receivers connected but not reading). A trainer alive but slower "
                         "than that (loaded, a high sample-to-insert ratio): raise the close "
                         "timeout (mt_set_close_timeout; it bounds a wait without progress); a "
                         "trainer paused or stuck: once it runs again, run this simulation "
                         "again with the same simulation id (MELISSA_TRAINER_SIMULATION_ID=%llu)",
                         t, (unsigned long long)c->simulation_id);
            else
                snprintf(why, sizeof why, "%s%s", never[0] ? ": " : "", never);
            if (!capped)
                st = mt_fail(c, MT_ETIMEDOUT, "simulation %llu rank %d: %s not delivered "
                                              "within %s=%s s to %s%s%s",
                             (unsigned long long)c->simulation_id, c->rank, failure, setting,
                             t, endpoints, mt_close_bound_how(setting), why);
        }
        if (said != NULL) st = mt_close_also(c, first, said, st); /* (close_failed.c) */
        free(said);
        if (asked != NULL && st == MT_OK) st = mt_admission_check(c, asked, n_asked);
        /* (not delivered: a trainer gone, perhaps restarted, as a receipt's gone) */
        if (failure != NULL && *failure != '\0' && bye) c->receipt_restart = 2;
        else if (failure == NULL || !bye) c->receipt_restart = 0; /* (else close_wait.c's) */
        if (bye_steps != NULL && st == MT_OK) st = mt_receipt_check(c, &mine, bye_steps);
        /* a trainer restarted (or gone) before it confirmed: followed with a window, once a
         * new run published (follow.c), then the BYE said again */
        bool again = st == MT_ETIMEDOUT && c->receipt_restart != 0 && c->replay.max_bytes > 0;
        if (again) st = mt_follow_reopen(c, &mine);
        free(bye_steps);
        mt_rendezvous_free(&mine);
        for (size_t i = 0; i < n_asked; ++i) free(asked[i]);
        free(asked);
        if (!again || st != MT_OK) break;
    }
    if (st != MT_OK) {
        if (message != NULL && size > 0) snprintf(message, size, "%s", mt_client_error(c));
        else fprintf(stderr, "melissa_trainer: mt_client_%s: %s\n", failing ? "fail" : "close",
                     mt_client_error(c));
    }
    free_client(c);
    return st;
}

void mt_client_abort(mt_client *c) {
    if (c == NULL) return;
    free_client(c); /* sockets closed with linger 0: nothing more leaves, no BYE */
}
