/* serve_given.c: serving endpoints given rather than read from a serve file
 * (mt_set_serve_endpoints, $MELISSA_TRAINER_SERVE_ENDPOINTS, with the servers' CURVE key in
 * $MELISSA_TRAINER_SERVE_KEY): their form checked as the Python Predictor checks it
 * (melissa_trainer/client/endpoint_form.py endpoint_fault, predict_lookup.py
 * checked_endpoint: the same rules, the same words), the one of this simulation's rank
 * picked; the same endpoints set again change nothing (the socket, the backoff). Serve
 * files: serve.c. mt_endpoint_fault is the receivers' check too (env.c). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "serve.h"

#define ENV_SERVE "MELISSA_TRAINER_SERVE_ENDPOINTS"
#define ENV_SERVE_KEY "MELISSA_TRAINER_SERVE_KEY"
#define SERVE_FORM "give tcp://HOST:PORT (the trainer's serve_N.json)"

/* Whether `port` (up to its end) is a number 1 to 65535 in ASCII digits (leading zeros
 * allowed, as Python's int()). */
static bool port_number(const char *port) {
    size_t n = strlen(port);
    if (n == 0 || strspn(port, "0123456789") != n) return false;
    while (*port == '0') ++port; /* (then at most 5 digits: no overflow) */
    return strlen(port) >= 1 && strlen(port) <= 5 && atol(port) <= 65535;
}

int mt_endpoint_fault(const char *e, const char *form, char **why) {
    const char *rest = strstr(e, "://"), *what = NULL;
    size_t n = strlen(e);
    *why = NULL;
    if (n > 0 && (strchr("'\"", e[0]) != NULL || strchr("'\"", e[n - 1]) != NULL)) {
        what = "has a quote mark at its start or end (a shell's or a batch script's quoting "
               "left in the value)";
    } else if (rest == NULL) {
        what = "is not like tcp://HOST:PORT";
    } else {
        size_t scheme = (size_t)(rest - e);
        rest += 3;
        if (scheme == 3 && strncmp(e, "tcp", 3) == 0) {
            const char *at = strrchr(rest, ';'); /* (a source address before it) */
            if (at != NULL) rest = at + 1;
            const char *colon = strrchr(rest, ':');
            if (colon == NULL || strchr(colon, ']') != NULL || colon[1] == '\0')
                what = *rest == '\0' ? "has no host and no port" : "has no port";
            else if (colon == rest)
                what = "has no host";
            else if (colon == rest + 1 && *rest == '*')
                what = "has a host * (a bind's, not a connection's)";
            else if (!port_number(colon + 1))
                what = "has a port that is not a number 1 to 65535";
        } else if (scheme == 3 && strncmp(e, "ipc", 3) == 0 && *rest == '\0') {
            what = "has no path", form = "give ipc://PATH";
        } else if (scheme == 6 && strncmp(e, "inproc", 6) == 0 && *rest == '\0') {
            what = "has no name", form = "give inproc://NAME";
        } /* (other transports: ZeroMQ's to judge, at the connect) */
    }
    if (what == NULL) return 0;
    char *shown = mt_py_repr(e);
    size_t size = shown != NULL ? strlen(shown) + strlen(what) + strlen(form) + 16 : 0;
    *why = shown != NULL ? malloc(size) : NULL;
    if (*why != NULL) snprintf(*why, size, "endpoint %s %s: %s", shown, what, form);
    free(shown);
    return *why != NULL ? 1 : -1;
}

/* `len` bytes of `s` without the white space around them that Python's str.strip takes
 * off (mt_py_strip), as a new string (NULL: no memory). */
static char *stripped(const char *s, size_t len) {
    char *item = strndup(s, len), *out = item != NULL ? mt_py_strip(item) : NULL;
    free(item);
    return out;
}

/* MT_OK, or `status` naming the endpoint `e` (its form: mt_endpoint_fault) after
 * `source` (where it was given, as Python's checked_endpoint names it). */
static mt_status check_one(mt_client *c, const char *e, mt_status status, const char *source) {
    char *why;
    int fault = mt_endpoint_fault(e, SERVE_FORM, &why);
    if (fault == 0) return MT_OK;
    mt_status st = fault < 0 ? mt_fail(c, MT_ENOMEM, "out of memory")
                             : mt_fail(c, status, "%s: %s", source, why);
    free(why);
    return st;
}

mt_status mt_serve_endpoints_check(mt_client *c, const char *list) {
    for (const char *start = list;;) {
        size_t len = strcspn(start, ",");
        char *e = stripped(start, len);
        mt_status st = e == NULL ? mt_fail(c, MT_ENOMEM, "out of memory")
                                 : check_one(c, e, MT_EINVAL, "mt_set_serve_endpoints");
        free(e);
        if (st != MT_OK || start[len] == '\0') return st;
        start += len + 1;
    }
}

/* $MELISSA_TRAINER_SERVE_KEY, stripped as Python's str.strip (mt_py_strip), into
 * e->curve_key (unset or blank: none), for endpoints given without a serve file; MT_EENV
 * unless it is a 40-character Z85 key (mt_z85_fault, the stream key's check), quoting it
 * as Python's repr (client/predict_errors.py malformed_serve_key). */
static mt_status serve_key(mt_client *c, mt_serve_entry *e) {
    const char *v = getenv(ENV_SERVE_KEY);
    if (v == NULL) return MT_OK;
    char *key = mt_py_strip(v), fault[320];
    if (key == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    if (*key == '\0') {
        free(key);
        return MT_OK;
    }
    if (mt_z85_fault(key, fault, sizeof fault)) { /* (else libzmq's bare EINVAL) */
        char *shown = mt_py_repr(key);
        mt_status st = shown == NULL ? mt_fail(c, MT_ENOMEM, "out of memory")
                     : mt_fail(c, MT_EENV, "the serving endpoint's CURVE key (" ENV_SERVE_KEY
                                           ") must be the 40-character Z85 public key, not %s "
                                           "(it must be %s)", shown, fault);
        free(shown);
        free(key);
        return st;
    }
    e->curve_key = key;
    return MT_OK;
}

mt_status mt_serve_given(mt_client *c, const char *listed, mt_serve_entry *out) {
    uint64_t n = 1;
    for (const char *q = listed; *q; ++q) n += *q == ',';
    const char *start = listed;
    for (uint64_t i = c->simulation_id % n; i > 0; --i) start = strchr(start, ',') + 1;
    out->endpoint = stripped(start, strcspn(start, ","));
    if (out->endpoint == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    out->rank = (long long)(c->simulation_id % n);
    /* (the argument's were checked by mt_set_serve_endpoints; the variable's, this
     * rank's only, here: Python's _resolve checks the one it picks) */
    mt_status st = listed == c->serve_endpoints_arg ? MT_OK
                 : check_one(c, out->endpoint, MT_EENV, ENV_SERVE);
    if (st == MT_OK) st = serve_key(c, out);
    if (st != MT_OK) mt_serve_entry_free(out);
    return st;
}

/* Whether the comma-separated lists a and b name the same endpoints in the same order
 * (blanks around each aside, as Python's str.strip takes them off: mt_py_strip, the
 * lookup's strip; out of memory: not the same, a new dial). */
static bool same_endpoints(const char *a, const char *b) {
    for (;;) {
        size_t n = strcspn(a, ","), m = strcspn(b, ",");
        char *x = strndup(a, n), *y = strndup(b, m);
        char *u = x != NULL ? mt_py_strip(x) : NULL, *v = y != NULL ? mt_py_strip(y) : NULL;
        bool same = u != NULL && v != NULL && strcmp(u, v) == 0;
        free(x), free(y), free(u), free(v);
        if (!same) return false;
        if (a[n] == '\0' || b[m] == '\0') return a[n] == b[m];
        a += n + 1;
        b += m + 1;
    }
}

mt_status mt_set_serve_endpoints(mt_client *c, const char *endpoints) {
    if (c == NULL) return MT_EINVAL;
    mt_clear_error(c);
    if (endpoints == NULL)
        return mt_fail(c, MT_EINVAL, "mt_set_serve_endpoints: endpoints NULL: give "
                                     "tcp://HOST:PORT (the trainer's serve_N.json)");
    /* (their form, each, now: as Predictor(endpoint=...) at its construction) */
    mt_status st = mt_serve_endpoints_check(c, endpoints);
    if (st != MT_OK) return st;
    /* The same endpoints again (a solver that sets them at every step, in case they
     * changed) change nothing: not the socket, and not the backoff after a trainer found
     * gone there, which keeps a solver asking in a loop from dialling at every request
     * (a socket each: "Too many open files"). */
    if (c->serve_endpoints_arg != NULL && same_endpoints(c->serve_endpoints_arg, endpoints))
        return MT_OK;
    char *copy = strdup(endpoints);
    if (copy == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    free(c->serve_endpoints_arg);
    c->serve_endpoints_arg = copy;
    mt_predict_release(c); /* the next request goes there, unchecked (no serve file), */
    c->retry_at = c->backoff = 0; /* at once (a backoff was for the endpoints before) */
    c->predict_silent_at[0] = '\0';
    c->served_there = false;
    mt_specs_free(c->serve_inputs, c->n_serve_inputs);
    c->serve_inputs = NULL;
    c->n_serve_inputs = 0;
    return MT_OK;
}
