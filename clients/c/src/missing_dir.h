/* missing_dir.h: what the C client says of a rendezvous path that is not a directory
 * (missing_dir.c), and difflib's likeness of two names (env_names.c). Not installed;
 * after internal.h. */
#ifndef MT_MISSING_DIR_H
#define MT_MISSING_DIR_H

#include "internal.h"

/* env_names.c: difflib.SequenceMatcher(None, a, b).ratio() of a[0..n) and b[0..m)
 * (no junk: the caller keeps b under 200 characters, difflib's autojunk). */
double mt_name_ratio(const char *a, size_t n, const char *b, size_t m);
/* missing_dir.c: client/rendezvous_words.py missing_note, word for word, appended to `b`
 * for the rendezvous path `dir` given at `source` (the variable, or the setter
 * "mt_set_rendezvous"): when not even its parent exists, that a typo there is likely; and
 * the directory likely meant ("; did you mean /w/out/rendezvous?"), where a sibling of its
 * first missing component is close (common/words.py closest_name). Nothing when `dir` is a
 * directory. Returns whether it is not one. */
bool mt_missing_note(const char *dir, const char *source, mt_buf *b);
/* What the directory meant adds when it holds rank files of no running trainer
 * (rendezvous_words.py STOPPED_RUN); a running trainer's is meant first (missing_dir.c). */
#define MT_STOPPED_RUN " (a stopped run's: no trainer runs there now)"
/* client/predict_lookup.py MissingDirectory.note: mt_missing_note, or, when that says
 * nothing of a path that is not a directory (its parent exists, no name there is close),
 * what makes it exist and where the path came from. */
void mt_missing_dir_note(const char *dir, const char *source, mt_buf *b);
/* predict_lookup.py MissingDirectory.check, after a lookup in `dir` (given at `source`)
 * found no endpoint (`why`): on stderr once per client, when `dir` has not been a
 * directory for NOTICE_AFTER (3) seconds, counted over requests from the first lookup
 * that found it missing (c->predict_missing: 0 while it is a directory, else since when,
 * -1 once said). */
void mt_missing_dir_check(mt_client *c, const char *dir, const char *source, const char *why);

/* read_serving's why when the directory holds no serve file (serving_rendezvous.py
 * NO_SERVER), and what a lookup adds then while the trainer runs there (predict_lookup.py
 * UNSERVED: a trainer without a ServingHook; said, not refused: a serving hook may
 * publish after the receivers). */
#define MT_NO_SERVER "no trainer serves predictions there (yet)"
#define MT_UNSERVED                                                                       \
    "the trainer is running but serves no predictions: add ServingHook to its hooks " \
    "(docs/how-to/serve-while-training.md)"
/* predict_lookup.py Unserved.check, after a lookup in `dir` found no endpoint (`why`): on
 * stderr once per client, when no serve file has been there for NOTICE_AFTER (3) seconds,
 * counted over requests, and the trainer runs there (trainer_alive.c's look, once per 3 s
 * at most), or one that ran there stopped (mt_stopped_story, said in place of `why`).
 * c->predict_unserved: [0] 0 while a serve file is there, else since when, -1 once said;
 * [1] when the trainer was last looked at. `story`: that lookup's mt_stopped_story (NULL:
 * none; one read of rank_0.json per look, so the warning and the error say the same). */
void mt_unserved_check(mt_client *c, const char *dir, const char *why, const char *story);
/* predict_lookup.py Unserved.note: "; " MT_UNSERVED appended to `b` when `why` is
 * MT_NO_SERVER and the trainer runs in `dir` now (a trainer that ran there and stopped is
 * mt_stopped_story's to say, in place of `why`). */
void mt_unserved_note(const char *dir, const char *why, mt_buf *b);
/* predict_lookup.py stop_text: the text of `dir`'s rank_0.json (malloc'd), NULL when there
 * is none or it cannot be read (being replaced; out of memory too: nothing to say). */
char *mt_stop_text(const char *dir);
/* predict_lookup.py stop_reason: true when rank_0.json's `text` (mt_stop_text's, NULL:
 * none) is marked stopped, and not
 * by another run than `run_id` (its "run_id", else its record's, names another; NULL: any
 * run's); then "CODE: MESSAGE" appended to `said` (its stop record's reason, read
 * leniently: the message's first line, at most 200 UTF-8 characters, never one cut, as
 * Python's 200 characters: mt_reason_line; the code's first 32; "CODE" without a message,
 * nothing without a code) and *after set to what would serve there, per code
 * (predict_lookup.py after_stop): MT_ENDED_SERVES after "end" (MT_STREAM_ENDED_SERVES
 * when its message opens with MT_STREAM_END), MT_FAILED_SERVES after
 * "error" and "nonfinite", else MT_RESUMED_SERVES. */
bool mt_stop_reason(const char *text, const char *run_id, mt_buf *said, const char **after);
/* predict_lookup.py stopped_story, word for word: what a lookup whose rank_0.json read
 * `text` (mt_stop_text's) and that found no
 * serve file (`why`) says of the trainer that stopped there, appended to `b`: "the trainer
 * that ran there stopped (CODE: MESSAGE; WHY): " and what would serve there (WHY: `why`
 * without its " (yet)"; "CODE: MESSAGE; " left out without a code), "served this
 * simulation" for a client served there (`served`), when mt_stop_reason says so; when it
 * does not, for a client served there, "the trainer that served this simulation stopped
 * (WHY)" (a client whose trainer stopped mid-use was told no reason), else nothing. Not
 * served, nothing either when `why` is not MT_NO_SERVER. Returns 2 when no resume follows
 * on its own ("end", "error", "nonfinite": a request fails at once, waiting would not
 * change it), 1 when the trainer stopped otherwise (a resume may follow: waited for), 0
 * when mt_stop_reason says nothing (or `why` is not MT_NO_SERVER, not served). */
#define MT_STOPPED_THERE "the trainer that ran there stopped"
#define MT_SERVED_STOPPED "the trainer that served this simulation stopped"
#define MT_RESUMED_SERVES "a resumed one would serve there"
#define MT_ENDED_SERVES                                                                    \
    "the run ended, no resume follows on its own (after max_steps, one resumed with a "    \
    "larger --max_steps would serve there)"
#define MT_STREAM_ENDED_SERVES                                                             \
    "the run ended at its stream's end, no resume follows on its own (a larger "          \
    "--max_steps trains nothing past it: a new run would serve there, or one resumed "     \
    "with more --pseudo_epochs if its buffer has samples to replay)"
#define MT_STREAM_END "end of stream" /* (how an end's message opens there: loop.py) */
#define MT_FAILED_SERVES                                                                   \
    "no resume follows on its own (one resumed once that is fixed would serve there)"
int mt_stopped_story(const char *text, const char *run_id, const char *why, bool served,
                     mt_buf *b);

#endif
