/* rendezvous_ranks.c: the ranks one look at a rendezvous directory found, one entry per
 * file, and the bounds of a file's "rank" and "world_size" (rendezvous_ranks.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "rendezvous_ranks.h"

static void entry_free(mt_rank_entry *en) {
    free(en->name), free(en->endpoint), free(en->run_id), free(en->key), free(en->follow);
    free(en->kept), free(en->host), free(en->scope);
    memset(en, 0, sizeof *en);
}

void mt_ranks_free(mt_ranks *ranks) {
    for (size_t k = 0; k < ranks->n; ++k) entry_free(&ranks->at[k]);
    free(ranks->at);
    memset(ranks, 0, sizeof *ranks);
}

mt_rank_entry *mt_ranks_add(mt_ranks *ranks, long long rank, const char *name) {
    if (ranks->n == ranks->cap) {
        size_t cap = ranks->cap ? 2 * ranks->cap : 16;
        mt_rank_entry *grown = realloc(ranks->at, cap * sizeof *grown);
        if (grown == NULL) return NULL;
        ranks->at = grown, ranks->cap = cap;
    }
    mt_rank_entry *en = &ranks->at[ranks->n];
    memset(en, 0, sizeof *en);
    en->rank = rank;
    if ((en->name = strdup(name)) == NULL) return NULL;
    ++ranks->n;
    return en;
}

/* By rank, then name (Python's order of the files: endpoints.py). */
static int by_rank_name(const void *a, const void *b) {
    const mt_rank_entry *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return strcmp(x->name, y->name);
}

void mt_ranks_settle(mt_ranks *ranks) {
    if (ranks->n > 1) qsort(ranks->at, ranks->n, sizeof *ranks->at, by_rank_name);
    size_t kept = 0;
    for (size_t i = 0; i < ranks->n;) {
        size_t j = i, taken = ranks->n; /* (its files [i, j); the last of them taken) */
        bool gone = false;
        for (; j < ranks->n && ranks->at[j].rank == ranks->at[i].rank; ++j) {
            gone = gone || ranks->at[j].gone;
            if (ranks->at[j].endpoint != NULL) taken = j;
        }
        size_t chosen = taken < ranks->n ? taken : i;
        for (size_t k = i; k < j; ++k)
            if (k != chosen) entry_free(&ranks->at[k]);
        ranks->at[kept] = ranks->at[chosen]; /* (kept <= i <= chosen: moved down) */
        ranks->at[kept++].gone = gone;
        i = j;
    }
    ranks->n = kept;
}

long long mt_rank_bounds(const char *text, const mt_json_member *m, size_t n,
                         long long file_rank, mt_buf *why) {
    const mt_json_member *rank = mt_json_find(m, n, "rank");
    const mt_json_member *world = mt_json_find(m, n, "world_size");
    if (rank == NULL || world == NULL) return -1;
    /* (compared as doubles, never cast: 10^12 or 1e300 would not fit a long long) */
    bool whole = world->kind == MT_JSON_NUMBER && world->integer;
    const char *type, *key = "world_size";
    if (whole && world->number >= 1 && world->number <= (double)MT_MAX_WORLD) {
        long long size = (long long)world->number; /* (exact: an integer under 2^53) */
        if (rank->kind == MT_JSON_NUMBER && rank->integer && rank->number == (double)file_rank) {
            if (file_rank < size) return size;
            mt_buf_printf(why, "its rank %lld is not under its world_size %lld", file_rank, size);
            return 0;
        }
        key = "rank";
    }
    char *said = mt_json_member_repr(text, key, &type); /* (Python's repr of the value) */
    if (said == NULL) {
        why->oom = true;
        return 0;
    }
    if (*key == 'r')
        mt_buf_printf(why, "its rank %s is not the rank of its name, %lld", said, file_rank);
    else if (whole && world->number > (double)MT_MAX_WORLD)
        mt_buf_printf(why, "its world_size %s is over %lld: no trainer has so many ranks", said,
                      MT_MAX_WORLD);
    else
        mt_buf_printf(why, "its world_size %s is not a number of ranks: a whole number 1 to %lld",
                      said, MT_MAX_WORLD);
    free(said);
    return 0;
}

bool mt_ranks_missing(const mt_ranks *ranks, long long world, mt_buf *words) {
    long long present = 0; /* (settled: each rank once, in order) */
    for (size_t k = 0; k < ranks->n && ranks->at[k].rank < world; ++k)
        present += ranks->at[k].rank >= 0 && (ranks->at[k].endpoint != NULL || ranks->at[k].gone);
    long long count = world - present;
    if (count <= 0) return false;
    if (words == NULL) return true;
    mt_buf_printf(words, "world_size %lld, ranks [", world);
    size_t k = 0;
    long long shown = 0;
    for (long long r = 0; shown < count && shown < MT_MISSING_SHOWN; ++r) {
        while (k < ranks->n && ranks->at[k].rank < r) ++k;
        bool here = k < ranks->n && ranks->at[k].rank == r &&
                    (ranks->at[k].endpoint != NULL || ranks->at[k].gone);
        if (!here) mt_buf_printf(words, "%s%lld", shown++ ? ", " : "", r);
    }
    if (count > MT_MISSING_SHOWN) mt_buf_printf(words, ", ... (%lld in all)", count);
    mt_buf_puts(words, "] missing");
    return true;
}

mt_status mt_ranks_take(mt_ranks *ranks, long long world, mt_rendezvous *out) {
    size_t w = (size_t)world;
    if (world < 1 || ranks->n < w) return MT_ERENDEZVOUS; /* (not complete: never here) */
    out->endpoints = calloc(w, sizeof *out->endpoints);
    out->keys = calloc(w, sizeof *out->keys);
    out->follows = calloc(w, sizeof *out->follows);
    out->receipts = calloc(w, sizeof *out->receipts);
    out->kept = calloc(w, sizeof *out->kept);
    out->hosts = calloc(w, sizeof *out->hosts);
    out->scopes = calloc(w, sizeof *out->scopes);
    out->pids = calloc(w, sizeof *out->pids);
    out->runs = calloc(w, sizeof *out->runs);
    if (out->endpoints == NULL || out->keys == NULL || out->follows == NULL ||
        out->receipts == NULL || out->kept == NULL || out->hosts == NULL ||
        out->scopes == NULL || out->pids == NULL || out->runs == NULL) {
        mt_rendezvous_free(out);
        return MT_ENOMEM;
    }
    out->routing = true; /* (the new routing only when every file says so) */
    for (size_t r = 0; r < w; ++r) { /* (moved: the entries lose them) */
        mt_rank_entry *en = &ranks->at[r];
        out->endpoints[r] = en->endpoint, out->keys[r] = en->key;
        out->follows[r] = en->follow, out->receipts[r] = en->receipts;
        out->kept[r] = en->kept, out->hosts[r] = en->host, out->scopes[r] = en->scope;
        out->pids[r] = en->pid, out->runs[r] = en->runs;
        out->routing = out->routing && en->routing;
        en->endpoint = NULL, en->key = NULL, en->follow = NULL;
        en->kept = NULL, en->host = NULL, en->scope = NULL;
    }
    out->n = w;
    out->run_id = ranks->at[0].run_id;
    ranks->at[0].run_id = NULL;
    return MT_OK;
}
