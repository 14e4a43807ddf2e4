/* stop_said.c: what a closing client whose trainer stopped says, from the stop record's
 * fields (stop_record.c fills an mt_stop_said; nothing here parses text), in the Python
 * client's words: the parts of melissa_trainer/client/closing.py's StopSaid (the reason
 * clause a sentence opens with, then the record's facts and what to do,
 * client/stopped.py StopRecords.for_good), composed as the receipt says them
 * (StopRecords.decide) or as a delivery that failed on them does (closing.py
 * stop_first: one sentence, the reason first), a close's or a blocked send's
 * (send_wait.c; gave_up.py stop_sentence, send_wait.py SendWait._check): one builder. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "restarts_said.h"

/* What a simulation whose run ended normally (code "end") is told instead of the resume
 * advice of a failure: stop_kinds.py's ENDED, word for word (an end on max_steps is not
 * final: a resume with a larger --max_steps trains on; an end of stream or a hook's stop
 * is; the record says which only in its reason's sentence, so both, conditionally). */
#define ENDED_WORDS                                                                         \
    "The run ended, so the rest of this simulation was not needed, and not taken. If it "   \
    "ended on max_steps (its reason: \"max_steps N reached\"), a trainer resumed from its " \
    "last checkpoint with a larger --max_steps trains on: run this simulation again then, " \
    "with the same simulation id, to have the rest of it trained on. If it ended at its "   \
    "stream's end or on a hook's stop, nothing is to be resumed or run again for this run"

/* What stopped the trainer, for this simulation: gave_up.py's StopSaid.kind. */
typedef enum { SAID_REFUSED, SAID_NOT_NEEDED, SAID_ENDED } said_kind;

static said_kind kind_of(mt_stop_outcome o, const mt_stop_said *s) {
    return o == MT_STOP_REFUSED ? SAID_REFUSED : s->not_needed ? SAID_NOT_NEEDED : SAID_ENDED;
}

/* StopSaid.reason: the clause a sentence opens with (refused, not needed), or the
 * record's reason and where the record is (ended). */
static void reason_of(const mt_client *c, said_kind k, const mt_stop_said *s, mt_buf *b) {
    if (k == SAID_REFUSED)
        mt_buf_printf(b, "the trainer stopped on its time step %llu",
                      (unsigned long long)s->time_step);
    else if (k == SAID_NOT_NEEDED)
        mt_buf_printf(b, "the study ended without needing this simulation");
    else
        mt_buf_printf(b, "%s: %s; its stop record in %s", s->code, s->message,
                      c->rendezvous_used);
}

/* StopSaid.detail: the record's facts and what to do. Where the Python client names the
 * exception to catch (SimulationNotNeeded), the C client names its status. */
static void detail_of(const mt_client *c, said_kind k, const mt_stop_said *s, size_t rank,
                      const char *fn, mt_buf *b) {
    unsigned long long sid = (unsigned long long)c->simulation_id;
    if (k == SAID_REFUSED) {
        mt_buf_printf(b,
                      "it holds NaN or Inf, and the trainer's policy is nonfinite='fail' (its "
                      "receiver %zu: %s). Fix the solver (a diverging scheme: a smaller time "
                      "step?), or start the trainer with --nonfinite refuse "
                      "(ReceiverConfig(nonfinite='refuse')) to drop such samples and go on; "
                      "then resume it (--resume_from_checkpoint latest) and run this "
                      "simulation again with the same simulation id "
                      "(MELISSA_TRAINER_SIMULATION_ID=%llu)",
                      rank, s->message, sid);
        return;
    }
    if (k == SAID_ENDED && strcmp(s->code, "end") == 0) {
        mt_buf_printf(b, "%s", ENDED_WORDS);
        return;
    }
    if (k == SAID_ENDED) {
        mt_buf_printf(b, "Once a trainer runs there again (--resume_from_checkpoint latest), "
                         "run this simulation again with the same simulation id "
                         "(MELISSA_TRAINER_SIMULATION_ID=%llu): the trainer takes the steps "
                         "it lacks, each once",
                      sid);
        return;
    }
    mt_buf_printf(b, "the trainer was given expected_simulations=%llu and that many had ended "
                     "(%llu finished, %llu abandoned), so it stopped (%s: %s; its stop record "
                     "in %s); its receiver %zu had taken ",
                  (unsigned long long)s->expected, (unsigned long long)s->finished,
                  (unsigned long long)s->abandoned, s->code, s->message, c->rendezvous_used,
                  rank);
    if (s->steps == 0)
        mt_buf_printf(b, "nothing of this simulation");
    else if (s->nonfinite == 0)
        mt_buf_printf(b, "%llu of this simulation's time steps (trained on) and ignored the "
                         "rest",
                      (unsigned long long)s->steps);
    else
        mt_buf_printf(b, "%llu of this simulation's time steps (trained on; %llu refused as "
                         "non-finite) and ignored the rest",
                      (unsigned long long)s->steps, (unsigned long long)s->nonfinite);
    mt_buf_printf(b, ". Nothing failed: if you started more solvers than the trainer needed, "
                     "there is nothing to do (this %s returns MT_ETIMEDOUT: exit 0 on it if "
                     "you start spare solvers on purpose). To train on every solver you "
                     "start, give the trainer expected_simulations equal to their number "
                     "(ReceiverConfig(expected_simulations=N)) before you start them",
                  fn);
}

/* c's error becomes `text` (status), or "out of memory" if composing it ran out. */
static mt_status said(mt_client *c, mt_status status, mt_buf *text) {
    if (text->oom || text->data == NULL) status = mt_fail(c, MT_ENOMEM, "out of memory");
    else mt_fail(c, status, "%s", text->data);
    free(text->data);
    return status;
}

/* What a resume of a run that ended without this BYE needs: stop_kinds.py's TAKEN_RESUME. */
#define TAKEN_RESUME                                                                       \
    "If that run is resumed (a larger --max_steps) with expected_simulations, its stream " \
    "waits for this BYE: then run this simulation again with the same simulation id "     \
    "(MELISSA_TRAINER_SIMULATION_ID=%llu)"

void mt_stop_taken_warning(const mt_client *c, const mt_stop_said *s, size_t rank,
                           const char *endpoint, const char *whose) {
    mt_buf text = {0}; /* (what happened, nothing lost, what a resume needs: no more) */
    mt_buf_printf(&text,
                  "%s: the trainer's receiver %zu (%s) stopped (%s: %s) before it read this "
                  "simulation's BYE, having taken every time step sent it (%llu): nothing was "
                  "lost. " TAKEN_RESUME,
                  whose, rank, endpoint, s->code, s->message, (unsigned long long)s->sent,
                  (unsigned long long)c->simulation_id);
    if (!text.oom && text.data != NULL)
        fprintf(stderr, "melissa_trainer: mt_client_close: %s\n", text.data);
    free(text.data);
}

mt_status mt_stop_record_fail(mt_client *c, mt_stop_outcome o, const mt_stop_said *s,
                              size_t rank, const char *endpoint, const char *whose) {
    said_kind k = kind_of(o, s);
    mt_buf text = {0};
    char of[160] = ""; /* (the steps held of those sent, where the record says: stopped.py) */
    if (s->held_known)
        snprintf(of, sizeof of, "; it had taken %llu of the %llu time steps this simulation "
                                "sent it",
                 (unsigned long long)(s->held < s->sent ? s->held : s->sent),
                 (unsigned long long)s->sent);
    if (k == SAID_ENDED && strcmp(s->code, "end") == 0) { /* (decide: ENDED_WORDS) */
        mt_buf_printf(&text,
                      "%s: its BYE was not confirmed: the trainer's receiver %zu (%s) stopped "
                      "before it read it (%s: %s; its stop record in %s lacks this BYE%s). %s",
                      whose, rank, endpoint, s->code, s->message, c->rendezvous_used, of,
                      ENDED_WORDS);
        return said(c, MT_ETIMEDOUT, &text);
    }
    if (k == SAID_ENDED) { /* (StopRecords.decide: the BYE the receipt lacks, named) */
        mt_buf_printf(&text,
                      "%s: its BYE was not confirmed: the trainer's receiver %zu (%s) stopped "
                      "before it read it (%s: %s; its stop record in %s lacks this BYE%s). What "
                      "this simulation sent after the trainer's last checkpoint is not trained "
                      "on: once a trainer runs there again (--resume_from_checkpoint latest), "
                      "run this simulation again with the same simulation id "
                      "(MELISSA_TRAINER_SIMULATION_ID=%llu): the trainer takes the steps it "
                      "lacks, each once",
                      whose, rank, endpoint, s->code, s->message, c->rendezvous_used, of,
                      (unsigned long long)c->simulation_id);
        return said(c, MT_ETIMEDOUT, &text);
    }
    if (k == SAID_REFUSED) /* (StopRecords.refusal names the simulation alone) */
        mt_buf_printf(&text, "simulation %llu: ", (unsigned long long)c->simulation_id);
    else
        mt_buf_printf(&text, "%s: ", whose);
    reason_of(c, k, s, &text);
    mt_buf_puts(&text, ": ");
    detail_of(c, k, s, rank, "close", &text);
    return said(c, k == SAID_REFUSED ? MT_ESIMREFUSED : MT_ETIMEDOUT, &text);
}

/* One sentence (closing.py's gave_up.stop_sentence, a close's and a blocked send's): the
 * reason first, then `what` (the whole phrase: "its BYE", "time step 7 and those queued
 * before it"; `verb` "was" or "were") not delivered to `down` (the disconnected receivers;
 * NULL or "": `endpoint`), naming `endpoint` (the record's receiver) too if it is
 * another, then the facts and what to do (`fn`: "close" or "send", which returns
 * MT_ETIMEDOUT to a spare solver). Appended to `text`. */
static void undelivered_text(const mt_client *c, said_kind k, const mt_stop_said *s,
                             size_t rank, const char *endpoint, const char *down,
                             const char *what, const char *verb, const char *fn,
                             const char *of, mt_buf *text) {
    mt_buf reason = {0}, whose = {0};
    reason_of(c, k, s, &reason);
    mt_buf_printf(&reason, "%s", of); /* (a close's counts: closing.py stop_first) */
    mt_buf_printf(text, "simulation %llu rank %d: ", (unsigned long long)c->simulation_id,
                  c->rank);
    /* (the disconnected receivers, whose messages those are, and the record's receiver
     * if it is another, connected perhaps) */
    bool other = down != NULL && down[0] != '\0' && strcmp(down, endpoint) != 0;
    if (other) mt_buf_printf(&whose, "disconnected; its receiver at %s recorded why", endpoint);
    const char *where = other ? down : endpoint, *note = whose.oom ? "" : whose.data;
    if (k == SAID_ENDED)
        mt_buf_printf(text, "the trainer stopped before it read %s, which %s not delivered to "
                            "%s (%s%s%s). ",
                      what, verb, where, other ? note : "", other ? ": " : "",
                      reason.oom ? "" : reason.data);
    else
        mt_buf_printf(text, "%s, so %s %s not delivered to %s%s%s%s: ",
                      reason.oom ? "" : reason.data, what, verb, where, other ? " (" : "",
                      other ? note : "", other ? ")" : "");
    if (whose.oom || reason.oom) text->oom = true;
    free(whose.data);
    free(reason.data);
    detail_of(c, k, s, rank, fn, text);
}

mt_status mt_stop_record_undelivered(mt_client *c, mt_stop_outcome o, const mt_stop_said *s,
                                     size_t rank, const char *endpoint, const char *down,
                                     const char *what, bool bye) {
    said_kind k = kind_of(o, s);
    bool queued = strcmp(what, "queued messages") == 0;
    const char *verb = strcmp(what, "BYE") == 0 ? "was" : "were";
    const char *among = bye && queued ? " (the BYE among them)" : ""; /* (closing.py stop_first) */
    mt_buf text = {0}, phrase = {0};
    mt_buf_printf(&phrase, "its %s%s", what, among);
    /* (the steps the record's receiver held of those sent it, where the record says, as
     * the receipt's refusal says them: closing.py stop_first) */
    char of[160] = "";
    if (k == SAID_ENDED && s->held_known && rank < c->n_endpoints) {
        unsigned long long sent = (unsigned long long)c->steps_per_receiver[rank];
        unsigned long long held = (unsigned long long)s->held;
        snprintf(of, sizeof of, "; it had taken %llu of the %llu time steps this simulation "
                                "sent it",
                 held < sent ? held : sent, sent);
    }
    if (phrase.oom) text.oom = true;
    else undelivered_text(c, k, s, rank, endpoint, down, phrase.data, verb, "close", of, &text);
    free(phrase.data);
    mt_status status = k == SAID_REFUSED ? MT_ESIMREFUSED : MT_ETIMEDOUT;
    if (bye) return said(c, status, &text);
    /* (no BYE: the close reports the failure it had; this is said, as Python logs it) */
    if (!text.oom && text.data != NULL)
        fprintf(stderr, "melissa_trainer: mt_client_close: %s\n", text.data);
    free(text.data);
    return status;
}

mt_status mt_stop_record_send_gave_up(mt_client *c, mt_stop_outcome o, const mt_stop_said *s,
                                      size_t rank, const char *down, const uint64_t *step,
                                      const char *after) {
    said_kind k = kind_of(o, s);
    char what[80]; /* (send_verdict.py _stop_said: the step and those queued before it; FLUSHED) */
    if (step == NULL) snprintf(what, sizeof what, "any messages still queued at this flush");
    else snprintf(what, sizeof what, "time step %llu and those queued before it",
                  (unsigned long long)*step);
    mt_buf text = {0};
    undelivered_text(c, k, s, rank, c->endpoints[rank], down, what, "were", "send", "", &text);
    mt_buf_printf(&text, " (%s)", after); /* (what ended the send: send_wait.c) */
    return said(c, k == SAID_REFUSED ? MT_ESIMREFUSED : MT_ETIMEDOUT, &text);
}

bool mt_stop_preempted_words(mt_client *c, char *out, size_t size) {
    for (size_t r = 0; c->rendezvous_used != NULL && r < c->n_endpoints; ++r) {
        mt_stop_look look = {0}; /* (read afresh: once, when a wait gives up or tells) */
        mt_stop_said *s = calloc(1, sizeof *s); /* (16 KiB: its reason's message whole) */
        if (s == NULL) return false;            /* (the words without the record) */
        mt_restarts_said_load(c, r, &look);    /* (its word said once: restarts_said.h) */
        mt_stop_record_for_good(c->rendezvous_used, r, c->endpoints[r], c->run_id,
                                c->simulation_id, NULL, &look, s);
        mt_restarts_said_keep(c, r, &look);
        bool preempted = s->preempted;
        char what[128]; /* (client/stop_kinds.py RESUMABLE_WORDS) */
        if (s->restarts_left > 0)
            snprintf(what, sizeof what, "the trainer failed and its launcher restarts it: a "
                                        "restart is expected (%u left)",
                     (unsigned)s->restarts_left);
        else
            snprintf(what, sizeof what, "%s",
                     strcmp(s->code, "broken") == 0
                         ? "the trainer stopped on a broken collective, a resume may follow"
                         : "the trainer was preempted");
        if (preempted) /* (its message's first line, 200 characters: stopped.py's too) */
            snprintf(out, size, "%s (%.*s; its stop record in %s)", what,
                     (int)mt_reason_line(s->message), s->message, c->rendezvous_used);
        free(s);
        if (preempted) return true;
    }
    return false;
}

bool mt_stop_all_taken(mt_client *c) {
    if (c->rendezvous_used == NULL || !c->receipts || !mt_admission_wanted(c)) return false;
    bool all = c->n_endpoints > 0 && c->handshakes != NULL; /* (receipts asked: close.c) */
    for (size_t r = 0; all && r < c->n_endpoints; ++r) {
        if (!c->handshakes[r].ever) return false; /* (one never connected: mt_handshake_never) */
        mt_stop_look look = {0}; /* (read afresh) */
        mt_stop_said *s = calloc(1, sizeof *s); /* (16 KiB: its reason's message whole) */
        if (s == NULL) return false;           /* (the close's error, as without) */
        mt_stop_sent sent = mt_stop_sent_of(c, r, c->n_endpoints, c->steps_per_receiver[r]);
        mt_restarts_said_load(c, r, &look);
        mt_stop_outcome o = mt_stop_record_decide(c->rendezvous_used, r, c->endpoints[r],
                                                  c->run_id, c->simulation_id, c->rank, &sent,
                                                  &look, s);
        mt_restarts_said_keep(c, r, &look);
        all = o == MT_STOP_CONFIRMED && s->taken; /* (not "finished": an earlier run's) */
        free(s);
    }
    return all;
}

mt_stop_sent mt_stop_sent_of(const mt_client *c, size_t rank, size_t world, uint64_t count) {
    mt_stop_sent sent = {count, 0, 0, false};
    sent.spanned = mt_stepset_span(&c->steps, c->simulation_id, rank, world, c->routing,
                                   &sent.first, &sent.last);
    return sent;
}
