/* serve.c: where a prediction request goes (docs/protocol.md, section 16): the serving
 * endpoint of training rank simulation_id % W and the inputs it takes, from
 * mt_set_serve_endpoints or $MELISSA_TRAINER_SERVE_ENDPOINTS (serve_given.c), or
 * serve_{r}.json in the rendezvous directory (melissa_trainer/stream/serving_rendezvous.py
 * read_serving and melissa_trainer/client/predict_endpoint.py EndpointLookup.find: the
 * same rules, the same messages). */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
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

#define ENV_SERVE "MELISSA_TRAINER_SERVE_ENDPOINTS"
#define ENV_RENDEZVOUS "MELISSA_TRAINER_RENDEZVOUS"
#define ENV_RUN_ID "MELISSA_TRAINER_RUN_ID"
#define MAX_SERVE_FILE 65536
/* how read_serving's why begins when only serve files of another run are there (the
 * request fails at once: serving_rendezvous.py OTHER_RUN, predict_lookup.py other_run) */
#define OTHER_RUN "the trainer serving there belongs to another run"

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

static mt_dtype dtype_of_str(const char *s) {
    for (int code = 1; code <= 12; ++code)
        if (strcmp(mt_dtype_str((mt_dtype)code), s) == 0) return (mt_dtype)code;
    return (mt_dtype)0;
}

/* One input of a serve file's "inputs": {"name": ..., "dtype": ..., "shape": [...]}. */
static bool parse_input(const char *text, mt_spec *out) {
    mt_json_member *m;
    size_t n;
    char err[80];
    if (!mt_json_object(text, &m, &n, err, sizeof err)) return false;
    const char *name = NULL, *dtype = NULL, *shape = NULL;
    for (size_t k = 0; k < n; ++k) {
        if (strcmp(m[k].key, "name") == 0 && m[k].kind == MT_JSON_STRING) name = m[k].string;
        if (strcmp(m[k].key, "dtype") == 0 && m[k].kind == MT_JSON_STRING) dtype = m[k].string;
        if (strcmp(m[k].key, "shape") == 0 && m[k].kind == MT_JSON_OTHER) shape = m[k].string;
    }
    bool ok = name != NULL && *name && strlen(name) <= MT_MAX_NAME_BYTES && dtype != NULL &&
              dtype_of_str(dtype) != 0 && shape != NULL;
    char **dims = NULL;
    size_t nd = 0;
    if (ok) ok = mt_json_array(shape, &dims, &nd, err, sizeof err) && nd <= MT_MAX_NDIM;
    for (size_t d = 0; ok && d < nd; ++d) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(dims[d], &end, 10);
        ok = isdigit((unsigned char)dims[d][0]) && *end == '\0' && errno == 0 && v >= 1;
        out->shape[d] = v;
    }
    if (ok) {
        out->name = strdup(name);
        out->dtype = dtype_of_str(dtype);
        out->ndim = (int)nd;
        ok = out->name != NULL;
    }
    mt_json_array_free(dims, nd);
    mt_json_free(m, n);
    return ok;
}

/* A serve file's text as an entry; false if it is not a valid one (being replaced, or
 * not ours: looked at again at the next try). `*run` is its run id or NULL. */
static bool parse_serve(const char *text, long long rank, mt_serve_entry *e, long long *world,
                        char **run) {
    mt_json_member *m;
    size_t n;
    char err[80];
    *run = NULL;
    if (!mt_json_object(text, &m, &n, err, sizeof err)) return false;
    long long version = -1, r = -1;
    const char *endpoint = NULL, *inputs = NULL, *key = NULL, *run_id = NULL, *host = NULL,
               *scope = NULL; /* (strings only: host_scope.h) */
    const mt_json_member *key_member = NULL;
    bool ok = true;
    *world = -1;
    for (size_t k = 0; k < n; ++k) {
        bool num = m[k].kind == MT_JSON_NUMBER && m[k].integer;
        if (strcmp(m[k].key, "version") == 0 && num) version = (long long)m[k].number;
        if (strcmp(m[k].key, "rank") == 0 && num) r = (long long)m[k].number;
        if (strcmp(m[k].key, "world_size") == 0 && num) *world = (long long)m[k].number;
        if (strcmp(m[k].key, "endpoint") == 0 && m[k].kind == MT_JSON_STRING)
            endpoint = m[k].string;
        if (strcmp(m[k].key, "inputs") == 0 && m[k].kind == MT_JSON_OTHER) inputs = m[k].string;
        if (strcmp(m[k].key, "curve_public_key") == 0) key_member = &m[k]; /* (the last) */
        if (m[k].kind == MT_JSON_STRING && strcmp(m[k].key, "host") == 0) host = m[k].string;
        if (m[k].kind == MT_JSON_STRING && strcmp(m[k].key, "loopback_scope") == 0)
            scope = m[k].string;
        if (strcmp(m[k].key, "run_id") == 0) {
            if (m[k].kind == MT_JSON_STRING && mt_valid_run_id(m[k].string)) run_id = m[k].string;
            else ok = ok && m[k].kind == MT_JSON_OTHER && strcmp(m[k].string, "null") == 0;
        }
    }
    ok = ok && version == 1 && r == rank && *world > r && r >= 0 && endpoint != NULL &&
         inputs != NULL;
    /* A key that is not a string (nor null: no CURVE) is kept as Python shows it, for
     * file_key to say so at once, as the Python Predictor raises (a file that is otherwise
     * a serve file is not one being replaced: waiting would not change it). */
    if (key_member != NULL && key_member->kind == MT_JSON_STRING)
        key = key_member->string;
    else if (ok && key_member != NULL &&
             !(key_member->kind == MT_JSON_OTHER && strcmp(key_member->string, "null") == 0))
        ok = (e->key_repr = mt_json_member_repr(text, "curve_public_key", &e->key_type)) != NULL;
    char **items = NULL;
    size_t ni = 0;
    if (ok) ok = mt_json_array(inputs, &items, &ni, err, sizeof err) && ni >= 1 && ni <= 255;
    if (ok) {
        e->inputs = calloc(ni, sizeof *e->inputs);
        ok = e->inputs != NULL;
    }
    for (size_t i = 0; ok && i < ni; ++i) {
        ok = parse_input(items[i], &e->inputs[i]);
        e->n_inputs = i + (ok ? 1 : 0);
        for (size_t j = 0; ok && j < i; ++j) ok = strcmp(e->inputs[j].name, e->inputs[i].name);
    }
    if (ok) {
        e->endpoint = strdup(endpoint);
        e->curve_key = key != NULL ? strdup(key) : NULL;
        *run = run_id != NULL ? strdup(run_id) : NULL;
        e->host = host != NULL ? strdup(host) : NULL;
        e->scope = scope != NULL ? strdup(scope) : NULL;
        ok = e->endpoint != NULL && (key == NULL || e->curve_key) && (run_id == NULL || *run) &&
             (host == NULL || e->host) && (scope == NULL || e->scope);
    }
    mt_json_array_free(items, ni);
    mt_json_free(m, n);
    if (!ok) {
        mt_serve_entry_free(e);
        free(*run);
        *run = NULL;
    }
    return ok;
}

/* One look at `dir`: 1 with *out the entry of rank sim % W, 0 with why not in `why`,
 * -1 out of memory. Files of another run than `run_id` (when both name one) are ignored. */
static int read_serving(const char *dir, uint64_t sim, const char *run_id, mt_serve_entry *out,
                        char *why, size_t size) {
    DIR *d = opendir(dir);
    if (d == NULL) {
        snprintf(why, size, "cannot list '%s': %s", dir, strerror(errno));
        return 0;
    }
    long long world = -1, other_world = -1;
    bool other_run = false, found = false;
    char other_run_id[72] = "";
    mt_serve_entry best = {0};
    long long best_rank = -1;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        const char *name = ent->d_name;
        size_t len = strlen(name);
        if (len < 12 || strncmp(name, "serve_", 6) != 0 || strcmp(name + len - 5, ".json") != 0)
            continue;
        bool digits = len - 11 <= 9;
        for (size_t k = 6; k < len - 5; ++k) digits = digits && isdigit((unsigned char)name[k]);
        if (!digits) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        FILE *f = fopen(path, "rb");
        if (f == NULL) continue;
        char *text = malloc(MAX_SERVE_FILE);
        size_t got = text ? fread(text, 1, MAX_SERVE_FILE - 1, f) : 0;
        fclose(f);
        if (text == NULL) {
            mt_serve_entry_free(&best);
            closedir(d);
            return -1;
        }
        text[got] = '\0';
        mt_serve_entry e = {0};
        long long w;
        char *run = NULL;
        bool ok = parse_serve(text, atoll(name + 6), &e, &w, &run);
        free(text);
        if (!ok) continue;
        if (run_id != NULL && run != NULL && strcmp(run, run_id) != 0) {
            other_run = true;
            snprintf(other_run_id, sizeof other_run_id, "%s", run);
            free(run);
            mt_serve_entry_free(&e);
            continue;
        }
        free(run);
        if (world < 0) world = w;
        else if (w != world) other_world = w;
        long long rank = atoll(name + 6);
        if ((uint64_t)rank == sim % (uint64_t)w && !found) {
            best = e;
            best_rank = rank;
            found = true;
        } else {
            mt_serve_entry_free(&e);
        }
    }
    closedir(d);
    if (other_world >= 0) {
        mt_serve_entry_free(&best);
        snprintf(why, size, "serve files disagree on world_size: [%lld, %lld]",
                 world < other_world ? world : other_world,
                 world < other_world ? other_world : world);
        return 0;
    }
    if (world >= 0) {
        if (found && (uint64_t)best_rank == sim % (uint64_t)world) {
            *out = best;
            out->rank = best_rank;
            return 1;
        }
        mt_serve_entry_free(&best);
        snprintf(why, size, "rank %llu of %lld does not serve (yet)",
                 (unsigned long long)(sim % (uint64_t)world), world);
        return 0;
    }
    if (other_run)
        snprintf(why, size, OTHER_RUN " (['%s'])", other_run_id);
    else
        snprintf(why, size, MT_NO_SERVER);
    return 0;
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
        int got = read_serving(dir, c->simulation_id, c->run_id, out, why, sizeof why);
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
                            "trainer, or use the rendezvous directory of run '%s' (a Client "
                            "follows a restarted trainer at its next request)",
                         dir, why, c->run_id, c->run_id);
            break;
        }
        mt_missing_dir_check(c, dir, from, why); /* (a typo? said once, 3 s in) */
        if (!c->served_there) mt_unserved_check(c, dir, why); /* (no ServingHook? once) */
        if (c->served_there) {
            /* Waiting for a serve file is for a trainer not started yet. One that served
             * this simulation and removed its file has stopped: fall back now, and look
             * again after the backoff (a trainer resumed). */
            mt_buf note = {0};
            mt_missing_dir_note(dir, from, &note); /* (predict_lookup.py, as Python's) */
            mt_buf stop = {0}; /* (with its stop reason, and no "(yet)": missing_dir.c) */
            mt_served_stopped(dir, c->run_id, why, &stop);
            st = mt_gone(c, "no serving endpoint in '%s': %s%s", dir, stop.len ? stop.data : "",
                         note.len ? note.data : "");
            free(stop.data);
            free(note.data);
            break;
        }
        double left = deadline - mt_now();
        if (left <= 0) {
            char t[32];
            mt_format_double(timeout, t);
            mt_buf note = {0}; /* (a typo? the directory meant, what creates it) */
            mt_missing_dir_note(dir, from, &note);
            mt_unserved_note(dir, why, c->run_id, &note); /* (a trainer running without serving) */
            st = mt_fail(c, MT_ETIMEDOUT, "no serving endpoint in '%s' within %s s: %s%s", dir, t,
                         why, note.len ? note.data : "");
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
