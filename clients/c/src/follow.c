/* follow.c: a running solver follows its trainer across a restart (external mode), as
 * the Python client does (melissa_trainer/client/follow.py, following.py; docs/protocol.md
 * section 17).
 *
 * A trainer preempted (SIGTERM: a checkpoint, then exit) or killed, and started again with
 * --resume_from_checkpoint, binds new sockets and rewrites the rendezvous with its new
 * endpoints and a new run id. A client whose endpoints came from that rendezvous and that
 * keeps a replay window (replay.c: mt_set_replay_bytes, $MELISSA_TRAINER_REPLAY_BYTES,
 * 64 MiB by default in external mode, none for a simulation the launcher started):
 *
 * 1. notices it: at most once a second, mt_send, as it opens a step, looks whether
 *    rank_0.json was rewritten (one stat); the close looks once before its BYE. A
 *    rendezvous complete, not marked stopped, naming another run id or other endpoints,
 *    is a restarted trainer;
 * 2. asks each new receiver which of its steps the checkpoint holds (held.c);
 * 3. drops its old sockets (what they had queued: the window has what is needed), says
 *    HELLO with the new run id on new ones, and sends again, from the window, every step
 *    it sent that no receiver holds (follow_send.c: each send waits as any send does).
 *    The BYE to each receiver then counts every step routed to it, held or sent again.
 *
 * A needed step that has left the window fails (MT_ETIMEDOUT) naming the window's bound
 * and the advice to run the simulation again with the same simulation id; so does a
 * trainer that abandoned the simulation, or one without a follow socket. Each (simulation,
 * time step) then reaches the training exactly once: the resumed receivers drop what
 * their checkpoint holds as duplicates. Not thread-safe: the client's thread (the
 * flusher is stopped while the transport is replaced). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <zmq.h>

#include "internal.h"
#include "follow.h"
#include "follow_send.h"
#include "serve.h"

#define ENV_REPLAY_BYTES "MELISSA_TRAINER_REPLAY_BYTES"
#define DEFAULT_REPLAY_BYTES ((uint64_t)64 << 20) /* ClientTuning's DEFAULT_REPLAY_BYTES */
#define CHECK_INTERVAL 1.0 /* s between two looks by mt_send (follow.py CHECK_INTERVAL) */
#define QUERY_TIMEOUT 30.0 /* s for each receiver's HELD (follow.py QUERY_TIMEOUT) */

/* The window's bound: mt_set_replay_bytes, else the variable, else the default in
 * external mode (client/config.py replay_bytes_for); no rendezvous: none (nothing to
 * follow). */
static mt_status replay_bytes(mt_client *c, uint64_t *out) {
    *out = 0;
    if (c->replay_set) {
        *out = c->replay_arg;
    } else {
        const char *v = getenv(ENV_REPLAY_BYTES);
        while (v != NULL && (*v == ' ' || *v == '\t' || *v == '\n')) ++v;
        if (v != NULL && *v != '\0') {
            char *end = NULL;
            errno = 0;
            unsigned long long n = *v == '-' ? 0 : strtoull(v, &end, 10);
            while (end != NULL && (*end == ' ' || *end == '\t' || *end == '\n')) ++end;
            if (*v == '-' || errno != 0 || end == v || end == NULL || *end != '\0')
                return mt_fail(c, MT_EENV, ENV_REPLAY_BYTES "='%s' is not a number of bytes "
                                           ">= 0", v);
            *out = n;
        } else if (mt_admission_wanted(c)) { /* (a rendezvous, MELISSA_TRAINER_ATTEMPT unset) */
            *out = DEFAULT_REPLAY_BYTES;
        }
    }
    if (c->rendezvous_used == NULL) *out = 0;
    return MT_OK;
}

/* rank_0.json's inode and modification time into c (0: none). */
static void stamp(mt_client *c, unsigned long long *ino, long long *mtime_ns) {
    char path[4096];
    struct stat st;
    *ino = 0, *mtime_ns = 0;
    if (c->rendezvous_used == NULL) return;
    snprintf(path, sizeof path, "%s/rank_0.json", c->rendezvous_used);
    if (stat(path, &st) != 0) return;
    *ino = (unsigned long long)st.st_ino;
    *mtime_ns = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
}

mt_status mt_follow_setup(mt_client *c) {
    size_t row = 0;
    for (size_t i = 0; i < c->n_fields; ++i) {
        c->fields[i].replay_at = row;
        row += (size_t)c->fields[i].nbytes; /* (each part <= max_message_bytes) */
    }
    uint64_t bytes = 0;
    mt_status st = replay_bytes(c, &bytes);
    if (st != MT_OK) return st;
    mt_replay_init(&c->replay, bytes, row);
    c->follow_due = mt_now() + CHECK_INTERVAL;
    stamp(c, &c->follow_ino, &c->follow_mtime_ns);
    c->followed = 0;
    return MT_OK;
}

/* Every step in s, in no particular order, through fn (false stops: returns false). */
static bool each_step(const mt_stepset *s, bool (*fn)(void *, uint64_t), void *arg) {
    for (uint64_t k = 0; k < s->run_count; ++k)
        if (!fn(arg, s->first + k * s->stride)) return false;
    for (size_t i = 0; i < s->cap; ++i)
        if (s->used[i] && !fn(arg, s->slots[i])) return false;
    return true;
}

/* What a follow works out from the replies: the steps to send again, the missing ones. */
typedef struct plan {
    const mt_held *held;
    size_t world;
    uint64_t simulation_id;
    bool routing; /* the client's (kept across a follow: docs/protocol.md 3) */
    const mt_replay *w;
    const mt_replay_entry *sorted;
    size_t n_sorted;
    uint64_t *needed; /* malloc'd */
    size_t n_needed, cap;
    uint64_t missing, shown[5];
    uint64_t *counts; /* per new receiver: every step sent routed to it (the BYE's) */
    bool oom;
} plan;

static bool plan_step(void *arg, uint64_t t) {
    plan *p = arg;
    size_t r = mt_receiver_of(p->simulation_id, t, p->world, p->routing);
    p->counts[r]++;
    if (mt_held_holds(&p->held[r], t, p->simulation_id, p->routing)) return true;
    if (mt_replay_find(p->w, p->sorted, p->n_sorted, t) == NULL) {
        if (p->missing < 5) p->shown[p->missing] = t;
        p->missing++;
        return true;
    }
    if (p->n_needed == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        uint64_t *grown = realloc(p->needed, cap * sizeof *grown);
        if (grown == NULL) return !(p->oom = true);
        p->needed = grown, p->cap = cap;
    }
    p->needed[p->n_needed++] = t;
    return true;
}

static int by_value(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The advice every failure to follow ends with (following.py made_for). */
static mt_status cannot_follow(mt_client *c, const char *why) {
    c->failed = true;
    return mt_fail(c, MT_ETIMEDOUT, "simulation %llu rank %d: %s. Run this simulation again, "
                                    "with the same simulation id "
                                    "(MELISSA_TRAINER_SIMULATION_ID=%llu): the resumed trainer "
                                    "keeps the steps it holds and takes the others, each once",
                   (unsigned long long)c->simulation_id, c->rank, why,
                   (unsigned long long)c->simulation_id);
}

/* Follow the restarted trainer of *rv (freed here). */
static mt_status follow(mt_client *c, mt_rendezvous *rv) {
    /* A launched rerun's skip (rerun.c) is dropped: its HELD were the old trainer's;
     * kept, a later step it called held would not be sent to the new trainer, whose
     * checkpoint may lack it. The steps skipped so far are in c->steps, as the sent
     * ones: the plan below counts them in the new BYE and sends again those the new
     * trainer lacks from the window (never kept there, one lacked fails as a step that
     * left it: as Python's). Every later step is sent (sending.py _followed). */
    mt_rerun_drop(c);
    mt_held *held = calloc(rv->n, sizeof *held);
    plan p = {held, rv->n, c->simulation_id, c->routing, &c->replay, NULL, 0, NULL, 0, 0, 0,
              {0}, NULL, false};
    mt_replay_entry *sorted = NULL;
    p.counts = calloc(rv->n, sizeof *p.counts);
    mt_status st = held == NULL || p.counts == NULL ? mt_fail(c, MT_ENOMEM, "out of memory")
                                                    : MT_OK;
    for (mt_rendezvous newer = {0}; st == MT_OK;) { /* (a newer run than asked: ask it) */
        st = mt_held_ask(c, rv, QUERY_TIMEOUT, held, &newer);
        if (st != MT_OK || newer.n == 0) break;
        mt_rendezvous_free(rv);
        *rv = newer, newer = (mt_rendezvous){0};
        free(held), free(p.counts);
        p.held = held = calloc(rv->n, sizeof *held);
        p.counts = calloc(rv->n, sizeof *p.counts);
        p.world = rv->n;
        if (held == NULL || p.counts == NULL) st = mt_fail(c, MT_ENOMEM, "out of memory");
    }
    if (st == MT_ETIMEDOUT) {
        char *why = c->error; /* (taken: cannot_follow's message replaces it) */
        c->error = NULL;
        st = cannot_follow(c, why != NULL ? why : "");
        if (why != c->error_spare) free(why);
    }
    for (size_t r = 0; st == MT_OK && r < rv->n; ++r)
        if (held[r].status == MT_HELD_ABANDONED)
            st = cannot_follow(c, "the restarted trainer abandoned this simulation (it takes "
                                  "nothing more of it)");
    if (st == MT_OK) {
        p.n_sorted = mt_replay_sorted(&c->replay, &sorted);
        p.sorted = sorted;
        if (p.n_sorted == (size_t)-1) p.n_sorted = 0, p.oom = true;
        if (!p.oom) each_step(&c->steps, plan_step, &p);
        if (p.oom) st = mt_fail(c, MT_ENOMEM, "out of memory (following the trainer)");
    }
    if (st == MT_OK && c->step_open && !(c->replay.open && c->replay.open_step == c->step))
        st = cannot_follow(c, "the time step being sent has not been kept in the replay "
                              "window (mt_set_replay_bytes, or " ENV_REPLAY_BYTES ": make it "
                              "hold one step at least)");
    if (st == MT_OK && p.missing > 0) {
        char shown[160] = "", why[640];
        size_t used = 0, k = p.missing < 5 ? (size_t)p.missing : 5;
        qsort(p.shown, k, sizeof *p.shown, by_value);
        for (size_t i = 0; i < k && used < sizeof shown; ++i)
            used += (size_t)snprintf(shown + used, sizeof shown - used, "%s%llu", i ? ", " : "",
                                     (unsigned long long)p.shown[i]);
        snprintf(why, sizeof why, "the restarted trainer's checkpoint lacks %llu time step(s) "
                                  "this simulation sent (%s%s) that have left its replay "
                                  "window (mt_set_replay_bytes=%llu bytes, or "
                                  ENV_REPLAY_BYTES ": make it hold what the simulation sends "
                                  "between two checkpoints)",
                 (unsigned long long)p.missing, shown, p.missing > 5 ? ", ..." : "",
                 (unsigned long long)c->replay.max_bytes);
        st = cannot_follow(c, why);
    }
    if (st == MT_OK) {
        qsort(p.needed, p.n_needed, sizeof *p.needed, by_value);
        char run[80];
        snprintf(run, sizeof run, "%s", rv->run_id != NULL ? rv->run_id : "None");
        char at[512];
        snprintf(at, sizeof at, "%s%s", rv->endpoints[0], rv->n > 1 ? ", ..." : "");
        unsigned before = c->followed;
        st = mt_follow_reconnect(c, rv, &p.counts, p.needed, p.n_needed, p.sorted,
                                 p.n_sorted);
        if (st == MT_OK && c->followed == before) { /* (else a newer run's follow said so) */
            c->followed++;
            mt_admission_watch_start(c); /* (asks the run followed: admission_watch.c) */
            fprintf(stderr, "melissa_trainer: simulation %llu rank %d: followed the restarted "
                            "trainer (run %s at %s): %zu step(s) sent again\n",
                    (unsigned long long)c->simulation_id, c->rank, run, at, p.n_needed);
        }
    } else {
        c->failed = true;
    }
    for (size_t r = 0; held != NULL && r < p.world; ++r) mt_held_free(&held[r]);
    free(held);
    free(p.counts);
    free(p.needed);
    free(sorted);
    mt_rendezvous_free(rv);
    return st;
}

mt_status mt_follow_poll(mt_client *c, bool force) {
    if (c->replay.max_bytes == 0) return MT_OK;
    double now = mt_now();
    if (!force && now < c->follow_due) return MT_OK;
    c->follow_due = now + CHECK_INTERVAL;
    unsigned long long ino;
    long long mtime;
    stamp(c, &ino, &mtime);
    if (!force && ino == c->follow_ino && mtime == c->follow_mtime_ns) return MT_OK;
    mt_rendezvous rv;
    mt_status st = mt_rendezvous_read(c->rendezvous_used, &rv, NULL, false);
    if (st == MT_ENOMEM) return mt_fail(c, MT_ENOMEM, "out of memory");
    if (st != MT_OK) return MT_OK; /* (stopped, or being written: looked at again later) */
    c->follow_ino = ino, c->follow_mtime_ns = mtime;
    bool other = rv.n != c->n_endpoints || (rv.run_id == NULL) != (c->run_id == NULL) ||
                 (rv.run_id != NULL && strcmp(rv.run_id, c->run_id) != 0);
    for (size_t r = 0; !other && r < rv.n; ++r)
        other = strcmp(rv.endpoints[r], c->endpoints[r]) != 0;
    if (!other) {
        mt_rendezvous_free(&rv);
        return MT_OK;
    }
    return follow(c, &rv);
}

/* Whether `rv` names another run than `mine` (its run id or its endpoints; `mine` empty:
 * another run id than the client's). */
static bool another_run(const mt_client *c, const mt_rendezvous *rv,
                        const mt_rendezvous *mine) {
    if (mine->n == 0)
        return (rv->run_id == NULL) != (c->run_id == NULL) ||
               (rv->run_id != NULL && strcmp(rv->run_id, c->run_id) != 0);
    bool other = rv->n != mine->n || (rv->run_id == NULL) != (mine->run_id == NULL) ||
                 (rv->run_id != NULL && strcmp(rv->run_id, mine->run_id) != 0);
    for (size_t r = 0; !other && r < rv->n; ++r)
        other = strcmp(rv->endpoints[r], mine->endpoints[r]) != 0;
    return other;
}

bool mt_follow_newer(mt_client *c, const mt_rendezvous *rv, mt_rendezvous *out) {
    unsigned long long ino;
    long long mtime;
    stamp(c, &ino, &mtime);
    if (ino == c->follow_ino && mtime == c->follow_mtime_ns) return false;
    if (mt_rendezvous_read(c->rendezvous_used, out, NULL, false) != MT_OK)
        return false; /* (stopped, or being written: looked at again at the next wait) */
    c->follow_ino = ino, c->follow_mtime_ns = mtime;
    if (another_run(c, out, rv)) return true;
    mt_rendezvous_free(out);
    return false;
}

mt_status mt_follow_reopen(mt_client *c, const mt_rendezvous *mine) {
    double timeout = c->follow_timeout;
    double deadline = timeout < 0 ? -1.0 : mt_now() + timeout, pause = 0.05;
    mt_rendezvous rv;
    for (;;) { /* (follow.py wait_restarted: complete, not stopped, another run) */
        stamp(c, &c->follow_ino, &c->follow_mtime_ns); /* (what mt_follow_newer compares) */
        mt_status st = mt_rendezvous_read(c->rendezvous_used, &rv, NULL, false);
        if (st == MT_ENOMEM) return mt_fail(c, MT_ENOMEM, "out of memory");
        if (st == MT_OK && another_run(c, &rv, mine)) break;
        if (st == MT_OK) mt_rendezvous_free(&rv);
        double left = deadline < 0 ? pause : deadline - mt_now();
        if (left <= 0) return MT_ETIMEDOUT; /* (the receipt's error, kept in c->error) */
        double nap = pause < left ? pause : left;
        struct timespec ts = {(time_t)nap, (long)((nap - (double)(time_t)nap) * 1e9)};
        nanosleep(&ts, NULL);
        pause = pause * 2 < 0.5 ? pause * 2 : 0.5;
    }
    /* The client as mt_client_start left it, to a transport of none (follow() makes it). */
    mt_status st = mt_init_sync(c);
    if (st == MT_OK) st = mt_build_headers(c);
    if (st != MT_OK) {
        mt_rendezvous_free(&rv);
        return st;
    }
    c->started = true;
    c->step_open = false;
    return follow(c, &rv);
}

/* A client that streams through a rendezvous (its run id the one published there when it
 * started) finding only another run's serve files: a trainer restarted there. With a
 * replay window the client follows it at its next mt_send, which looks at the rendezvous
 * at once (not a second after its last look: follow.c); without one it never does. */
mt_status mt_follow_predict_refused(mt_client *c, const char *dir, const char *why) {
    if (c->replay.max_bytes > 0) {
        c->follow_due = 0.0;
        return mt_gone(c, "no serving endpoint in '%s': %s, not run '%s' that this client "
                          "streams to: a trainer restarted there (resumed from its "
                          "checkpoint); this client follows it at its next mt_send (or its "
                          "close) and asks it from then on: fall back until then",
                       dir, why, c->run_id);
    }
    return mt_gone(c, "no serving endpoint in '%s': %s, not run '%s' that this client streams "
                      "to: a trainer restarted there, and this client does not follow one (no "
                      "replay window: mt_set_replay_bytes, MELISSA_TRAINER_REPLAY_BYTES): run "
                      "the simulation again to be answered by it",
                   dir, why, c->run_id);
}
