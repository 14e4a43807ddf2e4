/* env_names.c: the MELISSA_TRAINER_* names, and what mt_client_start says of one in the
 * environment that no part of melissa-trainer reads (a misspelt name is otherwise
 * silently ignored, or only seen as "no receiver endpoint").
 *
 * MT_ENV_READ is every MELISSA_TRAINER_* name the C client reads (getenv; the one other,
 * Slurm's SLURM_RESTART_COUNT in rerun.c, is no misspelling of these):
 * tests/c/test_c_env_names.py checks that it equals the getenv names of src/, so a new
 * variable is not forgotten.
 * MT_ENV_ELSEWHERE holds the names other parts of melissa-trainer read (the launcher's
 * workers, the trainer), which a solver's environment may carry without a mistake; the
 * same test checks that the two tables hold every MELISSA_TRAINER_* name the Python
 * package defines. The words and the likeness are the Python client's
 * (melissa_trainer/client/env_names.py: difflib.get_close_matches, cutoff 0.7, on the
 * names without their prefix), so that both clients name the same variable. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "missing_dir.h"

extern char **environ; /* (POSIX: declared by the program that uses it) */

#define PREFIX "MELISSA_TRAINER_"
#define PREFIX_LEN (sizeof PREFIX - 1)
#define LIKE_MAX 199 /* characters: a longer name is like none (difflib's autojunk from 200) */

/* The MELISSA_TRAINER_* names the C client reads (getenv in src/). */
static const char *const MT_ENV_READ[] = {
    "MELISSA_TRAINER_ATTEMPT",         "MELISSA_TRAINER_ENDPOINTS",
    "MELISSA_TRAINER_KEY",             "MELISSA_TRAINER_PARAMETERS",
    "MELISSA_TRAINER_RENDEZVOUS",      "MELISSA_TRAINER_REPLAY_BYTES",
    "MELISSA_TRAINER_RUN_ID",          "MELISSA_TRAINER_SERVE_ENDPOINTS",
    "MELISSA_TRAINER_SERVE_KEY",       "MELISSA_TRAINER_SILENCE_S",
    "MELISSA_TRAINER_SIMULATION_ID",
};
/* The names other parts of melissa-trainer read (not the C client's, not a mistake). */
static const char *const MT_ENV_ELSEWHERE[] = {
    "MELISSA_TRAINER_LAUNCHER", "MELISSA_TRAINER_LAUNCHER_KEY", "MELISSA_TRAINER_LAUNCHER_PROCESS",
    "MELISSA_TRAINER_OUTPUT_LOCK", "MELISSA_TRAINER_WORKER",
};
#define N_READ (sizeof MT_ENV_READ / sizeof *MT_ENV_READ)
#define N_ELSEWHERE (sizeof MT_ENV_ELSEWHERE / sizeof *MT_ENV_ELSEWHERE)

/* The characters of a[alo..ahi) and b[blo..bhi) in matching blocks, as difflib's
 * SequenceMatcher (no junk): the longest common block (the earliest in a, then in b),
 * then the same on each side of it. */
static size_t matched(const char *a, size_t alo, size_t ahi, const char *b, size_t blo,
                      size_t bhi) {
    size_t bi = alo, bj = blo, bk = 0;
    for (size_t i = alo; i < ahi; ++i)
        for (size_t j = blo; j < bhi; ++j) {
            size_t k = 0;
            while (i + k < ahi && j + k < bhi && a[i + k] == b[j + k]) ++k;
            if (k > bk) bi = i, bj = j, bk = k;
        }
    if (bk == 0) return 0;
    return bk + matched(a, alo, bi, b, blo, bj) + matched(a, bi + bk, ahi, b, bj + bk, bhi);
}

/* difflib.SequenceMatcher(None, a, b).ratio() (missing_dir.h). */
double mt_name_ratio(const char *a, size_t n, const char *b, size_t m) {
    return n + m == 0 ? 1.0 : 2.0 * (double)matched(a, 0, n, b, 0, m) / (double)(n + m);
}

/* Whether `name` (n characters) is one of `table`'s. */
static bool listed(const char *name, size_t n, const char *const *table, size_t count) {
    for (size_t k = 0; k < count; ++k)
        if (strlen(table[k]) == n && strncmp(table[k], name, n) == 0) return true;
    return false;
}

/* The known name most like `name` (n characters, PREFIX included), compared without the
 * prefix (with it, any name is like some known one), if like enough: NULL else
 * (difflib.get_close_matches(word, known, n=1, cutoff=0.7): the best ratio, a tie to the
 * greater name). */
static const char *closest(const char *name, size_t n) {
    const char *word = name + PREFIX_LEN, *found = NULL;
    size_t len = n - PREFIX_LEN;
    double best = 0.7;
    if (len > LIKE_MAX) return NULL;
    for (size_t k = 0; k < N_READ + N_ELSEWHERE; ++k) {
        const char *known = k < N_READ ? MT_ENV_READ[k] : MT_ENV_ELSEWHERE[k - N_READ];
        double r = mt_name_ratio(known + PREFIX_LEN, strlen(known) - PREFIX_LEN, word, len);
        if (r > best || (r == best && (found == NULL || strcmp(known, found) > 0)))
            best = r, found = known;
    }
    return found;
}

static size_t name_len(const char *entry) {
    const char *eq = strchr(entry, '=');
    return eq != NULL ? (size_t)(eq - entry) : strlen(entry);
}

static int by_name(const void *x, const void *y) {
    const char *a = *(const char *const *)x, *b = *(const char *const *)y;
    size_t n = name_len(a), m = name_len(b);
    int c = memcmp(a, b, n < m ? n : m);
    return c != 0 ? c : (n > m) - (n < m);
}

/* The Python client's sentence (env_names.unknown_note) naming each MELISSA_TRAINER_*
 * variable of the environment that no part of melissa-trainer reads, in name order,
 * with the known one it is like: "MELISSA_TRAINER_RENDEVOUS (did you mean
 * MELISSA_TRAINER_RENDEZVOUS?) is set, which melissa-trainer does not read"; NULL if
 * none (or no memory). Free it. */
static char *unknown_note(void) {
    size_t count = 0, k = 0;
    for (char **e = environ; e != NULL && *e != NULL; ++e)
        count += strncmp(*e, PREFIX, PREFIX_LEN) == 0;
    const char **unknown = count ? malloc(count * sizeof *unknown) : NULL;
    if (unknown == NULL) return NULL;
    for (char **e = environ; e != NULL && *e != NULL && k < count; ++e) {
        size_t n = name_len(*e);
        if (strncmp(*e, PREFIX, PREFIX_LEN) == 0 && !listed(*e, n, MT_ENV_READ, N_READ) &&
            !listed(*e, n, MT_ENV_ELSEWHERE, N_ELSEWHERE))
            unknown[k++] = *e;
    }
    qsort(unknown, k, sizeof *unknown, by_name);
    mt_buf b = {0};
    for (size_t i = 0; i < k; ++i) {
        size_t n = name_len(unknown[i]);
        const char *like = closest(unknown[i], n);
        mt_buf_printf(&b, "%s%.*s", i ? ", " : "", (int)n, unknown[i]);
        if (like != NULL) mt_buf_printf(&b, " (did you mean %s?)", like);
    }
    if (k) mt_buf_printf(&b, " %s set, which melissa-trainer does not read", k == 1 ? "is" : "are");
    free(unknown);
    if (b.oom || k == 0) {
        free(b.data);
        return NULL;
    }
    return b.data;
}

void mt_env_warn_unknown(const mt_client *c) {
    /* Rank 0 only, once per process: every rank of an MPI job has the same environment
     * (a thousand ranks would print a thousand copies), and a process that starts
     * several clients (simulations one after another) has it each time. A rank whose
     * start fails for want of a variable says it in its own error (mt_env_but). */
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (c->rank != 0) return;
    char *note = unknown_note();
    if (note != NULL && !atomic_flag_test_and_set(&said))
        fprintf(stderr, "melissa_trainer: %s\n", note);
    free(note);
}

char *mt_env_but(void) {
    char *note = unknown_note();
    char *out = malloc(note != NULL ? strlen(note) + sizeof "; but " : 1);
    if (out != NULL) snprintf(out, note != NULL ? strlen(note) + sizeof "; but " : 1, "%s%s",
                              note != NULL ? "; but " : "", note != NULL ? note : "");
    free(note);
    return out;
}
