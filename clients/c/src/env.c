/* env.c: what mt_client_start reads from the environment when it was not set
 * (melissa_trainer/client/config.py), and the rendezvous directory
 * (melissa_trainer/stream/endpoints.py: rank_{r}.json files, polled until complete). */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define ENV_ID "MELISSA_TRAINER_SIMULATION_ID"
#define ENV_ENDPOINTS "MELISSA_TRAINER_ENDPOINTS"
#define ENV_KEY "MELISSA_TRAINER_KEY"
#define ENV_RENDEZVOUS "MELISSA_TRAINER_RENDEZVOUS"
#define ENV_PARAMETERS "MELISSA_TRAINER_PARAMETERS"
#define ENV_RUN_ID "MELISSA_TRAINER_RUN_ID"
#define MAX_RUN_ID_CHARS 64

/* A run id: 1 to 64 ASCII letters, digits, '-' or '_', at least one alphanumeric
 * (melissa_trainer/wire/checks.py check_run_id). */
bool mt_valid_run_id(const char *s) {
    size_t n = strlen(s);
    bool alnum = false;
    if (n < 1 || n > MAX_RUN_ID_CHARS) return false;
    for (const char *q = s; *q; ++q) {
        unsigned char ch = (unsigned char)*q;
        if (ch < 128 && isalnum(ch)) alnum = true;
        else if (ch != '-' && ch != '_') return false;
    }
    return alnum;
}

/* `s` without leading and trailing whitespace, as a new string (NULL: no memory). */
static char *strip(const char *s, size_t n) {
    while (n && isspace((unsigned char)*s)) ++s, --n;
    while (n && isspace((unsigned char)s[n - 1])) --n;
    char *out = malloc(n + 1);
    if (out != NULL) {
        memcpy(out, s, n);
        out[n] = '\0';
    }
    return out;
}

static bool blank(const char *s) {
    if (s == NULL) return true;
    while (*s && isspace((unsigned char)*s)) ++s;
    return *s == '\0';
}

static mt_status resolve_id(mt_client *c) {
    if (c->id_set) return MT_OK;
    const char *value = getenv(ENV_ID);
    if (value == NULL)
        return mt_fail(c, MT_EENV,
                       "no simulation id: call mt_set_simulation_id, or set " ENV_ID);
    char *s = strip(value, strlen(value));
    if (s == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    const char *d = s[0] == '+' ? s + 1 : s;
    bool digits = *d != '\0';
    for (const char *q = d; *q; ++q) digits = digits && *q >= '0' && *q <= '9';
    mt_status st = MT_OK;
    if (!digits && !(s[0] == '-' && s[1] >= '0' && s[1] <= '9')) {
        st = mt_fail(c, MT_EENV, ENV_ID "='%s' is not an integer", value);
    } else if (!digits) {
        st = mt_fail(c, MT_EENV, "simulation id %s from " ENV_ID " is out of range [0, 2**64)", s);
    } else {
        errno = 0;
        unsigned long long v = strtoull(d, NULL, 10);
        if (errno == ERANGE)
            st = mt_fail(c, MT_EENV, "simulation id %s from " ENV_ID " is out of range [0, 2**64)",
                         d);
        c->simulation_id = (uint64_t)v;
    }
    free(s);
    return st;
}

static mt_status resolve_parameters(mt_client *c) {
    const char *value = getenv(ENV_PARAMETERS);
    if (c->params_set || blank(value)) return MT_OK;
    mt_json_member *m;
    size_t n;
    char err[160];
    if (!mt_json_object(value, &m, &n, err, sizeof err)) {
        if (value[strspn(value, " \t\r\n")] != '{' && mt_json_valid(value))
            return mt_fail(c, MT_EENV, ENV_PARAMETERS " must be a JSON object of name -> number");
        return mt_fail(c, MT_EENV, ENV_PARAMETERS " is not valid JSON (%s)", err);
    }
    mt_status st = MT_OK;
    for (size_t i = 0; i < n && st == MT_OK; ++i) {
        if (m[i].kind != MT_JSON_NUMBER)
            st = mt_fail(c, MT_EENV, ENV_PARAMETERS ": parameter '%s': %s%s%s is not a number",
                         m[i].key, m[i].kind == MT_JSON_STRING ? "'" : "", m[i].string,
                         m[i].kind == MT_JSON_STRING ? "'" : "");
        else if (!isfinite(m[i].number))
            st = mt_fail(c, MT_EENV, ENV_PARAMETERS ": parameter '%s': %s is not finite",
                         m[i].key, m[i].number > 0 ? "inf" : m[i].number < 0 ? "-inf" : "nan");
        else
            st = mt_set_parameter(c, m[i].key, m[i].number);
    }
    mt_json_free(m, n);
    c->params_set = false; /* (read from the environment, not set) */
    return st;
}

/* Split comma-separated endpoints into c->endpoints; MT_OK or `bad` with a message. */
static mt_status split_endpoints(mt_client *c, const char *text, mt_status bad) {
    size_t n = 1;
    for (const char *q = text; *q; ++q) n += *q == ',';
    c->endpoints = calloc(n, sizeof *c->endpoints);
    if (c->endpoints == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    const char *start = text;
    for (size_t i = 0; i < n; ++i) {
        const char *end = strchr(start, ',');
        if (end == NULL) end = start + strlen(start);
        c->endpoints[i] = strip(start, (size_t)(end - start));
        if (c->endpoints[i] == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
        c->n_endpoints = i + 1;
        if (strstr(c->endpoints[i], "://") == NULL)
            return mt_fail(c, bad, "endpoints must be like tcp://HOST:PORT, got '%s'", text);
        start = end + 1;
    }
    return MT_OK;
}

typedef struct {
    char *endpoint;
    long long world;
    char *run_id; /* NULL: the file has none (an older trainer) */
} rank_entry;

/* One look at the directory: MT_OK with c->endpoints set if complete, else
 * MT_ERENDEZVOUS with what is wrong in `problem`. */
static mt_status read_rendezvous(mt_client *c, const char *dir, char *problem, size_t size) {
    DIR *d = opendir(dir);
    if (d == NULL) {
        snprintf(problem, size, "%s", errno == ENOTDIR ? "it is not a directory"
                                                      : "the directory does not exist");
        return MT_ERENDEZVOUS;
    }
    rank_entry *entries = NULL;
    size_t cap = 0;
    mt_status st = MT_OK;
    size_t used = 0;
    problem[0] = '\0';
    struct dirent *e;
    while ((e = readdir(d)) != NULL && st == MT_OK) {
        const char *name = e->d_name;
        size_t len = strlen(name);
        if (len < 11 || strncmp(name, "rank_", 5) != 0 || strcmp(name + len - 5, ".json") != 0)
            continue;
        bool digits = true;
        for (size_t k = 5; k < len - 5; ++k) digits = digits && isdigit((unsigned char)name[k]);
        if (!digits || len - 10 > 9) continue;
        long long rank = atoll(name + 5);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        FILE *f = fopen(path, "rb");
        char text[8192];
        size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
        if (f) fclose(f);
        text[got] = '\0';
        mt_json_member *m = NULL;
        size_t n = 0;
        char err[160];
        const char *why = NULL;
        if (f == NULL) why = "cannot be opened";
        else if (!mt_json_object(text, &m, &n, err, sizeof err)) why = err;
        long long version = -1, r = -1, world = -1;
        const char *endpoint = NULL, *run_id = NULL;
        bool bad_run = false;
        for (size_t k = 0; k < n; ++k) {
            if (strcmp(m[k].key, "run_id") == 0) {
                if (m[k].kind == MT_JSON_STRING && mt_valid_run_id(m[k].string)) run_id = m[k].string;
                else bad_run = !(m[k].kind == MT_JSON_OTHER && strcmp(m[k].string, "null") == 0);
            }
            bool num = m[k].kind == MT_JSON_NUMBER && m[k].integer;
            if (strcmp(m[k].key, "version") == 0 && num) version = (long long)m[k].number;
            if (strcmp(m[k].key, "rank") == 0 && num) r = (long long)m[k].number;
            if (strcmp(m[k].key, "world_size") == 0 && num) world = (long long)m[k].number;
            if (strcmp(m[k].key, "endpoint") == 0 && m[k].kind == MT_JSON_STRING)
                endpoint = m[k].string;
        }
        if (why != NULL) {
            used += (size_t)snprintf(problem + used, used < size ? size - used : 0,
                                     "%s%s unreadable (%s)", used ? "; " : "", name, why);
        } else if (version != 1 || r != rank || world <= r || endpoint == NULL || !*endpoint ||
                   bad_run) {
            used += (size_t)snprintf(problem + used, used < size ? size - used : 0,
                                     "%s%s invalid (%s)", used ? "; " : "", name, text);
        } else {
            if ((size_t)rank >= cap) {
                size_t ncap = (size_t)rank + 1 > 2 * cap ? (size_t)rank + 1 : 2 * cap;
                rank_entry *grown = realloc(entries, ncap * sizeof *entries);
                if (grown == NULL) st = mt_fail(c, MT_ENOMEM, "out of memory");
                else {
                    memset(grown + cap, 0, (ncap - cap) * sizeof *grown);
                    entries = grown;
                    cap = ncap;
                }
            }
            if (st == MT_OK) {
                free(entries[rank].endpoint);
                free(entries[rank].run_id);
                entries[rank].endpoint = strdup(endpoint);
                entries[rank].world = world;
                entries[rank].run_id = run_id != NULL ? strdup(run_id) : NULL;
                if (entries[rank].endpoint == NULL || (run_id != NULL && !entries[rank].run_id))
                    st = mt_fail(c, MT_ENOMEM, "out of memory");
            }
        }
        mt_json_free(m, n);
        if (used >= size) used = size - 1;
    }
    closedir(d);
    if (st != MT_OK) goto done;
    long long world = -1, other = -1;
    const char *run = NULL, *other_run = NULL; /* "None" stands for a file without one */
    for (size_t r = 0; r < cap; ++r) {
        if (entries[r].endpoint == NULL) continue;
        const char *this_run = entries[r].run_id != NULL ? entries[r].run_id : "None";
        if (world < 0) world = entries[r].world, run = this_run;
        else if (entries[r].world != world) other = entries[r].world;
        else if (strcmp(this_run, run) != 0) other_run = this_run;
    }
    char tail[320] = "";
    if (world < 0) {
        snprintf(tail, sizeof tail, "no rank_<r>.json file yet (rank_0.json ...)");
    } else if (other >= 0) {
        snprintf(tail, sizeof tail, "files disagree on world_size: [%lld, %lld]",
                 world < other ? world : other, world < other ? other : world);
    } else if (other_run != NULL) {
        snprintf(tail, sizeof tail, "files of different runs: run_id ['%s', '%s']",
                 strcmp(run, other_run) < 0 ? run : other_run,
                 strcmp(run, other_run) < 0 ? other_run : run);
    } else {
        char list[200] = "";
        size_t tl = 0;
        for (long long r = 0; r < world; ++r) {
            if ((size_t)r < cap && entries[r].endpoint != NULL) continue;
            tl += (size_t)snprintf(list + tl, tl < sizeof list ? sizeof list - tl : 0, "%s%lld",
                                   tl ? ", " : "", r);
            if (tl >= sizeof list) tl = sizeof list - 1;
        }
        if (tl) {
            snprintf(tail, sizeof tail, "world_size %lld, ranks [%s] missing", world, list);
        } else if (used == 0) { /* complete and consistent */
            c->endpoints = calloc((size_t)world, sizeof *c->endpoints);
            if (c->endpoints == NULL) {
                st = mt_fail(c, MT_ENOMEM, "out of memory");
                goto done;
            }
            for (long long r = 0; r < world; ++r) {
                c->endpoints[r] = entries[r].endpoint;
                entries[r].endpoint = NULL;
            }
            c->n_endpoints = (size_t)world;
            free(c->run_id); /* the published run id, checked by resolve_run_id */
            c->run_id = entries[0].run_id;
            entries[0].run_id = NULL;
            goto done;
        }
    }
    if (tail[0])
        snprintf(problem + used, used < size ? size - used : 0, "%s%s", used ? "; " : "", tail);
    st = MT_ERENDEZVOUS;
done:
    for (size_t r = 0; r < cap; ++r) free(entries[r].endpoint), free(entries[r].run_id);
    free(entries);
    return st;
}

static mt_status fetch_endpoints(mt_client *c, const char *dir, double timeout) {
    double deadline = mt_now() + timeout, pause = 0.01;
    char problem[768];
    for (;;) {
        mt_status st = read_rendezvous(c, dir, problem, sizeof problem);
        if (st != MT_ERENDEZVOUS) return st;
        double left = deadline - mt_now();
        if (left <= 0) {
            char t[32];
            mt_format_double(timeout, t);
            return mt_fail(c, MT_ERENDEZVOUS,
                           "rendezvous directory '%s' incomplete after %s s: %s (is the trainer "
                           "running, with this output directory?)",
                           dir, t, problem);
        }
        double nap = pause < left ? pause : left;
        struct timespec ts = {(time_t)nap, (long)((nap - (double)(time_t)nap) * 1e9)};
        nanosleep(&ts, NULL);
        pause = pause * 2 < 0.25 ? pause * 2 : 0.25;
    }
}

/* The run id the HELLO names: $MELISSA_TRAINER_RUN_ID (the launcher's), else the one the
 * rendezvous published (in c->run_id), else none; the two must agree (client/config.py
 * resolve_run_id): a rendezvous of another run means another trainer took over. */
static mt_status resolve_run_id(mt_client *c, const char *rendezvous) {
    const char *value = getenv(ENV_RUN_ID);
    if (blank(value)) return MT_OK;
    char *s = strip(value, strlen(value));
    if (s == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    mt_status st = MT_OK;
    if (!mt_valid_run_id(s)) {
        st = mt_fail(c, MT_EENV,
                     ENV_RUN_ID " must be 1 to 64 ASCII letters, digits, '-' or '_', not '%s'", s);
    } else if (c->run_id != NULL && strcmp(c->run_id, s) != 0) {
        st = mt_fail(c, MT_EENV,
                     "the rendezvous directory '%s' was published by run %s, but this simulation "
                     "belongs to run %s (" ENV_RUN_ID "): another trainer has taken over that "
                     "output directory since this simulation was launched. Its data would go "
                     "to the wrong trainer: nothing is sent. Give each trainer its own "
                     "--output_dir",
                     rendezvous != NULL ? rendezvous : "", c->run_id, s);
    }
    if (st != MT_OK) {
        free(s);
        return st;
    }
    free(c->run_id);
    c->run_id = s;
    return MT_OK;
}

static mt_status resolve_receivers(mt_client *c, const char **rendezvous);

mt_status mt_resolve_config(mt_client *c) {
    mt_status st = resolve_id(c);
    if (st == MT_OK) st = resolve_parameters(c);
    if (st != MT_OK) return st;
    free(c->run_id);
    c->run_id = NULL;
    const char *rendezvous = NULL;
    st = resolve_receivers(c, &rendezvous);
    return st == MT_OK ? resolve_run_id(c, rendezvous) : st;
}

/* $MELISSA_TRAINER_KEY, stripped, into c->curve_key (unset or blank: none), for
 * endpoints given without a rendezvous (melissa_trainer/client/config.py
 * resolve_receivers: the same rule and message); MT_EENV unless 40 characters long. */
static mt_status receivers_key(mt_client *c) {
    const char *v = getenv(ENV_KEY);
    if (blank(v)) return MT_OK;
    char *key = strip(v, strlen(v));
    if (key == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    if (strlen(key) != 40) {
        mt_status st = mt_fail(c, MT_EENV, "the receivers' CURVE key (" ENV_KEY ") must be the "
                                           "40-character Z85 public key, not '%s'", key);
        free(key);
        return st;
    }
    free(c->curve_key);
    c->curve_key = key;
    return MT_OK;
}

/* The endpoints (and, from a rendezvous directory, the run id it published); given
 * endpoints take the CURVE key of $MELISSA_TRAINER_KEY. */
static mt_status resolve_receivers(mt_client *c, const char **rendezvous) {
    mt_status st;
    if (c->endpoints_arg != NULL) {
        st = split_endpoints(c, c->endpoints_arg, MT_EINVAL);
        return st == MT_OK ? receivers_key(c) : st;
    }
    if (c->rendezvous_dir != NULL) {
        *rendezvous = c->rendezvous_dir;
        return fetch_endpoints(c, c->rendezvous_dir, c->rendezvous_timeout);
    }
    const char *value = getenv(ENV_ENDPOINTS);
    if (!blank(value)) {
        char *s = strip(value, strlen(value));
        if (s == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
        st = split_endpoints(c, s, MT_EENV);
        if (st == MT_EENV)
            mt_fail(c, MT_EENV, ENV_ENDPOINTS ": endpoints must be like tcp://HOST:PORT, got '%s'",
                    s);
        free(s);
        return st == MT_OK ? receivers_key(c) : st;
    }
    value = getenv(ENV_RENDEZVOUS);
    if (!blank(value)) {
        char *s = strip(value, strlen(value));
        if (s == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
        *rendezvous = value; /* (the environment's string outlives this call) */
        st = fetch_endpoints(c, s, c->rendezvous_timeout);
        free(s);
        return st;
    }
    return mt_fail(c, MT_EENV,
                   "no receiver endpoint: call mt_set_endpoints, or set " ENV_ENDPOINTS
                   " (comma-separated, e.g. tcp://127.0.0.1:5555) or " ENV_RENDEZVOUS
                   " (the trainer's rendezvous directory, {output_dir}/rendezvous)");
}
