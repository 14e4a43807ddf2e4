/* rerun.c: a simulation the launcher runs again sends only the time steps its receivers'
 * checkpoint lacks, as the Python client does (melissa_trainer/client/rerun.py RerunSkip,
 * sending.py; docs/protocol.md section 17).
 *
 * A resumed study runs again each simulation that was running at the checkpoint, or whose
 * data a rank's checkpoint lacks. The solver computes every step again, but the receivers
 * hold some (often all: a simulation killed after its last step, before its BYE) and
 * dropped each one sent again as a duplicate: correct, and wasted work. So a launched
 * attempt after the first (MELISSA_TRAINER_ATTEMPT > 0: the launcher counts from 0), or
 * a launched batch job Slurm requeued (SLURM_RESTART_COUNT > 0: the same script again,
 * its attempt unchanged; only the skip reads it), its endpoints from a rendezvous, asks
 * each receiver at its first send which of its steps the receiver holds (HELD_QUERY on
 * the follow socket: held.c): its ledger now, the steps it would drop as duplicates
 * (its checkpoint's record and what it took since). A step its receiver holds is then
 * not sent (mt_send takes
 * its fields and checks them as any step's); it is counted in that receiver's BYE
 * (c->steps_per_receiver, c->steps), as after a follow, so that the receiver finds the
 * simulation complete.
 *
 * Only an optimisation: the answer is asked once, at most ASK_TIMEOUT s each; a receiver
 * without a follow socket (an older trainer), a rendezvous naming other receivers than
 * the client's, or no answer in time: every step is sent, as before, and one line on
 * stderr says why. A first attempt asks nothing (nothing of it can be held) unless Slurm
 * requeued its batch job (SLURM_RESTART_COUNT > 0, above). A follow of
 * a restarted trainer drops the skip (mt_rerun_drop, follow.c): its answers were the old
 * trainer's, and every later step is sent.
 *
 * A sign of life, as rerun.py's: the launcher hears a simulation by the DATA and BATCH
 * every receiver takes in (duplicates counted; the other ranks' handed to rank 0 up to
 * 0.2 s later: stream/rank_activity.py), and killed a rerun whose solver took longer to
 * recompute the held steps than its silence bound as hung, on every attempt. So a held
 * step is sent anyway (a duplicate its receiver drops and counts; the launcher hears
 * it), counted once in its BYE as any step: the client's first send (nothing sent yet:
 * c->rerun_heard is -inf), at once, so that the rerun's first message comes when the
 * first attempt's did, not after its held part and its first unheld step (a start-up
 * allowance the first attempt met could miss it); later, once c->rerun_interval s have
 * passed since the client's last send (held or not, to any receiver), the next held
 * step. Before rank_activity the launcher heard receiver 0 alone, and the signs went
 * there only: a rerun whose held steps never routed to receiver 0 (every step of a
 * simulation routed (s + t) % 2 to receiver 1) sent none, and was killed as hung. The
 * first send is the same on every rank of a communicator. The interval is a quarter of
 * $MELISSA_TRAINER_SILENCE_S (the launcher's shortest bound for the attempt), at least
 * SIGN_FLOOR; SIGN_DEFAULT without it. Not thread-safe: the client's thread. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "follow.h"

#define ENV_ATTEMPT "MELISSA_TRAINER_ATTEMPT"
#define ASK_TIMEOUT 5.0 /* s for each receiver's HELD (rerun.py ASK_TIMEOUT) */
#define ENV_SILENCE "MELISSA_TRAINER_SILENCE_S"
#define ENV_RESTART "SLURM_RESTART_COUNT" /* set by Slurm in a requeued batch job */
#define SIGN_SHARE 0.25   /* of the launcher's bound (rerun.py SIGN_SHARE) */
#define SIGN_FLOOR 0.2    /* s (rerun.py SIGN_FLOOR) */
#define SIGN_DEFAULT 10.0 /* s without a bound (rerun.py SIGN_DEFAULT) */

/* $MELISSA_TRAINER_ATTEMPT, the launcher's count of launches, checked at mt_client_start:
 * unset or blank to Python's str.strip, else ASCII digits 0-9 below 2**31; else MT_EENV
 * naming the variable and its value (client/config.py check_attempt: the same rule, the
 * same words). Read as -1 by mt_rerun_attempt, a mistyped value made a rerun send every
 * step again. */
mt_status mt_check_attempt(mt_client *c) {
    const char *value = getenv(ENV_ATTEMPT);
    if (value == NULL) return MT_OK;
    char *s = mt_py_strip(value), *shown = mt_py_repr(value);
    mt_status st = MT_OK;
    if (s == NULL || shown == NULL) {
        st = mt_fail(c, MT_ENOMEM, "out of memory");
    } else if (*s != '\0') { /* (blank: unset) */
        const char *significant = s + strspn(s, "0");
        bool digits = s[strspn(s, "0123456789")] == '\0';
        if (!digits || strlen(significant) > 10 ||
            strtoull(significant, NULL, 10) >= (1ULL << 31))
            st = mt_fail(c, MT_EENV, ENV_ATTEMPT "=%s is not an attempt number: the launcher "
                                     "sets it (0 at a simulation's first launch, 1 at its "
                                     "first restart), in ASCII digits 0-9 below 2**31; unset "
                                     "it to start the solver by hand", shown);
    }
    free(s);
    free(shown);
    return st;
}

/* The seconds of `s` (stripped): 1-9 ASCII digits, optionally '.' and 1-9 more; -1 if
 * not that form. Parsed by hand: strtod reads the locale's decimal point. */
static double seconds_of(const char *s) {
    size_t whole = strspn(s, "0123456789");
    if (whole == 0 || whole > 9) return -1.0;
    double value = 0.0, scale = 1.0;
    for (size_t i = 0; i < whole; ++i) value = value * 10.0 + (s[i] - '0');
    if (s[whole] == '\0') return value;
    if (s[whole] != '.') return -1.0;
    const char *fraction = s + whole + 1;
    size_t n = strspn(fraction, "0123456789");
    if (n == 0 || n > 9 || fraction[n] != '\0') return -1.0;
    for (size_t i = 0; i < n; ++i) value += (fraction[i] - '0') * (scale /= 10.0);
    return value;
}

/* $MELISSA_TRAINER_SILENCE_S checked at mt_client_start (launched_env.py check_silence:
 * the same rule, the same words). */
mt_status mt_check_silence(mt_client *c) {
    const char *value = getenv(ENV_SILENCE);
    if (value == NULL) return MT_OK;
    char *s = mt_py_strip(value), *shown = mt_py_repr(value);
    mt_status st = MT_OK;
    if (s == NULL || shown == NULL) {
        st = mt_fail(c, MT_ENOMEM, "out of memory");
    } else if (*s != '\0' && !(seconds_of(s) > 0.0)) { /* (blank: unset) */
        st = mt_fail(c, MT_EENV, ENV_SILENCE "=%s is not a number of seconds: the launcher "
                                 "sets it (the shortest silence it allows the simulation), "
                                 "in ASCII digits 0-9 with an optional fraction, above 0; "
                                 "unset it to start the solver by hand", shown);
    }
    free(s);
    free(shown);
    return st;
}

/* $SLURM_RESTART_COUNT of a launched job (mt_rerun_attempt() >= 0: the attempt was
 * checked first), else 0: unset or blank to Python's str.strip, else ASCII digits 0-9
 * below 2**31; -1 if not that form. */
static long restart_count(const char **shown_from) {
    const char *value = getenv(ENV_RESTART);
    *shown_from = value;
    if (value == NULL || mt_rerun_attempt() < 0) return 0;
    char *s = mt_py_strip(value);
    if (s == NULL) return -2; /* (out of memory) */
    const char *significant = s + strspn(s, "0");
    bool digits = s[strspn(s, "0123456789")] == '\0';
    long n = *s == '\0' ? 0 : !digits || strlen(significant) > 10 ? -1
             : strtoull(significant, NULL, 10) >= (1ULL << 31) ? -1
             : (long)strtoull(significant, NULL, 10);
    free(s);
    return n;
}

/* $SLURM_RESTART_COUNT checked at mt_client_start, after the attempt (launched_env.py
 * check_restart_count: the same rule, the same words). Read as 0, a mistyped value made
 * a requeued run send every step again. */
mt_status mt_check_restart_count(mt_client *c) {
    const char *value = NULL;
    long n = restart_count(&value);
    if (n == -2) return mt_fail(c, MT_ENOMEM, "out of memory");
    if (n >= 0) return MT_OK;
    char *shown = mt_py_repr(value);
    if (shown == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    mt_status st = mt_fail(c, MT_EENV, ENV_RESTART "=%s is not a restart count: Slurm sets "
                                       "it in a batch job it requeued (1 at the first "
                                       "requeue), in ASCII digits 0-9 below 2**31, and a "
                                       "simulation the launcher started reads it to skip "
                                       "the steps its receivers hold; do not set it by hand",
                           shown);
    free(shown);
    return st;
}

/* The interval between a rerun's signs of life (the variable checked at the start). */
static double sign_interval(void) {
    const char *value = getenv(ENV_SILENCE);
    char *s = value == NULL ? NULL : mt_py_strip(value);
    double silence = s == NULL ? -1.0 : seconds_of(s);
    free(s);
    if (!(silence > 0.0)) return SIGN_DEFAULT;
    return SIGN_SHARE * silence > SIGN_FLOOR ? SIGN_SHARE * silence : SIGN_FLOOR;
}

long mt_rerun_attempt(void) {
    const char *v = getenv(ENV_ATTEMPT);
    if (v == NULL) return -1;
    while (isspace((unsigned char)*v)) ++v;
    const char *digits = *v == '+' || *v == '-' ? v + 1 : v;
    if (!isdigit((unsigned char)*digits)) return -1; /* (also: unset, or spaces only) */
    char *end = NULL;
    errno = 0;
    long n = strtol(v, &end, 10);
    while (end != NULL && isspace((unsigned char)*end)) ++end;
    return errno != 0 || end == NULL || *end != '\0' ? -1 : n; /* (not a number: -1) */
}

/* Every step is sent: say why (the message of mt_held_ask, or `why`), as rerun.py does. */
static void say_not_asked(mt_client *c, const char *why) {
    fprintf(stderr, "melissa_trainer: simulation %llu rank %d (attempt %ld): could not ask "
                    "its receivers which steps they hold (%s): it sends every step, their "
                    "duplicates dropped\n",
            (unsigned long long)c->simulation_id, c->rank, mt_rerun_attempt(), why);
}

/* Each receiver's HELD into held (rv->n of them): true, or false (said on stderr). */
static bool ask(mt_client *c, mt_rendezvous *rv, mt_held *held) {
    bool same = rv->n == c->n_endpoints;
    for (size_t r = 0; same && r < rv->n; ++r)
        same = strcmp(rv->endpoints[r], c->endpoints[r]) == 0;
    if (!same) {
        say_not_asked(c, "the rendezvous names other receivers than the client's");
        return false;
    }
    char *kept = c->error; /* (mt_send's: cleared as it began; taken back after) */
    c->error = NULL;
    mt_status st = mt_held_ask(c, rv, ASK_TIMEOUT, held, NULL);
    if (st != MT_OK) say_not_asked(c, c->error != NULL ? c->error : "no answer");
    mt_clear_error(c);
    c->error = kept;
    return st == MT_OK;
}

void mt_rerun_ask(mt_client *c) {
    c->rerun_asked = true;
    const char *unused = NULL;
    bool requeued = restart_count(&unused) > 0; /* (a Slurm requeue: the attempt kept) */
    if (c->rendezvous_used == NULL || (mt_rerun_attempt() < 1 && !requeued)) return;
    mt_rendezvous rv;
    mt_buf problem = {0};
    mt_status st = mt_rendezvous_read(c->rendezvous_used, &rv, &problem, false);
    if (st != MT_OK) {
        char why[640];
        snprintf(why, sizeof why, "%s", st == MT_ENOMEM || problem.oom ? "out of memory"
                                        : problem.data != NULL ? problem.data
                                        : "the rendezvous cannot be read");
        say_not_asked(c, why);
        free(problem.data);
        return;
    }
    free(problem.data);
    mt_held *held = calloc(rv.n > 0 ? rv.n : 1, sizeof *held);
    bool useful = false;
    if (held == NULL) say_not_asked(c, "out of memory");
    else if (ask(c, &rv, held))
        for (size_t r = 0; r < rv.n; ++r)
            useful = useful || held[r].status == MT_HELD_STEPS ||
                     held[r].status == MT_HELD_FINISHED;
    if (useful) { /* (else nothing held: every step is sent, nothing kept) */
        c->rerun_held = held, c->rerun_n = rv.n;
        c->rerun_interval = sign_interval();
        c->rerun_heard = -INFINITY; /* (nothing sent yet) */
    } else {
        for (size_t r = 0; held != NULL && r < rv.n; ++r) mt_held_free(&held[r]);
        free(held);
    }
    mt_rendezvous_free(&rv);
}

bool mt_rerun_skips(mt_client *c, uint64_t step, double now) {
    if (c->rerun_held == NULL) return false;
    size_t r = mt_receiver_of(c->simulation_id, step, c->rerun_n, c->routing);
    bool held = mt_held_holds(&c->rerun_held[r], step, c->simulation_id, c->routing);
    double last = c->rerun_heard > c->opened ? c->rerun_heard : c->opened;
    if (held && !isinf(c->rerun_heard) && now - last < c->rerun_interval) return true;
    c->rerun_heard = now; /* (sent: the first, a sign of life, or not held) */
    return false;
}

void mt_rerun_drop(mt_client *c) {
    for (size_t r = 0; c->rerun_held != NULL && r < c->rerun_n; ++r)
        mt_held_free(&c->rerun_held[r]);
    free(c->rerun_held);
    c->rerun_held = NULL, c->rerun_n = 0;
}
