/* serve_read.c: the serve files of a rendezvous directory read (serve_{r}.json, one per
 * training rank: melissa_trainer/stream/serving_rendezvous.py read_serving, the same rules
 * and the same whys), for mt_serve_resolve (serve.c), which waits for them. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "missing_dir.h"
#include "rendezvous_ranks.h" /* (MT_MAX_WORLD) */
#include "serve.h"

#define MAX_SERVE_FILE 65536
/* the other runs, or the world sizes, a why names at most, the others counted
 * (serving_rendezvous.py OTHER_RUNS_SHOWN) */
#define SHOWN 5

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

/* The whole number 0 to MT_MAX_WORLD a member holds (an integer without fraction or
 * exponent; "-0" is Python's 0), or -1: serving_rendezvous.py read_serving's rule (an
 * int, not true nor 1.0; a world_size within the rank files' bound, rendezvous_ranks.h). */
static long long whole(const mt_json_member *m) {
    if (m->kind != MT_JSON_NUMBER || !m->integer) return -1;
    if (m->number == 0.0) return 0; /* (0 and -0: not `exact`, which takes no sign) */
    return m->exact && m->u64 <= (uint64_t)MT_MAX_WORLD ? (long long)m->u64 : -1;
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
        /* (never cast from a double: 1e20 would not fit; the last of a key repeated) */
        if (strcmp(m[k].key, "version") == 0) version = whole(&m[k]);
        if (strcmp(m[k].key, "rank") == 0) r = whole(&m[k]);
        if (strcmp(m[k].key, "world_size") == 0) *world = whole(&m[k]);
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

/* The distinct run ids of the serve files of other runs than the client's (each malloc'd). */
typedef struct other_runs {
    char **ids;
    size_t n;
} other_runs;

/* `run` (malloc'd, taken) added to `o` unless there; false when memory ran out. */
static bool add_run(other_runs *o, char *run) {
    for (size_t k = 0; k < o->n; ++k)
        if (strcmp(o->ids[k], run) == 0) {
            free(run);
            return true;
        }
    char **ids = realloc(o->ids, (o->n + 1) * sizeof *ids);
    if (ids == NULL) {
        free(run);
        return false;
    }
    o->ids = ids, o->ids[o->n++] = run;
    return true;
}

static int by_bytes(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* OTHER_RUN and the runs of `o`, sorted, as Python prints the list of them, the first
 * SHOWN and their count past that (serving_rendezvous.py other_runs_words:
 * "(['run-a', 'run-c'])"; run ids hold no quote): within `why`'s 512 bytes, whatever
 * their number (runs of 64 characters: more than 6 were cut there). */
static void say_runs(other_runs *o, char *why, size_t size) {
    qsort(o->ids, o->n, sizeof *o->ids, by_bytes);
    mt_buf b = {0};
    mt_buf_puts(&b, OTHER_RUN " ([");
    for (size_t k = 0; k < o->n && k < SHOWN; ++k)
        mt_buf_printf(&b, "%s'%s'", k ? ", " : "", o->ids[k]);
    if (o->n > SHOWN) mt_buf_printf(&b, ", ... (%zu in all)", o->n);
    mt_buf_puts(&b, "])");
    snprintf(why, size, "%s", b.oom ? OTHER_RUN : b.data);
    free(b.data);
}

static void free_runs(other_runs *o) {
    for (size_t k = 0; k < o->n; ++k) free(o->ids[k]);
    free(o->ids);
}

/* The distinct world sizes of this run's serve files. */
typedef struct worlds {
    long long *at;
    size_t n;
} worlds;

/* `w` added to `ws` unless there; false when memory ran out. */
static bool add_world(worlds *ws, long long w) {
    for (size_t k = 0; k < ws->n; ++k)
        if (ws->at[k] == w) return true;
    long long *at = realloc(ws->at, (ws->n + 1) * sizeof *at);
    if (at == NULL) return false;
    ws->at = at, ws->at[ws->n++] = w;
    return true;
}

static int by_value(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The why of serve files that disagree on their world size: the sizes of `ws`, sorted,
 * the first SHOWN and their count past that (serving_rendezvous.py read_serving: "[2, 3,
 * 4]"; C named only the first size read and the last other one). */
static void say_worlds(worlds *ws, char *why, size_t size) {
    qsort(ws->at, ws->n, sizeof *ws->at, by_value);
    mt_buf b = {0};
    mt_buf_puts(&b, "serve files disagree on world_size: [");
    for (size_t k = 0; k < ws->n && k < SHOWN; ++k)
        mt_buf_printf(&b, "%s%lld", k ? ", " : "", ws->at[k]);
    if (ws->n > SHOWN) mt_buf_printf(&b, ", ... (%zu in all)", ws->n);
    mt_buf_puts(&b, "]");
    snprintf(why, size, "%s", b.oom ? "serve files disagree on world_size" : b.data);
    free(b.data);
}

/* One look at `dir`: 1 with *out the entry of rank sim % W, 0 with why not in `why`,
 * -1 out of memory. Files of another run than `run_id` (when both name one) are ignored. */
int mt_read_serving(const char *dir, uint64_t sim, const char *run_id, mt_serve_entry *out,
                        char *why, size_t size) {
    DIR *d = opendir(dir);
    if (d == NULL) {
        snprintf(why, size, "cannot list '%s': %s", dir, strerror(errno));
        return 0;
    }
    long long world = -1;
    worlds sizes = {NULL, 0};
    bool found = false;
    other_runs others = {NULL, 0};
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
            free_runs(&others);
            free(sizes.at);
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
            mt_serve_entry_free(&e);
            if (add_run(&others, run)) continue;
            mt_serve_entry_free(&best);
            closedir(d);
            free_runs(&others);
            free(sizes.at);
            return -1;
        }
        free(run);
        if (world < 0) world = w;
        if (!add_world(&sizes, w)) {
            mt_serve_entry_free(&e);
            mt_serve_entry_free(&best);
            closedir(d);
            free_runs(&others);
            free(sizes.at);
            return -1;
        }
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
    bool only_others = others.n > 0 && world < 0; /* (none of this run's: said, below) */
    if (only_others) say_runs(&others, why, size);
    free_runs(&others);
    if (only_others) return 0;
    bool disagree = sizes.n > 1;
    if (disagree) say_worlds(&sizes, why, size);
    free(sizes.at);
    if (disagree) {
        mt_serve_entry_free(&best);
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
    snprintf(why, size, MT_NO_SERVER);
    return 0;
}
