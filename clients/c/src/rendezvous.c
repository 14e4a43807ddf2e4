/* rendezvous.c: the receivers a trainer published in its rendezvous directory
 * (melissa_trainer/stream/endpoints.py fetch_rendezvous: one rank_{r}.json file per
 * receiver, polled until complete and consistent): their endpoints, in rank order, the
 * CURVE public key of each (a trainer with CURVE publishes it there: a solver needs no
 * MELISSA_TRAINER_KEY, as a Python solver does not) and the run id they name. A file
 * marked "stopped": true (Receiver.stop, endpoints.py mark_stopped: that trainer is down)
 * makes the directory not ready, as for Python: the client waits for the next trainer
 * (one resumed from its checkpoint rewrites the files) rather than dial a dead endpoint,
 * and says why it stopped as its stop record does (a study that ended on its
 * expected_simulations: a solver started late is told so while it waits and in its
 * failure; stop_record.c mt_stop_record_words).
 * Each file may name the receiver's follow socket ("follow_endpoint") and the queries it
 * answers ("follow_kinds"), which the close asks whether it ingested this rank's BYE
 * (receipt.c, 13 listed) or else whether it took the simulation (admission.c), and its
 * "host" and "loopback_scope" (host_scope.c: who can reach a loopback endpoint).
 * A client's start (mt_rendezvous_look `alive`) does not take a file whose trainer is
 * known gone either (trainer_alive.c), said with the other files' words, in rank order,
 * and before a rank missing (Python's words and order: endpoints.py _read_rendezvous).
 * One entry per file read, never per rank of a file's world_size, whose bounds are checked
 * before anything is held (rendezvous_ranks.c: a corrupt world_size of 10^12). */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "rendezvous_ranks.h"

/* A copy of `s` in *to (NULL for NULL); false: no memory. */
static bool dup_to(char **to, const char *s) {
    *to = s != NULL ? strdup(s) : NULL;
    return s == NULL || *to != NULL;
}

/* Whether `text`, a JSON array, lists the number 13 (RECEIPT_QUERY); false for anything
 * else (a malformed list: an older trainer's ADMISSION_QUERY is asked instead). */
static bool lists_receipts(const char *text) {
    char **items = NULL;
    size_t n = 0;
    char err[64];
    bool found = false;
    if (!mt_json_array(text, &items, &n, err, sizeof err)) return false;
    for (size_t i = 0; i < n && !found; ++i) {
        char *end = NULL;
        double v = strtod(items[i], &end);
        while (end != NULL && isspace((unsigned char)*end)) ++end;
        found = end != items[i] && end != NULL && *end == '\0' && v == 13.0;
    }
    mt_json_array_free(items, n);
    return found;
}

/* Whether `text`, a JSON array (a file's "routed_t_mod_w"), lists the integer `id`;
 * false for anything else (routing.py routing_of_entries: read as listing nothing). */
static bool lists_id(const char *text, uint64_t id) {
    char **items = NULL;
    size_t n = 0;
    char err[64];
    bool found = false;
    if (text == NULL || !mt_json_array(text, &items, &n, err, sizeof err)) return false;
    for (size_t i = 0; i < n && !found; ++i) {
        const char *q = items[i];
        while (isspace((unsigned char)*q)) ++q;
        if (!isdigit((unsigned char)*q)) continue; /* (not a non-negative integer) */
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(q, &end, 10);
        while (isspace((unsigned char)*end)) ++end;
        found = *end == '\0' && errno != ERANGE && (uint64_t)v == id;
    }
    mt_json_array_free(items, n);
    return found;
}

bool mt_rendezvous_keeps(const mt_rendezvous *rv, uint64_t simulation_id) {
    for (size_t r = 0; r < rv->n; ++r)
        if (rv->kept != NULL && lists_id(rv->kept[r], simulation_id)) return true;
    return false;
}

void mt_rendezvous_free(mt_rendezvous *rv) {
    for (size_t r = 0; r < rv->n; ++r) {
        if (rv->endpoints != NULL) free(rv->endpoints[r]);
        if (rv->keys != NULL) free(rv->keys[r]);
        if (rv->follows != NULL) free(rv->follows[r]);
        if (rv->kept != NULL) free(rv->kept[r]);
        if (rv->hosts != NULL) free(rv->hosts[r]);
        if (rv->scopes != NULL) free(rv->scopes[r]);
    }
    free(rv->endpoints), free(rv->keys), free(rv->follows), free(rv->run_id), free(rv->receipts);
    free(rv->kept), free(rv->hosts), free(rv->scopes), free(rv->pids), free(rv->runs);
    memset(rv, 0, sizeof *rv);
}

/* What is wrong with one file, "NAME ...": said in rank order, then name, as Python
 * (endpoints.py _read_rendezvous), not in the directory's order (readdir's). */
typedef struct {
    char *name, *words;
} file_words;

/* The digits of the rank of `name` (rank_DIGITS.json), leading zeros skipped (not the
 * last), and how many there are. */
static const char *rank_digits(const char *name, size_t *n) {
    const char *d = name + 5;
    for (*n = strlen(d) - 5; *n > 1 && *d == '0'; ++d) --*n;
    return d;
}

/* By the rank the names say, any number of digits (Python's int), then by name. */
static int by_rank(const void *a, const void *b) {
    const file_words *x = a, *y = b;
    size_t nx, ny;
    const char *dx = rank_digits(x->name, &nx), *dy = rank_digits(y->name, &ny);
    if (nx != ny) return nx < ny ? -1 : 1;
    int c = strncmp(dx, dy, nx);
    return c != 0 ? c : strcmp(x->name, y->name);
}

/* `w` (its words: taken) kept in *said for the file `name`; false: no memory. */
static bool keep_words(file_words **said, size_t *n, const char *name, mt_buf *w) {
    file_words *grown = w->oom ? NULL : realloc(*said, (*n + 1) * sizeof **said);
    char *copy = grown != NULL ? strdup(name) : NULL;
    if (grown != NULL) *said = grown;
    if (copy == NULL) {
        free(w->data);
        return false;
    }
    (*said)[(*n)++] = (file_words){copy, w->data};
    return true;
}

/* `said` sorted (by_rank), appended to `problem` after "; " each, and freed. */
static void say_files(file_words *said, size_t n, mt_buf *problem) {
    if (n > 1) qsort(said, n, sizeof *said, by_rank);
    for (size_t k = 0; k < n; ++k) {
        mt_buf_printf(problem, "%s%s", problem->len ? "; " : "", said[k].words); /* (a string) */
        free(said[k].name), free(said[k].words);
    }
    free(said);
}

/* One more thing wrong with the file `name` of `rank` (FILE_SAY) or with the directory
 * (SAY), after "; " (problem NULL: not wanted). */
#define FILE_SAY(...)                                                                      \
    do {                                                                                   \
        wrong = true;                                                                      \
        mt_buf w_ = {0};                                                                   \
        if (problem != NULL) mt_buf_printf(&w_, __VA_ARGS__);                              \
        if (problem != NULL && !keep_words(&said, &n_said, name, &w_))                     \
            problem->oom = true;                                                           \
    } while (0)
#define SAY(...)                                                                           \
    do {                                                                                   \
        wrong = true;                                                                      \
        if (problem != NULL) {                                                             \
            if (problem->len) mt_buf_puts(problem, "; ");                                  \
            mt_buf_printf(problem, __VA_ARGS__);                                           \
        }                                                                                  \
    } while (0)

mt_status mt_rendezvous_read(const char *dir, mt_rendezvous *out, mt_buf *problem,
                             bool stopped_too) {
    return mt_rendezvous_look(dir, out, problem, stopped_too, false);
}

mt_status mt_rendezvous_look(const char *dir, mt_rendezvous *out, mt_buf *problem,
                             bool stopped_too, bool alive) {
    memset(out, 0, sizeof *out);
    bool wrong = false;
    file_words *said = NULL; /* (each file's words: said in rank order) */
    size_t n_said = 0;
    char mine[256]; /* (this process's pid scope: mt_trainer_runs) */
    bool scoped = alive && mt_own_pid_scope(mine, sizeof mine);
    DIR *d = opendir(dir);
    if (d == NULL) {
        SAY("%s", errno == ENOTDIR ? "it is not a directory" : "the directory does not exist");
        return MT_ERENDEZVOUS;
    }
    mt_ranks ranks = {0}; /* (one per file taken or gone: never one per rank of a world) */
    mt_status st = MT_OK;
    struct dirent *e;
    bool rank_files = false; /* (a file of a rank, taken or not: endpoints.py) */
    while ((e = readdir(d)) != NULL && st == MT_OK) {
        const char *name = e->d_name;
        size_t len = strlen(name);
        if (len < 11 || strncmp(name, "rank_", 5) != 0 || strcmp(name + len - 5, ".json") != 0)
            continue;
        bool digits = true;
        for (size_t k = 5; k < len - 5; ++k) digits = digits && isdigit((unsigned char)name[k]);
        if (!digits) continue;
        rank_files = true;
        size_t n_digits;
        const char *said_rank = rank_digits(name, &n_digits);
        if (n_digits > MT_RANK_DIGITS) { /* (not read: endpoints.py MAX_RANK_DIGITS) */
            FILE_SAY("%s invalid (its rank %.*s has over %d digits: no trainer has so many "
                     "ranks)", name, (int)n_digits, said_rank, MT_RANK_DIGITS);
            continue;
        }
        long long rank = atoll(name + 5);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        char *text = mt_read_file(path); /* (whole: a stop record can be 500 KiB) */
        mt_json_member *m = NULL;
        size_t n = 0;
        char err[160];
        const char *why = NULL;
        if (text == NULL) why = "cannot be read";
        else if (!mt_json_object(text, &m, &n, err, sizeof err)) why = err;
        long long version = -1;
        const char *endpoint = NULL, *run_id = NULL, *key = NULL, *follow = NULL;
        const char *record = NULL; /* the stop record's raw text: why it stopped */
        const char *kept = NULL;   /* "routed_t_mod_w"'s raw text (a list, else ignored) */
        const char *host = NULL, *scope = NULL; /* (strings only: host_scope.py) */
        bool bad_run = false, bad_key = false, bad_follow = false, stopped = false;
        bool receipts = false, routing = false;
        for (size_t k = 0; k < n; ++k) {
            if (strcmp(m[k].key, "routing") == 0) /* (routing.py routing_of_entries) */
                routing = m[k].kind == MT_JSON_STRING &&
                          strcmp(m[k].string, "simulation_step") == 0;
            if (strcmp(m[k].key, "routed_t_mod_w") == 0 && m[k].kind == MT_JSON_OTHER)
                kept = m[k].string;
            if (m[k].kind == MT_JSON_STRING && strcmp(m[k].key, "host") == 0) host = m[k].string;
            if (m[k].kind == MT_JSON_STRING && strcmp(m[k].key, "loopback_scope") == 0)
                scope = m[k].string;
            if (strcmp(m[k].key, "run_id") == 0) {
                if (m[k].kind == MT_JSON_STRING && mt_valid_run_id(m[k].string))
                    run_id = m[k].string;
                else
                    bad_run = !(m[k].kind == MT_JSON_OTHER && strcmp(m[k].string, "null") == 0);
            }
            if (strcmp(m[k].key, "curve_public_key") == 0) { /* (endpoints.py _is_key) */
                if (m[k].kind == MT_JSON_STRING && strlen(m[k].string) == 40) key = m[k].string;
                else bad_key = !(m[k].kind == MT_JSON_OTHER && strcmp(m[k].string, "null") == 0);
            }
            if (strcmp(m[k].key, "follow_endpoint") == 0) { /* (endpoints.py: a string) */
                if (m[k].kind == MT_JSON_STRING) follow = *m[k].string ? m[k].string : NULL;
                else bad_follow = true;
            }
            if (strcmp(m[k].key, "follow_kinds") == 0) /* (confirm.py answers_receipts) */
                receipts = m[k].kind == MT_JSON_OTHER && lists_receipts(m[k].string);
            if (strcmp(m[k].key, "stopped") == 0) /* (only true stops, as `is True`) */
                stopped = m[k].kind == MT_JSON_OTHER && strcmp(m[k].string, "true") == 0;
            if (strcmp(m[k].key, "stop_record") == 0 && m[k].kind == MT_JSON_OTHER)
                record = m[k].string;
            bool num = m[k].kind == MT_JSON_NUMBER && m[k].integer;
            if (strcmp(m[k].key, "version") == 0) /* (compared, never cast: 1e300) */
                version = num && m[k].number == 1.0;
            if (strcmp(m[k].key, "endpoint") == 0 && m[k].kind == MT_JSON_STRING)
                endpoint = m[k].string;
        }
        long long pid = 0; int runs = -1; /* (mt_trainer_runs': kept for read_live_once) */
        mt_buf fault = {0}; /* (rank_bounds.py's words; said before the others, as there) */
        long long world = why == NULL ? mt_rank_bounds(text, m, n, rank, &fault) : -1;
        if (fault.oom && problem != NULL) problem->oom = true;
        if (why != NULL) {
            FILE_SAY("%s unreadable (%s)", name, why);
        } else if (world == 0) {
            FILE_SAY("%s invalid (%s)", name, fault.len ? fault.data : "");
        } else if (version != 1 || world < 0 || endpoint == NULL || !*endpoint || bad_run ||
                   bad_key || bad_follow) {
            FILE_SAY("%s invalid (%s)", name, text);
        } else if (stopped && !stopped_too) { /* (a study that ended: a late solver) */
            char words[1024]; /* (a message's 200 characters: up to 800 bytes of UTF-8) */
            mt_stop_record_words(record, words, sizeof words);
            FILE_SAY("%s: its trainer %s", name, words);
        } else if (alive && (runs = mt_trainer_runs(m, n, scoped ? mine : NULL, &pid)) == 0) {
            mt_rank_entry *en = mt_ranks_add(&ranks, rank, name); /* (killed: as stopped) */
            if (en == NULL) st = MT_ENOMEM;
            else en->gone = true;
            mt_buf w = {0};
            wrong = true;
            if (problem != NULL) mt_gone_words(&w, name, pid);
            if (problem != NULL && !keep_words(&said, &n_said, name, &w))
                problem->oom = true;
        } else {
            mt_rank_entry *en = mt_ranks_add(&ranks, rank, name); /* (rank_01.json too) */
            if (en == NULL) st = MT_ENOMEM;
            if (st == MT_OK) {
                en->world = world;
                en->receipts = receipts;
                en->routing = routing;
                en->pid = pid, en->runs = runs;
                out->stopped = out->stopped || stopped;
                if (!dup_to(&en->endpoint, endpoint) || !dup_to(&en->run_id, run_id) ||
                    !dup_to(&en->key, key) || !dup_to(&en->follow, follow) ||
                    !dup_to(&en->kept, kept) || !dup_to(&en->host, host) ||
                    !dup_to(&en->scope, scope))
                    st = MT_ENOMEM;
            }
        }
        mt_json_free(m, n);
        free(text), free(fault.data);
    }
    closedir(d);
    if (problem != NULL) say_files(said, n_said, problem);
    else free(said);
    if (st != MT_OK) goto done;
    mt_ranks_settle(&ranks);
    long long world = -1, other = -1;
    const char *run = NULL, *other_run = NULL; /* "None" stands for a file without one */
    for (size_t k = 0; k < ranks.n; ++k) {
        const mt_rank_entry *en = &ranks.at[k];
        if (en->endpoint == NULL) continue;
        const char *this_run = en->run_id != NULL ? en->run_id : "None";
        if (world < 0) world = en->world, run = this_run;
        else if (en->world != world) other = en->world;
        else if (strcmp(this_run, run) != 0) other_run = this_run;
    }
    if (world < 0) { /* (a stopped or unreadable file said why: not "no file yet" too) */
        if (!rank_files) SAY("no rank_{r}.json file yet"); /* (endpoints.py, word for word) */
    } else if (other >= 0) {
        SAY("files disagree on world_size: [%lld, %lld]", world < other ? world : other,
            world < other ? other : world);
    } else if (other_run != NULL) {
        SAY("files of different runs: run_id ['%s', '%s']",
            strcmp(run, other_run) < 0 ? run : other_run,
            strcmp(run, other_run) < 0 ? other_run : run);
    } else if (mt_ranks_missing(&ranks, world, NULL)) { /* (a few listed: rank_bounds.py) */
        wrong = true;
        if (problem != NULL && problem->len) mt_buf_puts(problem, "; ");
        if (problem != NULL) mt_ranks_missing(&ranks, world, problem);
    } else if (!wrong) { /* complete and consistent */
        st = mt_ranks_take(&ranks, world, out);
        goto done;
    }
    st = MT_ERENDEZVOUS;
done:
    mt_ranks_free(&ranks);
    return st;
}
