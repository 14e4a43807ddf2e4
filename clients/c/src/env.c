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
#define ENV_RENDEZVOUS "MELISSA_TRAINER_RENDEZVOUS"
#define ENV_PARAMETERS "MELISSA_TRAINER_PARAMETERS"

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
        const char *endpoint = NULL;
        for (size_t k = 0; k < n; ++k) {
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
        } else if (version != 1 || r != rank || world <= r || endpoint == NULL || !*endpoint) {
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
                entries[rank].endpoint = strdup(endpoint);
                entries[rank].world = world;
                if (entries[rank].endpoint == NULL) st = mt_fail(c, MT_ENOMEM, "out of memory");
            }
        }
        mt_json_free(m, n);
        if (used >= size) used = size - 1;
    }
    closedir(d);
    if (st != MT_OK) goto done;
    long long world = -1, other = -1;
    for (size_t r = 0; r < cap; ++r) {
        if (entries[r].endpoint == NULL) continue;
        if (world < 0) world = entries[r].world;
        else if (entries[r].world != world) other = entries[r].world;
    }
    char tail[320] = "";
    if (world < 0) {
        snprintf(tail, sizeof tail, "no rank_<r>.json file yet (rank_0.json ...)");
    } else if (other >= 0) {
        snprintf(tail, sizeof tail, "files disagree on world_size: [%lld, %lld]",
                 world < other ? world : other, world < other ? other : world);
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
            goto done;
        }
    }
    if (tail[0])
        snprintf(problem + used, used < size ? size - used : 0, "%s%s", used ? "; " : "", tail);
    st = MT_ERENDEZVOUS;
done:
    for (size_t r = 0; r < cap; ++r) free(entries[r].endpoint);
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

mt_status mt_resolve_config(mt_client *c) {
    mt_status st = resolve_id(c);
    if (st == MT_OK) st = resolve_parameters(c);
    if (st != MT_OK) return st;
    if (c->endpoints_arg != NULL) return split_endpoints(c, c->endpoints_arg, MT_EINVAL);
    if (c->rendezvous_dir != NULL)
        return fetch_endpoints(c, c->rendezvous_dir, c->rendezvous_timeout);
    const char *value = getenv(ENV_ENDPOINTS);
    if (!blank(value)) {
        char *s = strip(value, strlen(value));
        if (s == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
        st = split_endpoints(c, s, MT_EENV);
        if (st == MT_EENV)
            mt_fail(c, MT_EENV, ENV_ENDPOINTS ": endpoints must be like tcp://HOST:PORT, got '%s'",
                    s);
        free(s);
        return st;
    }
    value = getenv(ENV_RENDEZVOUS);
    if (!blank(value)) {
        char *s = strip(value, strlen(value));
        if (s == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
        st = fetch_endpoints(c, s, c->rendezvous_timeout);
        free(s);
        return st;
    }
    return mt_fail(c, MT_EENV,
                   "no receiver endpoint: call mt_set_endpoints, or set " ENV_ENDPOINTS
                   " (comma-separated, e.g. tcp://127.0.0.1:5555) or " ENV_RENDEZVOUS
                   " (the trainer's rendezvous directory, {output_dir}/rendezvous)");
}
