/* env.c: what mt_client_start reads from the environment when it was not set
 * (melissa_trainer/client/config.py); the rendezvous directory is read by rendezvous.c. */
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
#include "follow.h" /* (mt_check_attempt) */

#define ENV_ID "MELISSA_TRAINER_SIMULATION_ID"
#define ENV_ENDPOINTS "MELISSA_TRAINER_ENDPOINTS"
#define ENV_KEY "MELISSA_TRAINER_KEY"
#define ENV_RENDEZVOUS "MELISSA_TRAINER_RENDEZVOUS"
#define ENV_PARAMETERS "MELISSA_TRAINER_PARAMETERS"
#define ENV_RUN_ID "MELISSA_TRAINER_RUN_ID"
#define MAX_RUN_ID_CHARS 64
#define RECEIVER_FORM "give tcp://HOST:PORT (the trainer's rank_N.json)"

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

/* `n` bytes of `s` stripped as Python's str.strip strips (mt_py_strip: also \x1c-\x1f,
 * U+0085, the no-break and other Unicode spaces), as a new string (NULL: no memory): the
 * endpoints and the directory the Python client reads with os.environ[...].strip(). */
static char *py_strip_n(const char *s, size_t n) {
    char *item = strndup(s, n), *out = item != NULL ? mt_py_strip(item) : NULL;
    free(item);
    return out;
}

/* Whether `s` is unset, or white space only to Python's str.strip (`*no_memory` set
 * when it could not tell). */
static bool py_blank(const char *s, bool *no_memory) {
    if (s == NULL) return true;
    char *out = mt_py_strip(s);
    *no_memory = out == NULL;
    bool empty = out == NULL || *out == '\0';
    free(out);
    return empty;
}

/* The simulation id from $MELISSA_TRAINER_SIMULATION_ID unless set: after Python's
 * str.strip (mt_py_strip), ASCII digits 0-9 only, below 2**64; else MT_EENV naming the
 * variable and its value as Python's repr (client/config.py check_simulation_id: the same
 * rule, the same words). */
static mt_status resolve_id(mt_client *c) {
    if (c->id_set) return MT_OK;
    const char *value = getenv(ENV_ID);
    if (value == NULL) {
        char *but = mt_env_but(); /* (a misspelt variable, the likely cause: env_names.c) */
        mt_status st = mt_fail(c, MT_EENV, "no simulation id: call mt_set_simulation_id, or "
                                           "set " ENV_ID "%s", but != NULL ? but : "");
        free(but);
        return st;
    }
    char *s = mt_py_strip(value), *shown = mt_py_repr(value);
    mt_status st = MT_OK;
    if (s == NULL || shown == NULL) {
        st = mt_fail(c, MT_ENOMEM, "out of memory");
    } else if (*s == '\0' || s[strspn(s, "0123456789")] != '\0') {
        st = mt_fail(c, MT_EENV, ENV_ID "=%s is not a simulation id: give a whole number in "
                                 "ASCII digits 0-9, e.g. " ENV_ID "=42", shown);
    } else {
        errno = 0;
        unsigned long long v = strtoull(s, NULL, 10);
        if (errno == ERANGE)
            st = mt_fail(c, MT_EENV, ENV_ID "=%s is out of range [0, 2**64)", shown);
        c->simulation_id = (uint64_t)v;
    }
    free(s);
    free(shown);
    return st;
}

static mt_status resolve_parameters(mt_client *c) {
    const char *value = getenv(ENV_PARAMETERS);
    bool no_memory = false;
    if (c->params_set || py_blank(value, &no_memory))
        return no_memory ? mt_fail(c, MT_ENOMEM, "out of memory") : MT_OK;
    mt_json_member *m;
    size_t n;
    char err[160];
    if (!mt_json_object(value, &m, &n, err, sizeof err)) {
        if (value[strspn(value, " \t\r\n")] != '{' && mt_json_valid(value))
            return mt_fail(c, MT_EENV, ENV_PARAMETERS " must be a JSON object of name -> number");
        char *shown = mt_py_repr(value); /* (client/parameters.py _from_env's words) */
        mt_status st = shown == NULL ? mt_fail(c, MT_ENOMEM, "out of memory")
                     : mt_fail(c, MT_EENV, ENV_PARAMETERS " is not valid JSON (%s): %s; give "
                                           "an object of name -> number, e.g. '{\"k\": 0.5}'",
                               err, shown);
        free(shown);
        return st;
    }
    if (!mt_json_no_lone_surrogate(value, err, sizeof err)) { /* (read as U+FFFD) */
        mt_json_free(m, n);
        char *shown = mt_py_repr(value); /* (client/parameters.py _from_env's words) */
        mt_status st = shown == NULL ? mt_fail(c, MT_ENOMEM, "out of memory")
                     : mt_fail(c, MT_EENV, ENV_PARAMETERS " has a lone UTF-16 surrogate (%s), "
                                           "which is no character: %s; give an object of "
                                           "name -> number, e.g. '{\"k\": 0.5}'",
                               err, shown);
        free(shown);
        return st;
    }
    mt_status st = MT_OK;
    for (size_t i = 0; i < n && st == MT_OK; ++i) {
        if (m[i].kind == MT_JSON_NUMBER && isfinite(m[i].number)) {
            st = mt_set_parameter(c, m[i].key, m[i].number);
            continue;
        }
        /* (client/parameters.py _from_env's words: the name and a string as Python's
         * repr, an array or an object named, true, false and null as they are) */
        char *key = mt_py_repr(m[i].key), *text = NULL;
        const char *shown = m[i].string;
        if (m[i].kind == MT_JSON_STRING) shown = text = mt_py_repr(m[i].string);
        else if (m[i].kind == MT_JSON_OTHER && m[i].string[0] == '[') shown = "an array";
        else if (m[i].kind == MT_JSON_OTHER && m[i].string[0] == '{') shown = "an object";
        if (key == NULL || (shown == NULL && m[i].kind != MT_JSON_NUMBER))
            st = mt_fail(c, MT_ENOMEM, "out of memory");
        else if (m[i].kind != MT_JSON_NUMBER)
            st = mt_fail(c, MT_EENV, ENV_PARAMETERS ": parameter %s: %s is not a number", key,
                         shown);
        else
            st = mt_fail(c, MT_EENV, ENV_PARAMETERS ": parameter %s: %s is not finite", key,
                         m[i].number > 0 ? "inf" : m[i].number < 0 ? "-inf" : "nan");
        free(key), free(text);
    }
    mt_json_free(m, n);
    c->params_set = false; /* (read from the environment, not set) */
    return st;
}

mt_status mt_check_endpoints(mt_client *c, const char *text, mt_status bad, const char *prefix) {
    for (const char *start = text;;) {
        const char *end = strchr(start, ',');
        size_t len = end != NULL ? (size_t)(end - start) : strlen(start);
        char *e = py_strip_n(start, len), *why = NULL;
        int fault = e != NULL ? mt_endpoint_fault(e, RECEIVER_FORM, &why) : -1;
        free(e);
        if (fault != 0) {
            mt_status st = fault < 0 ? mt_fail(c, MT_ENOMEM, "out of memory")
                                     : mt_fail(c, bad, "%s%s", prefix, why);
            free(why);
            return st;
        }
        if (end == NULL) return MT_OK;
        start = end + 1;
    }
}

mt_status mt_endpoints_not_like(mt_client *c, const char *text, mt_status bad,
                                const char *prefix) {
    char *shown = mt_py_repr(text); /* (quoted as Python's repr, as its message) */
    mt_status st = shown == NULL ? mt_fail(c, MT_ENOMEM, "out of memory")
                 : mt_fail(c, bad, "%sendpoints must be like tcp://HOST:PORT, got %s", prefix,
                           shown);
    free(shown);
    return st;
}

/* Split comma-separated endpoints into c->endpoints; MT_OK or `bad` with a message
 * (`prefix` first: where they came from). */
static mt_status split_endpoints(mt_client *c, const char *text, mt_status bad,
                                 const char *prefix) {
    size_t n = 1;
    for (const char *q = text; *q; ++q) n += *q == ',';
    c->endpoints = calloc(n, sizeof *c->endpoints);
    c->curve_keys = calloc(n, sizeof *c->curve_keys); /* (set by receivers_key) */
    if (c->endpoints == NULL || c->curve_keys == NULL)
        return mt_fail(c, MT_ENOMEM, "out of memory");
    const char *start = text;
    for (size_t i = 0; i < n; ++i) {
        const char *end = strchr(start, ',');
        if (end == NULL) end = start + strlen(start);
        c->endpoints[i] = py_strip_n(start, (size_t)(end - start));
        if (c->endpoints[i] == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
        c->n_endpoints = i + 1;
        if (strstr(c->endpoints[i], "://") == NULL)
            return mt_endpoints_not_like(c, text, bad, prefix);
        start = end + 1;
    }
    return mt_check_endpoints(c, text, bad, prefix);
}

/* The run id the HELLO names: $MELISSA_TRAINER_RUN_ID (the launcher's), else the one the
 * rendezvous published (in c->run_id), else none; the two must agree (client/config.py
 * resolve_run_id): a rendezvous of another run means another trainer took over. */
static mt_status resolve_run_id(mt_client *c, const char *rendezvous) {
    const char *value = getenv(ENV_RUN_ID);
    if (value == NULL) return MT_OK;
    char *s = mt_py_strip(value); /* (unset or blank to Python's str.strip: no run id) */
    if (s == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    if (*s == '\0') {
        free(s);
        return MT_OK;
    }
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
    if (st == MT_OK) st = mt_check_attempt(c); /* (rerun.c) */
    if (st == MT_OK) st = mt_check_silence(c); /* (rerun.c) */
    if (st == MT_OK) st = mt_check_restart_count(c); /* (rerun.c) */
    if (st == MT_OK) st = resolve_parameters(c);
    if (st != MT_OK) return st;
    free(c->run_id);
    c->run_id = NULL;
    c->routing = false; /* (t % W unless the rendezvous read says otherwise) */
    const char *rendezvous = NULL;
    st = resolve_receivers(c, &rendezvous);
    return st == MT_OK ? resolve_run_id(c, rendezvous) : st;
}

/* The receivers' CURVE key into c->curve_keys, for endpoints given without a rendezvous
 * (melissa_trainer/client/config.py resolve_receivers: the same rule and message): the
 * key of mt_set_curve_server_key (checked there; the variable is not read then), else
 * $MELISSA_TRAINER_KEY, stripped as Python's str.strip (unset or blank: none), MT_EENV
 * unless a 40-character Z85 key (mt_z85_fault: else libzmq's bare "Invalid argument" at
 * the socket option). */
static mt_status receivers_key(mt_client *c) {
    char *key;
    if (c->curve_key_arg != NULL) {
        key = strdup(c->curve_key_arg);
    } else {
        const char *v = getenv(ENV_KEY); /* (stripped as Python strips: mt_py_strip) */
        if (v == NULL) return MT_OK;
        key = mt_py_strip(v);
        if (key != NULL && *key == '\0') {
            free(key);
            return MT_OK;
        }
    }
    if (key == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    char fault[320];
    if (c->curve_key_arg == NULL && mt_z85_fault(key, fault, sizeof fault)) {
        char *shown = mt_py_repr(key);
        mt_status st = mt_fail(c, MT_EENV, "the receivers' CURVE key (" ENV_KEY ") must be the "
                                           "40-character Z85 public key, not %s (it must be "
                                           "%s): the trainer's curve_public_key, as its "
                                           "rendezvous files publish it (rank_N.json); or unset "
                                           "it for receivers without CURVE",
                               shown != NULL ? shown : key, fault);
        free(shown);
        free(key);
        return st;
    }
    for (size_t i = 0; i < c->n_endpoints; ++i) {
        c->curve_keys[i] = i == 0 ? key : strdup(key);
        if (c->curve_keys[i] == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    }
    if (c->n_endpoints == 0) free(key);
    return MT_OK;
}

static int by_text(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* MT_OK unless mt_set_curve_server_key gave a key and a receiver of the rendezvous `dir`
 * (just read into c->curve_keys) has another or none: then MT_EINVAL before anything
 * connects, naming the keys the files publish and the fix (client/config.py: the same
 * words, with the C names for Python's: drop mt_set_curve_server_key, NULL for None).
 * The files give the running trainer's key; a key given may be an old run's. */
static mt_status given_key_agrees(mt_client *c, const char *dir) {
    const char *given = c->curve_key_arg;
    bool same = true;
    for (size_t i = 0; given != NULL && i < c->n_endpoints; ++i)
        same = same && c->curve_keys[i] != NULL && strcmp(c->curve_keys[i], given) == 0;
    if (same) return MT_OK;
    const char **keys = malloc(c->n_endpoints * sizeof *keys);
    mt_buf listed = {0};
    char *shown = mt_py_repr(given);
    if (keys == NULL || shown == NULL) {
        free(keys), free(shown);
        return mt_fail(c, MT_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < c->n_endpoints; ++i)
        keys[i] = c->curve_keys[i] != NULL ? c->curve_keys[i] : "NULL";
    qsort(keys, c->n_endpoints, sizeof *keys, by_text); /* (sorted, each once: a set's) */
    for (size_t i = 0; i < c->n_endpoints; ++i) {
        if (i > 0 && strcmp(keys[i], keys[i - 1]) == 0) continue;
        if (listed.len > 0) mt_buf_put(&listed, ", ", 2);
        mt_buf_put(&listed, keys[i], strlen(keys[i]));
    }
    mt_buf_put(&listed, "", 1);
    mt_status st = listed.oom ? mt_fail(c, MT_ENOMEM, "out of memory")
                 : mt_fail(c, MT_EINVAL,
                           "curve_server_key=%s is not the key the rendezvous %s publishes (%s; "
                           "NULL: its receivers take plain connections): the rendezvous gives "
                           "the running trainer's key, so drop mt_set_curve_server_key (or call "
                           "mt_set_endpoints for receivers that take this key)",
                           shown, dir, listed.data);
    free(keys), free(shown), free(listed.data);
    return st;
}

/* The endpoints (and, from a rendezvous directory, the CURVE key of each and the run id
 * it published, which a key given must be); given endpoints take the key given
 * (mt_set_curve_server_key), else that of $MELISSA_TRAINER_KEY. */
static mt_status resolve_receivers(mt_client *c, const char **rendezvous) {
    mt_status st;
    if (c->endpoints_arg != NULL) {
        st = split_endpoints(c, c->endpoints_arg, MT_EINVAL, "");
        return st == MT_OK ? receivers_key(c) : st;
    }
    if (c->rendezvous_dir != NULL) {
        *rendezvous = c->rendezvous_dir;
        st = mt_fetch_endpoints(c, c->rendezvous_dir, c->rendezvous_timeout);
        return st == MT_OK ? given_key_agrees(c, c->rendezvous_dir) : st;
    }
    const char *value = getenv(ENV_ENDPOINTS);
    bool no_memory = false;
    if (!py_blank(value, &no_memory)) {
        char *s = mt_py_strip(value);
        if (s == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
        st = split_endpoints(c, s, MT_EENV, ENV_ENDPOINTS ": ");
        free(s);
        return st == MT_OK ? receivers_key(c) : st;
    }
    value = getenv(ENV_RENDEZVOUS);
    if (!no_memory && !py_blank(value, &no_memory)) {
        char *s = mt_py_strip(value);
        if (s == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
        *rendezvous = value; /* (the environment's string outlives this call) */
        st = mt_fetch_endpoints(c, s, c->rendezvous_timeout);
        if (st == MT_OK) st = given_key_agrees(c, s);
        free(s);
        return st;
    }
    if (no_memory) return mt_fail(c, MT_ENOMEM, "out of memory");
    char *but = mt_env_but(); /* (a misspelt variable, the likely cause: env_names.c) */
    st = mt_fail(c, MT_EENV,
                 "no receiver endpoint: call mt_set_endpoints, or set " ENV_ENDPOINTS
                 " (comma-separated, e.g. tcp://127.0.0.1:5555) or " ENV_RENDEZVOUS
                 " (the trainer's rendezvous directory, {output_dir}/rendezvous)%s",
                 but != NULL ? but : "");
    free(but);
    return st;
}
