/* missing_dir.c: what a C client says of a rendezvous path that is not a directory, in
 * the Python client's words (client/rendezvous_words.py missing_note, client/
 * predict_lookup.py MissingDirectory.note). A request whose rendezvous directory did not
 * exist said only "cannot list 'DIR': No such file or directory" at each timeout, where
 * the Python Predictor named the likely typo, the directory likely meant, or what
 * creates it, and warned once, 3 s into its lookups (tests/c/
 * test_c_predict_missing_dir.py compares both). Paths are made absolute
 * against the working directory, trailing slashes dropped (not otherwise normalised, as
 * os.path.abspath would: "a/../b" is said as given); names are compared byte by byte
 * (Python: by character; the same for ASCII names). And a rendezvous whose trainer runs
 * but holds no serve file (mt_unserved_check, mt_unserved_note: predict_lookup.py
 * Unserved): a trainer without a ServingHook, said as Python says it
 * (tests/c/test_c_predict_unserved.py); or whose trainer ran and stopped (mt_stopped_story:
 * predict_lookup.py stopped_story). */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "missing_dir.h"
#include "restarts_left.h"
#include "rendezvous.h"

#define NOTICE_AFTER 3.0 /* s: stream/endpoints.py NOTICE_AFTER */
#define LIKE_MAX 199 /* characters: a longer name is guessed at by no sibling (autojunk) */

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool trainer_runs(const char *dir);

/* Whether `path` holds a rank file (rank_<digits>.json: a rendezvous, rendezvous_words.py
 * _RANK_FILE). */
static bool has_rank_files(const char *path) {
    DIR *d = opendir(path);
    if (d == NULL) return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name), k = 5;
        if (n < 11 || strncmp(e->d_name, "rank_", 5) != 0 || strcmp(e->d_name + n - 5, ".json"))
            continue;
        while (k < n - 5 && isdigit((unsigned char)e->d_name[k])) ++k;
        found = k == n - 5;
    }
    closedir(d);
    return found;
}

/* The directory of base meant for its first missing component `name` (n bytes), the
 * path's rest after it `tail` ("" or "/..."), as rendezvous_words.py _meant: of the
 * names close to it (common/words.py close_names: difflib.get_close_matches of the name
 * lowercased, its dashes read as underscores, cutoff 0.6), the most recently modified
 * path (name, then tail) where a trainer runs (a tie to the greater name); else the
 * closest (the best ratio, a tie to the greater name), *stopped when its path holds rank
 * files. Into `out`; false if none is close. */
static bool closest_dir(const char *base, const char *name, size_t n, const char *tail,
                        char *out, size_t size, bool *stopped) {
    char probe[LIKE_MAX + 1], sub[4096], runs[256] = "";
    long long runs_at = 0;
    if (n > LIKE_MAX) return false;
    for (size_t k = 0; k < n; ++k)
        probe[k] = name[k] == '-' ? '_' : (char)tolower((unsigned char)name[k]);
    DIR *d = opendir(base);
    if (d == NULL) return false; /* (unreadable: no guess) */
    double best = 0.6;
    bool found = false;
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(sub, sizeof sub, "%s/%s", strcmp(base, "/") == 0 ? "" : base, e->d_name);
        if (!is_dir(sub)) continue;
        double r = mt_name_ratio(e->d_name, strlen(e->d_name), probe, n);
        if (r < 0.6) continue;
        if (r > best || (r == best && (!found || strcmp(e->d_name, out) > 0))) {
            best = r, found = true;
            snprintf(out, size, "%s", e->d_name);
        }
        snprintf(sub + strlen(sub), sizeof sub - strlen(sub), "%s", tail);
        if (!trainer_runs(sub) || stat(sub, &st) != 0) continue;
        long long at = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
        if (runs[0] == '\0' || at > runs_at || (at == runs_at && strcmp(e->d_name, runs) > 0)) {
            runs_at = at;
            snprintf(runs, sizeof runs, "%s", e->d_name);
        }
    }
    closedir(d);
    *stopped = false;
    if (runs[0] != '\0') {
        snprintf(out, size, "%s", runs);
    } else if (found) {
        snprintf(sub, sizeof sub, "%s/%s%s", strcmp(base, "/") == 0 ? "" : base, out, tail);
        *stopped = has_rank_files(sub);
    }
    return found;
}

/* `dir` made absolute against the working directory, its trailing slashes dropped. */
static void abs_path(const char *dir, char *path, size_t size) {
    char cwd[2048];
    if (dir[0] == '/' || getcwd(cwd, sizeof cwd) == NULL)
        snprintf(path, size, "%s", dir);
    else
        snprintf(path, size, "%s/%s", cwd, dir);
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') path[--n] = '\0';
}

bool mt_missing_note(const char *dir, const char *source, mt_buf *b) {
    char path[4096], parent[4096], base[4096], close[256];
    abs_path(dir, path, sizeof path);
    if (is_dir(path)) return false;
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (slash != NULL) *(slash == parent ? slash + 1 : slash) = '\0';
    if (!is_dir(parent))
        mt_buf_printf(b, "; its parent %s does not exist either: a typo in %s is likely, "
                         "unless its trainer has not started yet (the trainer creates "
                         "{output_dir}/rendezvous, its files rank_<r>.json)",
                      parent, source);
    if (path[0] != '/') return true; /* (no working directory known: no guess) */
    /* base: the deepest ancestor that exists; `first`: the component below it */
    snprintf(base, sizeof base, "%s", path);
    while (!is_dir(base) && strcmp(base, "/") != 0) {
        slash = strrchr(base, '/');
        *(slash == base ? slash + 1 : slash) = '\0';
    }
    const char *first = path + strlen(base) + (strcmp(base, "/") == 0 ? 0 : 1);
    size_t len = strcspn(first, "/");
    bool stopped;
    if (len == 0 || !closest_dir(base, first, len, first + len, close, sizeof close, &stopped))
        return true;
    if (strlen(close) == len && strncmp(close, first, len) == 0) return true;
    mt_buf_printf(b, "; did you mean %s/%s%s?%s", strcmp(base, "/") == 0 ? "" : base, close,
                  first + len, stopped ? MT_STOPPED_RUN : "");
    return true;
}

void mt_missing_dir_note(const char *dir, const char *source, mt_buf *b) {
    size_t before = b->len;
    if (!mt_missing_note(dir, source, b) || b->len != before || b->oom) return;
    mt_buf_printf(b, "; the trainer creates it at its start ({output_dir}/rendezvous): until "
                     "then each request waits its whole timeout; check %s if one runs",
                  source);
}

void mt_missing_dir_check(mt_client *c, const char *dir, const char *source, const char *why) {
    if (c->predict_missing < 0) return; /* (said once: the next requests' errors say it) */
    char path[4096];
    abs_path(dir, path, sizeof path);
    if (is_dir(path)) {
        c->predict_missing = 0;
        return;
    }
    double now = mt_now();
    if (c->predict_missing == 0) c->predict_missing = now;
    if (now - c->predict_missing < NOTICE_AFTER) return;
    c->predict_missing = -1;
    mt_buf b = {0};
    mt_missing_dir_note(dir, source, &b);
    if (!b.oom)
        fprintf(stderr, "melissa_trainer: mt_predict: %s=%s: %s%s; each request waits up to its "
                        "timeout for the trainer to create it (then fails: MT_ETIMEDOUT)\n",
                source, path, why, b.len ? b.data : "");
    free(b.data);
}

/* Whether a trainer runs in the rendezvous `dir`: its receivers' files complete, none
 * stopped nor of a trainer gone (one look of a client's start's: trainer_alive.c;
 * predict_lookup.py trainer_runs). */
static bool trainer_runs(const char *dir) {
    mt_rendezvous rv = {0};
    mt_buf problem = {0};
    mt_status st = mt_rendezvous_read_live(dir, &rv, &problem, NULL);
    free(problem.data);
    if (st == MT_OK) mt_rendezvous_free(&rv);
    return st == MT_OK;
}

/* An object member's JSON object (kind MT_JSON_OTHER, raw text "{...}") parsed into *m. */
static bool object_of(const mt_json_member *v, mt_json_member **m, size_t *n) {
    char err[160];
    return v != NULL && v->kind == MT_JSON_OTHER && v->string[0] == '{' &&
           mt_json_object(v->string, m, n, err, sizeof err);
}

/* predict_lookup.py after_stop: `message` NULL when the reason has none; `left` the
 * reason's restarts_left (an "error" with some left is followed by a restarted run). */
static const char *after_stop(const char *code, const char *message, uint32_t left) {
    if (code != NULL && strcmp(code, "error") == 0 && left > 0) return MT_RESUMED_SERVES;
    if (code != NULL && strcmp(code, "end") == 0) /* (a stream's end: no larger max_steps) */
        return message != NULL && strncmp(message, MT_STREAM_END, strlen(MT_STREAM_END)) == 0
                   ? MT_STREAM_ENDED_SERVES
                   : MT_ENDED_SERVES;
    if (code != NULL && (strcmp(code, "error") == 0 || strcmp(code, "nonfinite") == 0))
        return MT_FAILED_SERVES;
    return MT_RESUMED_SERVES;
}

char *mt_stop_text(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/rank_0.json", dir);
    return mt_read_file(path);
}

bool mt_stop_reason(const char *text, const char *run_id, mt_buf *said, const char **after) {
    char err[160];
    mt_json_member *m = NULL, *rec = NULL, *rm = NULL;
    size_t n = 0, recn = 0, rn = 0;
    if (text == NULL || !mt_json_object(text, &m, &n, err, sizeof err))
        return false; /* (none, or being replaced: nothing to say) */
    const mt_json_member *stopped = mt_json_find(m, n, "stopped");
    bool marked = stopped != NULL && stopped->kind == MT_JSON_OTHER &&
                  strcmp(stopped->string, "true") == 0;
    if (marked) {
        object_of(mt_json_find(m, n, "stop_record"), &rec, &recn);
        const mt_json_member *whose = mt_json_find(m, n, "run_id");
        if (whose == NULL) whose = mt_json_find(rec, recn, "run_id");
        /* (another run's: this run's trainer is awaited, which that one's resume is not) */
        marked = run_id == NULL || whose == NULL || whose->kind != MT_JSON_STRING ||
                 strcmp(whose->string, run_id) == 0;
    }
    if (marked) {
        object_of(mt_json_find(rec, recn, "reason"), &rm, &rn);
        const mt_json_member *code = mt_json_find(rm, rn, "code");
        const mt_json_member *message = mt_json_find(rm, rn, "message");
        bool coded = code != NULL && code->kind == MT_JSON_STRING;
        if (coded) { /* (printf: said stays a string) */
            size_t c32 = mt_utf8_prefix(code->string, strlen(code->string), 32);
            mt_buf_printf(said, "%.*s", (int)c32, code->string);
            if (message != NULL && message->kind == MT_JSON_STRING) {
                mt_buf_printf(said, ": %.*s", (int)mt_reason_line(message->string),
                              message->string);
            }
        }
        bool says = message != NULL && message->kind == MT_JSON_STRING;
        bool bad = false; /* (an invalid one: 0, the close's word says it) */
        uint32_t left = mt_restarts_left(mt_json_find(rm, rn, "restarts_left"), &bad);
        *after = after_stop(coded ? code->string : NULL, says ? message->string : NULL, left);
    }
    mt_json_free(rm, rn);
    mt_json_free(rec, recn);
    mt_json_free(m, n);
    return marked;
}

int mt_stopped_story(const char *text, const char *run_id, const char *why, bool served,
                     mt_buf *b) {
    if (!served && strcmp(why, MT_NO_SERVER) != 0) return 0;
    mt_buf said = {0};
    const char *after = NULL;
    bool stopped = mt_stop_reason(text, run_id, &said, &after);
    size_t len = strlen(why); /* (one story: no "(yet)", which awaits a first trainer) */
    if (len >= 6 && strcmp(why + len - 6, " (yet)") == 0) len -= 6;
    if (stopped || served)
        mt_buf_printf(b, "%s (%s%s%.*s)%s%s", served ? MT_SERVED_STOPPED : MT_STOPPED_THERE,
                      said.len ? said.data : "", said.len ? "; " : "", (int)len, why,
                      stopped ? ": " : "", stopped ? after : "");
    if (said.oom) b->oom = true;
    free(said.data);
    return !stopped ? 0 : strcmp(after, MT_RESUMED_SERVES) == 0 ? 1 : 2;
}

void mt_unserved_check(mt_client *c, const char *dir, const char *why, const char *story) {
    double *since = &c->predict_unserved[0], *looked = &c->predict_unserved[1];
    if (*since < 0) return; /* (said once: the next requests' errors say it) */
    if (strcmp(why, MT_NO_SERVER) != 0) {
        *since = 0;
        return;
    }
    double now = mt_now();
    if (*since == 0) *since = now;
    if (now - (*looked > *since ? *looked : *since) < NOTICE_AFTER) return;
    *looked = now; /* (a look may dial a remote trainer for up to 1 s: once in 3 s) */
    mt_buf said = {0}; /* (a running trainer's fix stands alone; a stopped one's story too) */
    if (trainer_runs(dir))
        mt_buf_printf(&said, "%s", MT_UNSERVED);
    else if (story != NULL)
        mt_buf_puts(&said, story);
    if (said.len == 0 || said.oom) { /* (neither: nothing to say yet, looked at again later) */
        free(said.data);
        return;
    }
    *since = -1;
    char path[4096];
    abs_path(dir, path, sizeof path);
    fprintf(stderr, "melissa_trainer: mt_predict: %s: %s; each request waits up to its "
                    "timeout for a serve file (then fails: MT_ETIMEDOUT)\n",
            path, said.data);
    free(said.data);
}

void mt_unserved_note(const char *dir, const char *why, mt_buf *b) {
    if (strcmp(why, MT_NO_SERVER) == 0 && trainer_runs(dir)) mt_buf_puts(b, "; " MT_UNSERVED);
}
