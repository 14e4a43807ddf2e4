/* stop_record.c: a closing client whose trainer stopped: what the stop record says of
 * this rank's BYE (docs/protocol.md, section 2 "The stop record" and section 17b "A
 * trainer that stopped"; melissa_trainer/client/stopped.py, whose rules these are).
 *
 * A receiver that stops writes, into its rendezvous file and in the rename that marks it
 * stopped, the receipts it would have given (its ingest had stopped: the record is
 * final) and why it stopped. receipt.c asks mt_stop_record_decide for each receiver not
 * confirmed yet, before each round (and close_wait.c and a blocked send, send_wait.c,
 * mt_stop_record_for_good while a receiver is disconnected): a record is read only when
 * the file is marked stopped by the endpoint the client streamed to and names the
 * client's run; one that does not parse is ignored (a warning on stderr, once per
 * receiver and wait). Plain JSON (json.c), every field checked, the file read whole
 * (read_file.c: up to 4 MiB). */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "restarts_left.h"
#include "restarts_word.h"

#define MAX_ROWS 4096u      /* stop_record.py RECORD_LIMIT */

/* A decimal u64 (digits only, no sign, no fraction), as the record's integers are. */
static bool parse_u64(const char *s, uint64_t *out) {
    if (s == NULL || !isdigit((unsigned char)*s)) return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == NULL || *end != '\0') return false;
    *out = (uint64_t)v;
    return true;
}

/* A JSON integer in 0 .. 2^64 - 1, read exactly (json.c's u64: an id above 2^53 is not
 * its double's neighbour). */
static bool number_u64(const mt_json_member *m, uint64_t *out) {
    if (m == NULL || m->kind != MT_JSON_NUMBER || !m->exact) return false;
    *out = m->u64;
    return true;
}

/* The rows of `text` (an array of arrays of `width` u64, or of `alt` when not 0), each
 * passed to `row` with its width; false (with `why`) if one is not such a row or there are
 * more than MAX_ROWS. */
typedef bool (*row_fn)(const uint64_t *row, size_t width, void *ctx);
static bool rows(const char *text, size_t width, size_t alt, row_fn row, void *ctx,
                 const char **why) {
    char **items = NULL, **cells = NULL;
    size_t n = 0, m = 0;
    char err[64];
    if (!mt_json_array(text, &items, &n, err, sizeof err) || n > MAX_ROWS) {
        *why = "not a list of at most 4096 rows";
        mt_json_array_free(items, n);
        return false;
    }
    bool ok = true;
    for (size_t i = 0; i < n && ok; ++i) {
        uint64_t v[5] = {0};
        ok = mt_json_array(items[i], &cells, &m, err, sizeof err) &&
             (m == width || (alt != 0 && m == alt));
        for (size_t k = 0; ok && k < m; ++k) ok = parse_u64(cells[k], &v[k]);
        size_t got = m; /* (its width, for `row`) */
        mt_json_array_free(cells, m);
        cells = NULL, m = 0;
        if (!ok) *why = "a bad row";
        else if (!row(v, got, ctx)) ok = false, *why = "a row with bad counts";
    }
    mt_json_array_free(items, n);
    return ok;
}

typedef struct finding {
    uint64_t simulation_id, count;
    int client_rank;
    mt_stop_said *out;
    bool found;
} finding;

static bool finished_row(const uint64_t *r, size_t width, void *ctx) {
    (void)width;
    finding *f = ctx;
    if (r[2] > r[1]) return false; /* (more refused than held) */
    if (!f->found && r[0] == f->simulation_id) {
        f->found = true;
        f->out->bye = MT_RECEIPT_FINISHED, f->out->steps = r[1], f->out->nonfinite = r[2];
        f->out->bye_steps = 0;
    }
    return true;
}

static bool bye_row(const uint64_t *r, size_t width, void *ctx) {
    (void)width;
    finding *f = ctx;
    if (r[4] > r[3] || r[1] >= 65536) return false;
    if (!f->found && r[0] == f->simulation_id && r[1] == (uint64_t)f->client_rank &&
        r[2] == f->count) {
        f->found = true;
        f->out->bye = MT_RECEIPT_BYE, f->out->bye_steps = r[2];
        f->out->steps = r[3], f->out->nonfinite = r[4];
    }
    return true;
}

/* A record's "expected_end" (the stream ended on expected_simulations: stop_record.py
 * ExpectedEnd): its counts, and the steps held and refused of this simulation if it is
 * among the unfinished ones (0 else); of the record's "unfinished", the first and last
 * step held too when its row says them (spanned: a row of 5; an older trainer's of 3
 * confirms nothing). */
typedef struct expected_end {
    uint64_t expected, finished, abandoned, simulation_id, steps, refused, first, last;
    bool found, spanned; /* (this simulation among the rows; its row of 5) */
} expected_end;

static bool unfinished_row(const uint64_t *r, size_t width, void *ctx) {
    expected_end *e = ctx;
    if (r[2] > r[1]) return false; /* (more refused than held) */
    /* (first after last, or more steps than the range holds: stop_record_read.py parse_record) */
    if (width == 5 && (r[3] > r[4] || (r[1] != 0 && r[4] - r[3] < r[1] - 1))) return false;
    if (r[0] == e->simulation_id) {
        e->steps = r[1], e->refused = r[2], e->found = true;
        e->spanned = width == 5, e->first = r[3], e->last = r[4];
    }
    return true;
}

/* Parse `text` (the "expected_end" object) into *e; false (with `why`) if invalid. */
static bool parse_expected_end(const char *text, expected_end *e, const char **why) {
    mt_json_member *m = NULL;
    size_t n = 0;
    char err[160];
    *why = "a bad expected_end";
    bool ok = mt_json_object(text, &m, &n, err, sizeof err) &&
              number_u64(mt_json_find(m, n, "expected_simulations"), &e->expected) &&
              number_u64(mt_json_find(m, n, "finished"), &e->finished) &&
              number_u64(mt_json_find(m, n, "abandoned"), &e->abandoned);
    const mt_json_member *rows_of = ok ? mt_json_find(m, n, "unfinished") : NULL;
    ok = ok && rows_of != NULL && rows(rows_of->string, 3, 0, unfinished_row, e, why);
    mt_json_free(m, n);
    return ok;
}

/* Parse the record `text` and decide (see mt_stop_record_decide, and
 * mt_stop_record_for_good with `for_good`); `why` set when invalid. */
static mt_stop_outcome decide_record(const char *text, const char *run_id, uint64_t sid,
                                     int client_rank, const mt_stop_sent *sent, bool for_good,
                                     mt_stop_said *out, const char **why) {
    uint64_t count = sent->count;
    mt_json_member *m = NULL, *rm = NULL;
    size_t n = 0, rn = 0;
    char err[160];
    mt_stop_outcome said = MT_STOP_INVALID;
    *why = "not a stop record of version 1";
    if (!mt_json_object(text, &m, &n, err, sizeof err)) goto done;
    const mt_json_member *version = mt_json_find(m, n, "version");
    const mt_json_member *run = mt_json_find(m, n, "run_id");
    const mt_json_member *reason = mt_json_find(m, n, "reason");
    const mt_json_member *complete = mt_json_find(m, n, "complete");
    const mt_json_member *finished = mt_json_find(m, n, "finished");
    const mt_json_member *byes = mt_json_find(m, n, "byes");
    const mt_json_member *ended = mt_json_find(m, n, "expected_end");
    const mt_json_member *held = mt_json_find(m, n, "unfinished"); /* (absent: an older record) */
    if (version == NULL || version->kind != MT_JSON_NUMBER || !version->integer ||
        version->number != 1.0)
        goto done;
    *why = "a bad run id";
    bool null_run = run == NULL || (run->kind == MT_JSON_OTHER && strcmp(run->string, "null") == 0);
    if (!null_run && (run->kind != MT_JSON_STRING || !mt_valid_run_id(run->string))) goto done;
    *why = "a bad reason";
    if (reason == NULL || reason->kind != MT_JSON_OTHER ||
        !mt_json_object(reason->string, &rm, &rn, err, sizeof err))
        goto done;
    const mt_json_member *code = mt_json_find(rm, rn, "code");
    const mt_json_member *message = mt_json_find(rm, rn, "message");
    const mt_json_member *rsid = mt_json_find(rm, rn, "simulation_id");
    const mt_json_member *rstep = mt_json_find(rm, rn, "time_step");
    const mt_json_member *rleft = mt_json_find(rm, rn, "restarts_left");
    /* ("broken": a collective broke with every peer alive; followed as "preempted") */
    static const char *const codes[] = {"end",   "preempted", "nonfinite",
                                        "error", "stopped",   "broken"};
    bool known = false;
    for (size_t k = 0; code != NULL && code->kind == MT_JSON_STRING && k < 6; ++k)
        known = known || strcmp(code->string, codes[k]) == 0;
    if (!known || message == NULL || message->kind != MT_JSON_STRING ||
        strlen(message->string) > MT_STOP_MESSAGE_MAX)
        goto done;
    bool nonfinite = strcmp(code->string, "nonfinite") == 0;
    uint64_t failed_sid = 0, failed_step = 0;
    if (nonfinite && !(number_u64(rsid, &failed_sid) && number_u64(rstep, &failed_step)))
        goto done;
    *why = "a bad complete flag";
    if (complete == NULL || complete->kind != MT_JSON_OTHER ||
        (strcmp(complete->string, "true") != 0 && strcmp(complete->string, "false") != 0))
        goto done;
    finding f = {sid, count, client_rank, out, false};
    if (finished == NULL || byes == NULL ||
        !rows(finished->string, 3, 0, finished_row, &f, why) ||
        !rows(byes->string, 5, 0, bye_row, &f, why))
        goto done;
    expected_end e = {0, 0, 0, sid, 0, 0, 0, 0, false, false};
    if (ended != NULL &&
        (ended->kind != MT_JSON_OTHER || !parse_expected_end(ended->string, &e, why)))
        goto done;
    expected_end h = {0, 0, 0, sid, 0, 0, 0, 0, false, false}; /* (held of this simulation) */
    if (held != NULL && (held->kind != MT_JSON_OTHER ||
                         !rows(held->string, 3, 5, unfinished_row, &h, why)))
        goto done;
    bool whole = strcmp(complete->string, "true") == 0, end = strcmp(code->string, "end") == 0;
    /* (steps held out of those sent are not a count of them taken: stopped.py decide) */
    out->held_known = h.found && !(h.spanned && h.steps != 0 &&
                                   !(sent->spanned && sent->first <= h.first &&
                                     h.first <= h.last && h.last <= sent->last));
    out->held = h.steps, out->sent = count;
    snprintf(out->code, sizeof out->code, "%s", code->string);
    snprintf(out->message, sizeof out->message, "%s", message->string);
    out->time_step = failed_step;
    bool failed = strcmp(code->string, "error") == 0, left_bad = false; /* (of "error") */
    uint32_t left = mt_restarts_left(rleft, &left_bad);
    out->restarts_left = failed ? left : 0;
    bool other_run =
        null_run != (run_id == NULL) || (!null_run && strcmp(run->string, run_id) != 0);
    out->restarts_bad = failed && left_bad && !other_run;
    /* valid: now what it says (the run first: another run's record says nothing) */
    if (other_run)
        said = MT_STOP_UNDECIDED;
    else if ((out->preempted = strcmp(code->string, "preempted") == 0 ||
                                strcmp(code->string, "broken") == 0 || out->restarts_left > 0))
        said = MT_STOP_UNDECIDED; /* (a resumed trainer follows: the waits decide) */
    else if (nonfinite && failed_sid == sid)
        said = MT_STOP_REFUSED;
    else if (for_good) /* (its messages undelivered: neither its rows nor their bound matter) */
        said = strcmp(code->string, "stopped") != 0 ? MT_STOP_ENDED : MT_STOP_UNDECIDED;
    else if (f.found)
        said = MT_STOP_CONFIRMED;
    /* (as many steps held as sent there, from the least to the greatest sent: the steps
     * held count every run of the simulation, so a count alone would let an earlier
     * run's stand for a restarted run's lost ones; stopped.py _taken) */
    else if ((out->taken = whole && end && ended == NULL && h.found && h.spanned &&
                           h.steps == count &&
                           (count == 0 || (sent->spanned && h.first == sent->first &&
                                           h.last == sent->last)))) {
        said = MT_STOP_CONFIRMED; /* (the run ended, every step sent taken: stopped.py) */
        out->bye = MT_RECEIPT_BYE, out->bye_steps = count;
        out->steps = h.steps, out->nonfinite = h.refused;
    } else if (whole && strcmp(code->string, "stopped") != 0)
        said = MT_STOP_ENDED;
    else
        said = MT_STOP_UNDECIDED;
    if (said == MT_STOP_ENDED && ended != NULL && strcmp(code->string, "end") == 0 &&
        strcmp(complete->string, "true") == 0) { /* (an incomplete one: "ended", as Python) */
        /* the study ended without needing this simulation (started beyond
         * expected_simulations): told so with the counts (stop_said.c) */
        out->not_needed = true, out->steps = e.steps, out->nonfinite = e.refused;
        out->expected = e.expected, out->finished = e.finished, out->abandoned = e.abandoned;
    }
done:
    mt_json_free(rm, rn);
    mt_json_free(m, n);
    return said;
}

void mt_stop_record_words(const char *record, char *out, size_t size) {
    mt_json_member *m = NULL, *rm = NULL;
    size_t n = 0, rn = 0;
    char err[160];
    bool ok = record != NULL && *record == '{' && mt_json_object(record, &m, &n, err, sizeof err);
    const mt_json_member *reason = ok ? mt_json_find(m, n, "reason") : NULL;
    const mt_json_member *ended = ok ? mt_json_find(m, n, "expected_end") : NULL;
    if (reason != NULL && reason->kind == MT_JSON_OTHER && *reason->string == '{')
        mt_json_object(reason->string, &rm, &rn, err, sizeof err);
    const mt_json_member *code = mt_json_find(rm, rn, "code");
    const mt_json_member *message = mt_json_find(rm, rn, "message");
    bool coded = code != NULL && code->kind == MT_JSON_STRING;
    mt_json_member *em = NULL;
    size_t en = 0;
    if (coded && strcmp(code->string, "end") == 0 && ended != NULL &&
        ended->kind == MT_JSON_OTHER && *ended->string == '{' &&
        mt_json_object(ended->string, &em, &en, err, sizeof err)) {
        const mt_json_member *expected = mt_json_find(em, en, "expected_simulations");
        char many[48] = "None"; /* (as Python prints a missing or null one) */
        if (expected != NULL && expected->kind == MT_JSON_NUMBER && expected->exact)
            snprintf(many, sizeof many, "%llu", (unsigned long long)expected->u64);
        else if (expected != NULL && expected->kind == MT_JSON_NUMBER)
            snprintf(many, sizeof many, "%.17g", expected->number);
        else if (expected != NULL && strcmp(expected->string, "null") != 0)
            snprintf(many, sizeof many, "%.40s", expected->string);
        snprintf(out, size, "ended: the study had its expected_simulations=%s and needs no "
                            "more simulations (unless a trainer started there again publishes)",
                 many);
    } else {
        /* (a failure's message says what to fix before resuming: endpoints.py says the code) */
        bool failed = coded && (strcmp(code->string, "error") == 0 ||
                                strcmp(code->string, "nonfinite") == 0);
        bool said = failed && message != NULL && message->kind == MT_JSON_STRING;
        size_t line = said ? mt_reason_line(message->string) : 0; /* (one line, as Python's) */
        /* (the code's first 32 characters, as Python's said_code) */
        size_t c32 = coded ? mt_utf8_prefix(code->string, strlen(code->string), 32) : 0;
        snprintf(out, size, "stopped%s%.*s%s%.*s%s (a trainer resumed from its checkpoint "
                            "publishes again)",
                 coded ? " (" : "", (int)c32, coded ? code->string : "", said ? ": " : "",
                 (int)line, said ? message->string : "", coded ? ")" : "");
    }
    mt_json_free(em, en);
    mt_json_free(rm, rn);
    mt_json_free(m, n);
}

static mt_stop_outcome look_at(const char *dir, size_t rank, const char *endpoint,
                               const char *run_id, uint64_t simulation_id, int client_rank,
                               const mt_stop_sent *sent, bool for_good, mt_stop_look *look,
                               mt_stop_said *out) {
    char path[4096];
    snprintf(path, sizeof path, "%s/rank_%zu.json", dir, rank);
    struct stat st;
    if (stat(path, &st) != 0) return MT_STOP_UNDECIDED;
    if (look->seen && look->ino == (unsigned long long)st.st_ino &&
        look->mtime == (long long)st.st_mtime && look->size == (long long)st.st_size)
        return MT_STOP_UNDECIDED; /* (unchanged since it decided nothing) */
    look->seen = true, look->ino = (unsigned long long)st.st_ino;
    look->mtime = (long long)st.st_mtime, look->size = (long long)st.st_size;
    char *text = mt_read_file(path);
    if (text == NULL) return MT_STOP_UNDECIDED;
    mt_json_member *m = NULL;
    size_t n = 0;
    char err[160];
    mt_stop_outcome said = MT_STOP_UNDECIDED;
    if (mt_json_object(text, &m, &n, err, sizeof err)) {
        const mt_json_member *stopped = mt_json_find(m, n, "stopped");
        const mt_json_member *at = mt_json_find(m, n, "endpoint");
        const mt_json_member *record = mt_json_find(m, n, "stop_record");
        if (stopped != NULL && stopped->kind == MT_JSON_OTHER &&
            strcmp(stopped->string, "true") == 0 && at != NULL && at->kind == MT_JSON_STRING &&
            strcmp(at->string, endpoint) == 0 && record != NULL) {
            const char *why = NULL;
            said = record->kind == MT_JSON_OTHER
                       ? decide_record(record->string, run_id, simulation_id, client_rank,
                                       sent, for_good, out, &why)
                       : MT_STOP_INVALID;
            if (said == MT_STOP_INVALID) {
                if (!look->warned)
                    fprintf(stderr, "melissa_trainer: mt_client_close: the stop record in %s "
                                    "is not valid (%s): ignored, the close waits for the "
                                    "trainer as without one\n",
                            path, why != NULL ? why : "not an object");
                look->warned = true;
                said = MT_STOP_UNDECIDED;
            } else if (out->restarts_bad && !look->restarts_warned) {
                look->restarts_warned = true; /* (client/stopped.py's words, after its whose) */
                if (mt_restarts_word_first(path, run_id)) /* (once per process and run) */
                    fprintf(stderr, "melissa_trainer: mt_client_close: the stop record in %s: "
                                    "its restarts_left is not an integer from 0 to %u: read "
                                    "as 0, no restart of the failed run expected\n",
                            path, MT_MAX_RESTARTS_LEFT);
            }
        }
    }
    mt_json_free(m, n);
    free(text);
    return said;
}

mt_stop_outcome mt_stop_record_decide(const char *dir, size_t rank, const char *endpoint,
                                      const char *run_id, uint64_t simulation_id,
                                      int client_rank, const mt_stop_sent *sent,
                                      mt_stop_look *look, mt_stop_said *out) {
    return look_at(dir, rank, endpoint, run_id, simulation_id, client_rank, sent, false, look,
                   out);
}

mt_stop_outcome mt_stop_record_for_good(const char *dir, size_t rank, const char *endpoint,
                                        const char *run_id, uint64_t simulation_id,
                                        const mt_stop_sent *sent, mt_stop_look *look,
                                        mt_stop_said *out) {
    mt_stop_sent none = {0, 0, 0, false}; /* (sent: held_known's span, as the receipt's) */
    return look_at(dir, rank, endpoint, run_id, simulation_id, 0, sent ? sent : &none, true,
                   look, out);
}
