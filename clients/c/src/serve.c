/* serve.c: where a prediction request goes (docs/protocol.md, section 16): the serving
 * endpoint of training rank simulation_id % W and the inputs it takes, from
 * mt_set_serve_endpoints or $MELISSA_TRAINER_SERVE_ENDPOINTS (serve_given.c), or
 * serve_{r}.json in the rendezvous directory (read there: serve_read.c;
 * melissa_trainer/client/predict_endpoint.py EndpointLookup.find: the same rules, the same
 * messages). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "internal.h"
#include "follow.h"
#include "host_scope.h"
#include "missing_dir.h"
#include "serve.h"
#include "stop_look.h"

#define ENV_SERVE "MELISSA_TRAINER_SERVE_ENDPOINTS"
#define ENV_RENDEZVOUS "MELISSA_TRAINER_RENDEZVOUS"
#define ENV_RUN_ID "MELISSA_TRAINER_RUN_ID"

void mt_specs_free(mt_spec *specs, size_t n) {
    for (size_t i = 0; specs != NULL && i < n; ++i) free(specs[i].name);
    free(specs);
}

void mt_serve_entry_free(mt_serve_entry *e) {
    free(e->endpoint);
    free(e->curve_key);
    free(e->key_repr);
    free(e->host), free(e->scope);
    mt_specs_free(e->inputs, e->n_inputs);
    memset(e, 0, sizeof *e);
}

/* A variable's value `v` stripped as Python's str.strip strips (mt_py_strip: also
 * \x1c-\x1f, U+0085, the no-break and other Unicode spaces), as a new string in *out;
 * NULL when it is unset or blank (predict_endpoint.py reads os.environ.get(name,
 * "").strip()). False: no memory. */
static bool env_stripped(const char *v, char **out) {
    *out = v != NULL ? mt_py_strip(v) : NULL;
    if (v != NULL && *out == NULL) return false;
    if (*out != NULL && **out == '\0') {
        free(*out);
        *out = NULL;
    }
    return true;
}

/* MT_OK unless the key of the serve file just read into `e` (from `dir`) is not a
 * 40-character Z85 key, or not a string: then MT_EENV naming the file (else libzmq's bare
 * EINVAL at the socket option, "CURVE keys for ..."; or, not a string, a wait for a file
 * that will not change), `e` freed; client/predict_errors.py malformed_serve_key, word for
 * word (a value that is not a string as Python shows it, "(it must be a str, not int)"). */
static mt_status file_key(mt_client *c, const char *dir, mt_serve_entry *e) {
    char fault[320];
    if (e->key_repr != NULL)
        snprintf(fault, sizeof fault, "a str, not %s", e->key_type);
    else if (e->curve_key == NULL || !mt_z85_fault(e->curve_key, fault, sizeof fault))
        return MT_OK;
    char *shown = e->key_repr != NULL ? NULL : mt_py_repr(e->curve_key);
    const char *said = e->key_repr != NULL ? e->key_repr : shown;
    mt_status st = said == NULL ? mt_fail(c, MT_ENOMEM, "out of memory")
                 : mt_fail(c, MT_EENV, "the curve_public_key of the serve file %s/serve_%lld.json "
                                       "must be the 40-character Z85 public key, not %s (it "
                                       "must be %s): the trainer writes its own there; is that "
                                       "file the trainer's?", dir, e->rank, said, fault);
    free(shown);
    mt_serve_entry_free(e);
    return st;
}

/* dir's inode and modification time in ns ({0, 0}: it cannot be read; endpoints.py stamp) */
static void dir_stamp(const char *dir, long long stamp[2]) {
    struct stat st;
    stamp[0] = stamp[1] = 0;
    if (stat(dir, &st) != 0) return;
    stamp[0] = (long long)st.st_ino;
    stamp[1] = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
}

/* dir and its stamp, as a lookup is about to read it (a change after the read ends the
 * next backoff); false: out of memory. */
static bool look_at(mt_client *c, const char *dir) {
    if (c->looked_dir == NULL || strcmp(c->looked_dir, dir) != 0) {
        char *copy = strdup(dir);
        if (copy == NULL) return false;
        free(c->looked_dir);
        c->looked_dir = copy;
    }
    dir_stamp(dir, c->looked_stamp);
    return true;
}

bool mt_serve_dir_changed(const mt_client *c) {
    long long now[2];
    if (c->looked_dir == NULL) return false;
    dir_stamp(c->looked_dir, now);
    return now[0] != c->looked_stamp[0] || now[1] != c->looked_stamp[1];
}

mt_status mt_serve_resolve(mt_client *c, double deadline, double timeout, mt_serve_entry *out) {
    memset(out, 0, sizeof *out);
    free(c->looked_dir); /* (set again below when the lookup is in a rendezvous directory) */
    c->looked_dir = NULL;
    char *stripped = NULL;
    if (c->serve_endpoints_arg != NULL) return mt_serve_given(c, c->serve_endpoints_arg, out);
    if (!env_stripped(getenv(ENV_SERVE), &stripped)) return mt_fail(c, MT_ENOMEM, "out of memory");
    if (stripped != NULL) { /* (serve_given.c; its items stripped there, as Python's) */
        mt_status given = mt_serve_given(c, stripped, out);
        free(stripped);
        return given;
    }
    const char *dir = c->rendezvous_dir;
    if (dir == NULL) {
        if (!env_stripped(getenv(ENV_RENDEZVOUS), &stripped))
            return mt_fail(c, MT_ENOMEM, "out of memory");
        dir = stripped;
    }
    if (dir == NULL)
        return mt_fail(c, MT_EENV, "no serving endpoint: set " ENV_RENDEZVOUS " (the trainer's "
                                   "rendezvous directory) or " ENV_SERVE ", or call "
                                   "mt_set_serve_endpoints");
    const char *from = c->rendezvous_dir != NULL ? "mt_set_rendezvous" : ENV_RENDEZVOUS;
    double pause = 0.01;
    char why[512];
    mt_status st;
    for (;;) {
        if (!look_at(c, dir)) {
            st = mt_fail(c, MT_ENOMEM, "out of memory");
            break;
        }
        int got = mt_read_serving(dir, c->simulation_id, c->run_id, out, why, sizeof why);
        if (got != 0) { /* (a loopback endpoint out of reach: at once, host_scope.c) */
            st = got > 0 ? mt_serve_reach(c, dir, out) : mt_fail(c, MT_ENOMEM, "out of memory");
            c->served_there = c->served_there || st == MT_OK;
            if (st == MT_OK) st = file_key(c, dir, out);
            break;
        }
        if (c->run_id != NULL && strncmp(why, OTHER_RUN, strlen(OTHER_RUN)) == 0) {
            /* Its trainer is known not to be this run's: waiting the timeout would not
             * change it (a trainer of this run, if one comes, the next lookup sees). */
            if (c->rendezvous_used != NULL) {
                st = mt_follow_predict_refused(c, dir, why);
                break;
            }
            st = mt_gone(c, "no serving endpoint in '%s': %s, not run '%s' that this predictor "
                            "asks as (" ENV_RUN_ID "): give " ENV_RUN_ID " the trainer's run id "
                            "(the run_id of its serve files), or unset it to ask any run's "
                            "trainer, or use the rendezvous directory of run '%s' (each "
                            "request looks the serve files up again: a trainer of run '%s' "
                            "that publishes here later serves the next one)",
                         dir, why, c->run_id, c->run_id, c->run_id);
            break;
        }
        mt_missing_dir_check(c, dir, from, why); /* (a typo? said once, 3 s in) */
        /* (the trainer that stopped there, this run's: its story, and whether no resume
         * follows on its own; the file read again only when it changed: stop_look.c) */
        const mt_stop_glance *seen =
            mt_stop_glance_at(&c->stop_glance, dir, c->run_id, why, c->served_there);
        if (seen == NULL) {
            st = mt_fail(c, MT_ENOMEM, "out of memory");
            break;
        }
        const mt_buf story = seen->story; /* (the glance's: not freed here) */
        const char *text = seen->text;
        int stopped = seen->stopped;
        /* No run id known: a record already there at the first look may be an earlier
         * run's, a new trainer starting there (a rerun, a resume: a new run id), which
         * rewrites the file: waited for, as a first trainer is. One that came or changed
         * since ended while this client asked (predict_endpoint.py, the same rule). */
        bool ended = stopped == 2;
        if (!c->first_looked) { /* (this client's first look: its text kept, a copy) */
            c->first_looked = true;
            c->first_stop = text != NULL ? strdup(text) : NULL;
            if (text != NULL && c->first_stop == NULL) {
                st = mt_fail(c, MT_ENOMEM, "out of memory");
                break;
            }
            ended = ended && c->run_id != NULL;
        } else if (ended && c->run_id == NULL) { /* (ended: text is not NULL) */
            ended = c->first_stop == NULL || strcmp(text, c->first_stop) != 0;
        }
        if (!c->served_there && !ended) /* (no ServingHook? once; ended: none waits) */
            mt_unserved_check(c, dir, why, story.len && !story.oom ? story.data : NULL);
        mt_buf note = {0}; /* (a typo? the directory meant, what creates it) */
        if (c->served_there || ended) {
            /* Waiting for a serve file is for a trainer not started yet, or resumed. One
             * that served this simulation and removed its file has stopped, and one that
             * ended or failed there has no resume to come (each request waited its whole
             * timeout for it): fall back now, and look again after the backoff. */
            mt_missing_dir_note(dir, from, &note); /* (predict_lookup.py, as Python's) */
            st = story.oom || note.oom ? mt_fail(c, MT_ENOMEM, "out of memory")
               : mt_gone(c, "no serving endpoint in '%s': %s%s", dir, story.len ? story.data : "",
                         note.len ? note.data : "");
            free(note.data);
            break;
        }
        double left = deadline - mt_now();
        if (left <= 0) {
            char t[32];
            mt_format_double(timeout, t);
            mt_missing_dir_note(dir, from, &note);
            if (stopped == 0) mt_unserved_note(dir, why, &note); /* (a trainer not serving) */
            st = mt_fail(c, MT_ETIMEDOUT, "no serving endpoint in '%s' within %s s: %s%s", dir, t,
                         stopped && story.data ? story.data : why, note.len ? note.data : "");
            free(note.data);
            break;
        }
        double nap = pause < left ? pause : left;
        struct timespec ts = {(time_t)nap, (long)((nap - (double)(time_t)nap) * 1e9)};
        nanosleep(&ts, NULL);
        pause = pause * 2 < 0.25 ? pause * 2 : 0.25;
    }
    free(stripped);
    return st;
}
