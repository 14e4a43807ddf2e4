/* env_names.c: the MELISSA_TRAINER_* names, and what mt_client_start says of one in the
 * environment that no part of melissa-trainer reads (a misspelt name is otherwise
 * silently ignored, or only seen as "no receiver endpoint").
 *
 * MT_ENV_READ is every name the C client reads (getenv): tests/c/test_c_env_names.py
 * checks that it equals the getenv names of src/, so a new variable is not forgotten.
 * MT_ENV_ELSEWHERE holds the names other parts of melissa-trainer read (the launcher's
 * workers, the trainer), which a solver's environment may carry without a mistake; the
 * same test checks that the two tables hold every MELISSA_TRAINER_* name the Python
 * package defines. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

extern char **environ; /* (POSIX: declared by the program that uses it) */

#define PREFIX "MELISSA_TRAINER_"
#define PREFIX_LEN (sizeof PREFIX - 1)
#define NAME_MAX_CHARS 64 /* longer names are compared on their first 64 characters */

/* The names the C client reads (getenv in src/). */
static const char *const MT_ENV_READ[] = {
    "MELISSA_TRAINER_ATTEMPT",         "MELISSA_TRAINER_ENDPOINTS",
    "MELISSA_TRAINER_KEY",             "MELISSA_TRAINER_PARAMETERS",
    "MELISSA_TRAINER_RENDEZVOUS",      "MELISSA_TRAINER_REPLAY_BYTES",
    "MELISSA_TRAINER_RUN_ID",          "MELISSA_TRAINER_SERVE_ENDPOINTS",
    "MELISSA_TRAINER_SERVE_KEY",       "MELISSA_TRAINER_SIMULATION_ID",
};
/* The names other parts of melissa-trainer read (not the C client's, not a mistake). */
static const char *const MT_ENV_ELSEWHERE[] = {
    "MELISSA_TRAINER_LAUNCHER", "MELISSA_TRAINER_LAUNCHER_KEY", "MELISSA_TRAINER_OUTPUT_LOCK",
    "MELISSA_TRAINER_WORKER",
};
#define N_READ (sizeof MT_ENV_READ / sizeof *MT_ENV_READ)
#define N_ELSEWHERE (sizeof MT_ENV_ELSEWHERE / sizeof *MT_ENV_ELSEWHERE)

/* The edit distance (insertions, deletions, substitutions) between a[0..n) and b[0..m),
 * both at most NAME_MAX_CHARS long. */
static size_t distance(const char *a, size_t n, const char *b, size_t m) {
    size_t row[NAME_MAX_CHARS + 1];
    for (size_t j = 0; j <= m; ++j) row[j] = j;
    for (size_t i = 1; i <= n; ++i) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= m; ++j) {
            size_t above = row[j];
            size_t best = diagonal + (a[i - 1] != b[j - 1]);
            if (above + 1 < best) best = above + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diagonal = above;
        }
    }
    return row[m];
}

/* Whether `name` (n characters) is one of `table`'s. */
static bool listed(const char *name, size_t n, const char *const *table, size_t count) {
    for (size_t k = 0; k < count; ++k)
        if (strlen(table[k]) == n && strncmp(table[k], name, n) == 0) return true;
    return false;
}

/* The known name closest to `name` (n characters, PREFIX included), compared after the
 * prefix: NULL if none is within a third of its length (at least 2 edits: RENDEVOUS,
 * REPLAY_BYTE, SERVE_ENDPOINT, SIMULATIONID are; SIM_ID is not). */
static const char *closest(const char *name, size_t n) {
    const char *s = name + PREFIX_LEN;
    size_t len = n - PREFIX_LEN < NAME_MAX_CHARS ? n - PREFIX_LEN : NAME_MAX_CHARS;
    size_t limit = len / 3 > 2 ? len / 3 : 2, best = limit + 1;
    const char *found = NULL;
    for (size_t k = 0; k < N_READ + N_ELSEWHERE; ++k) {
        const char *known = k < N_READ ? MT_ENV_READ[k] : MT_ENV_ELSEWHERE[k - N_READ];
        size_t d = distance(s, len, known + PREFIX_LEN, strlen(known) - PREFIX_LEN);
        if (d < best) best = d, found = known;
    }
    return found;
}

/* Each MELISSA_TRAINER_* name of the environment that no part of melissa-trainer reads,
 * in the environment's order: `seen(name, n, closest or NULL, ctx)`. */
typedef void (*unknown_fn)(const char *name, size_t n, const char *closest, void *ctx);
static void each_unknown(unknown_fn seen, void *ctx) {
    for (char **e = environ; e != NULL && *e != NULL; ++e) {
        if (strncmp(*e, PREFIX, PREFIX_LEN) != 0) continue;
        const char *eq = strchr(*e, '=');
        size_t n = eq != NULL ? (size_t)(eq - *e) : strlen(*e);
        if (listed(*e, n, MT_ENV_READ, N_READ) || listed(*e, n, MT_ENV_ELSEWHERE, N_ELSEWHERE))
            continue;
        seen(*e, n, closest(*e, n), ctx);
    }
}

static void say_unknown(const char *name, size_t n, const char *near, void *ctx) {
    (void)ctx;
    if (near != NULL)
        fprintf(stderr, "melissa_trainer: %.*s is set, but no part of melissa-trainer reads "
                        "it: did you mean %s?\n", (int)n, name, near);
    else
        fprintf(stderr, "melissa_trainer: %.*s is set, but no part of melissa-trainer reads "
                        "it (the C client reads MELISSA_TRAINER_ENDPOINTS, _RENDEZVOUS, "
                        "_SIMULATION_ID, _PARAMETERS, _KEY, _RUN_ID, _ATTEMPT, _REPLAY_BYTES, "
                        "_SERVE_ENDPOINTS and _SERVE_KEY)\n", (int)n, name);
}

void mt_env_warn_unknown(const mt_client *c) {
    /* Rank 0 only, once per process: every rank of an MPI job has the same environment
     * (a thousand ranks would print a thousand copies), and a process that starts
     * several clients (simulations one after another) has it each time. A rank whose
     * start fails on it (no receiver endpoint) says it in its own error (mt_env_hint). */
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (c->rank != 0 || atomic_flag_test_and_set(&said)) return;
    each_unknown(say_unknown, NULL);
}

typedef struct hint {
    char *out;
    size_t size;
} hint;

static void hint_receivers(const char *name, size_t n, const char *near, void *ctx) {
    hint *h = ctx;
    if (near == NULL || h->out[0] != '\0') return;
    if (strcmp(near, "MELISSA_TRAINER_ENDPOINTS") != 0 &&
        strcmp(near, "MELISSA_TRAINER_RENDEZVOUS") != 0)
        return;
    snprintf(h->out, h->size, "%.*s is set: did you mean %s?", (int)n, name, near);
}

void mt_env_hint(char *out, size_t size) {
    hint h = {out, size};
    if (size == 0) return;
    out[0] = '\0';
    each_unknown(hint_receivers, &h);
}
