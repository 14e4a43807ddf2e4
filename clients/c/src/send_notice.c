/* send_notice.c: what a blocked C send says, once, while a receiver is disconnected (the
 * Python client's send_wait.py SendWait._tell: closing.py waiting_notice with "sending
 * time step N", gave_up.py waits_for with the action "send", patience.py notice_due;
 * their rules and words, the C setters named as close_notice.c names them). Before, a C
 * send blocked on a trainer gone said nothing until it gave up (the disconnected timeout,
 * then the follow timeout with a replay window: a minute or more by default), where the
 * Python send warned once, a few seconds in. On stderr, as the C client's other notices
 * ("melissa_trainer: simulation N rank R: ...", handshake.c). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "close_checks.h"
#include "close_wait.h"
#include "send_notice.h"

void mt_send_notice(mt_client *c, double started, double deadline, const uint64_t *step,
                    bool *told) {
    if (*told) return;
    double now = mt_now(), since = -1;
    unsigned long long sent = 0;
    bool never = false;
    mt_buf where = {0}; /* (the receivers disconnected now: patience.py PeerWatch.down_at) */
    for (size_t i = 0; i < c->n_endpoints; ++i) {
        double s = mt_handshake_down_since(c, i);
        if (s < 0) continue;
        mt_buf_printf(&where, "%s%s", where.len > 0 ? ", " : "", c->endpoints[i]);
        since = since < 0 || s < since ? s : since;
        sent += c->steps_per_receiver[i];
        never = never || (!c->handshakes[i].ever && strncmp(c->endpoints[i], "inproc:", 7));
    }
    double counted = now - (since > started ? since : started);
    if (since < 0 || where.oom || counted < mt_notice_after(c->disconnected_timeout)) {
        free(where.data);
        return;
    }
    *told = true;
    /* (the wait's end: the disconnected timeout, or the send timeout if sooner) */
    double left = -1;
    char bound[96] = "", t[32], clock[16], what[48], cause[MT_CAUSE_SIZE];
    if (c->disconnected_timeout >= 0) {
        left = c->disconnected_timeout - counted;
        mt_format_double(c->disconnected_timeout, t);
        snprintf(bound, sizeof bound, "mt_set_disconnected_timeout=%s s", t);
    }
    bool by_send_timeout = deadline >= 0 && (bound[0] == '\0' || deadline - now < left);
    if (by_send_timeout) {
        left = deadline - now;
        mt_format_double(c->send_timeout, t);
        snprintf(bound, sizeof bound, "mt_set_send_timeout=%s s", t);
    }
    if (bound[0] != '\0' && left < 0) left = 0;
    time_t wall = time(NULL) - (time_t)(now - since);
    struct tm tm;
    if (localtime_r(&wall, &tm) == NULL || strftime(clock, sizeof clock, "%H:%M:%S", &tm) == 0)
        snprintf(clock, sizeof clock, "?");
    if (step == NULL) snprintf(what, sizeof what, "a message");
    else snprintf(what, sizeof what, "time step %llu", (unsigned long long)*step);
    mt_buf b = {0};
    mt_buf_printf(&b, "simulation %llu rank %d: sending %s, ", (unsigned long long)c->simulation_id,
                  c->rank, what);
    bool resumed = false; /* (its stop record says preempted: a resume is waited for) */
    if (never) {
        mt_buf_printf(&b, "no receiver ever accepted a connection at %s (tried since %s): check "
                          "the endpoint (the trainer's rank_N.json) or start the trainer "
                          "first. ", where.data, clock);
    } else {
        snprintf(cause, sizeof cause, "the trainer died or stopped, or its node");
        resumed = mt_stop_preempted_words(c, cause, sizeof cause);
        char of[64] = ""; /* (a wait gives a receiver its timeout from its start) */
        if (since < started - 0.5)
            snprintf(of, sizeof of, ", %.0f s of them in this wait", now - started);
        mt_buf_printf(&b, "the trainer's receiver at %s is disconnected since %s (%.0f s%s: "
                          "%s): %llu time step(s) were sent to it. ",
                      where.data, clock, now - since, of, cause, sent);
    }
    /* (a restarted trainer is followed with a replay window, unless the send timeout ends
     * the wait first: send_wait.py _tell) */
    bool follows = c->replay.max_bytes > 0 && c->rendezvous_used != NULL && !by_send_timeout;
    mt_waits_for_action(&b, "send", bound[0] == '\0' ? -1 : left, bound,
                        never ? "connect" : "reconnect", /* (never connected: no "re") */
                        follows ? c->rendezvous_used : "", follows, c->follow_timeout,
                        now - started, resumed);
    if (!b.oom) fprintf(stderr, "melissa_trainer: %s\n", b.data);
    free(b.data);
    free(where.data);
}
