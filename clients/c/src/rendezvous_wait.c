/* rendezvous_wait.c: a client's start waiting for the rendezvous directory of its trainer
 * (melissa_trainer/stream/endpoints.py fetch_rendezvous with alive_only): each look
 * (trainer_alive.c mt_rendezvous_read_live: the files complete and consistent, none
 * marked stopped nor of a trainer gone) every 10 ms, doubling up to 0.25 s, until the
 * rendezvous timeout; a notice on stderr NOTICE_AFTER s in, and the final error, say
 * what is wrong in the Python client's words (client/rendezvous_words.py). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "missing_dir.h"

#define NOTICE_AFTER 3.0 /* seconds: endpoints.py NOTICE_AFTER */

/* Said once on stderr by a client still waiting for `dir` NOTICE_AFTER seconds in, as
 * the Python client's warning (client/rendezvous_words.py waiting_notice): the path,
 * where it came from, what is wrong, and a likely typo when not even the parent
 * directory exists, the directory likely meant (missing_dir.c, as the final error; a
 * solver may start before its trainer creates the directory: it keeps waiting). */
static void waiting_notice(const mt_client *c, const char *dir, const char *problem,
                           double timeout) {
    char path[4096], cwd[2048], t[32];
    const char *from =
        dir == c->rendezvous_dir ? "mt_set_rendezvous" : "MELISSA_TRAINER_RENDEZVOUS";
    mt_buf note = {0}; /* (missing_dir.c: the typo likely, the directory meant) */
    bool missing = mt_missing_note(dir, from, &note);
    if (dir[0] == '/' || getcwd(cwd, sizeof cwd) == NULL)
        snprintf(path, sizeof path, "%s", dir);
    else
        snprintf(path, sizeof path, "%s/%s", cwd, dir);
    for (size_t n = strlen(path); n > 1 && path[n - 1] == '/';) path[--n] = '\0';
    mt_format_double(timeout, t);
    fprintf(stderr,
            "melissa_trainer: %s=%s: %s%s; waiting up to %s s in all (the rendezvous "
            "timeout) for the trainer to %s\n",
            from, path, problem, note.len ? note.data : "", t,
            missing ? "create it" : "publish there");
    free(note.data);
}

mt_status mt_fetch_endpoints(mt_client *c, const char *dir, double timeout) {
    double start = mt_now(), deadline = start + timeout, pause = 0.01;
    bool told = false;
    mt_buf problem = {0}; /* (what is wrong: as long as the ranks make it) */
    mt_heard heard = {0}; /* (file versions not refused: dialled once, trainer_alive.c) */
    for (;;) {
        mt_rendezvous rv;
        problem.len = 0, problem.oom = false;
        mt_status st = mt_rendezvous_read_live(dir, &rv, &problem, &heard);
        if (st != MT_ERENDEZVOUS || problem.oom) mt_heard_free(&heard); /* (returned below) */
        const char *said = problem.len == 0 ? "" : problem.data;
        if (st == MT_ENOMEM || problem.oom) {
            free(problem.data);
            return mt_fail(c, MT_ENOMEM, "out of memory");
        }
        if (st == MT_OK) {
            free(problem.data);
            mt_status far = mt_rendezvous_reach(c, dir, &rv); /* (said at once: host_scope.c) */
            if (far != MT_OK) mt_rendezvous_free(&rv);
            if (far != MT_OK) return far;
            free(c->rendezvous_used); /* (asked again at close: admission.c) */
            c->rendezvous_used = strdup(dir);
            if (c->rendezvous_used == NULL) {
                mt_rendezvous_free(&rv);
                return mt_fail(c, MT_ENOMEM, "out of memory");
            }
            c->endpoints = rv.endpoints; /* (moved) */
            c->curve_keys = rv.keys;
            c->n_endpoints = rv.n;
            free(c->run_id); /* the published run id, checked by resolve_run_id */
            c->run_id = rv.run_id;
            /* (kept when following: the receivers honour the first HELLO; t % W for a
             * simulation the files list as begun so: docs/protocol.md 3, an upgrade) */
            c->routing = rv.routing && !mt_rendezvous_keeps(&rv, c->simulation_id);
            c->follows = rv.follows; /* (asked at the close: receipt.c) */
            c->receipts = true;
            for (size_t r = 0; r < rv.n; ++r)
                c->receipts = c->receipts && rv.receipts[r] && rv.follows[r] != NULL;
            rv.endpoints = rv.keys = rv.follows = NULL, rv.run_id = NULL; /* (moved) */
            mt_rendezvous_free(&rv);
            return MT_OK;
        }
        double now = mt_now(), left = deadline - now;
        if (!told && now - start >= NOTICE_AFTER && left > 0) {
            told = true;
            waiting_notice(c, dir, said, timeout);
        }
        if (left <= 0) {
            char t[32];
            mt_format_double(timeout, t);
            mt_buf note = {0}; /* (read again now) */
            mt_missing_note(dir, dir == c->rendezvous_dir ? "mt_set_rendezvous"
                                                          : "MELISSA_TRAINER_RENDEZVOUS", &note);
            mt_fail(c, MT_ERENDEZVOUS,
                    "rendezvous directory '%s' incomplete after %s s: %s (is the trainer "
                    "running, with this output directory?)%s",
                    dir, t, said, note.len ? note.data : "");
            free(note.data), free(problem.data), mt_heard_free(&heard);
            return MT_ERENDEZVOUS;
        }
        double nap = pause < left ? pause : left;
        struct timespec ts = {(time_t)nap, (long)((nap - (double)(time_t)nap) * 1e9)};
        nanosleep(&ts, NULL);
        pause = pause * 2 < 0.25 ? pause * 2 : 0.25;
    }
}
