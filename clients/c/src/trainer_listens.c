/* trainer_listens.c: whether anything listens at the endpoints of a rendezvous whose
 * trainer processes cannot be checked from here (another machine or pid namespace, an
 * older trainer's file without its pid: trainer_alive.c), the Python client's rule and
 * words (melissa_trainer/stream/trainer_listens.py). A trainer killed there leaves its
 * rank_N.json files, not marked stopped; its port has no listener, and its kernel, alive,
 * refuses the connection at once, where a live trainer's accepts it however busy (or
 * stopped) it is. Each endpoint is dialled by a PUSH socket, as the client's (with the
 * published CURVE key: the handshake completes, and the receiver says nothing of a peer
 * that closes without a HELLO), whose monitor is read for at most MT_LISTENS_WINDOW s:
 * CLOSED before any CONNECTED (a socket opened, its connect failed: refused, or the host
 * or its network unreachable, an ICMP "unreachable" or no route: libzmq closes the socket
 * on each) is refused; CONNECTED, a handshake's end, a retry without a socket (a host
 * name that does not resolve), or nothing in the window (a firewall that drops): not
 * refused, as before. tcp:// endpoints only; a file version told not refused is not
 * dialled again by the same wait (trainer_alive.c, mt_heard). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "internal.h"

#define MT_LISTENS_WINDOW 1.0 /* seconds: trainer_listens.py WINDOW */
#define LISTENS_EVENTS                                                                    \
    (ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CLOSED | ZMQ_EVENT_CONNECT_RETRIED |                 \
     ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |               \
     ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |              \
     ZMQ_EVENT_DISCONNECTED)

/* One monitor event of `monitor` (its two frames read): its kind, or -1. */
static int next_event(void *monitor) {
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    int kind = -1;
    if (zmq_msg_recv(&msg, monitor, ZMQ_DONTWAIT) >= 6) {
        uint16_t k; /* (host order: libzmq's) */
        memcpy(&k, zmq_msg_data(&msg), sizeof k);
        kind = k;
    }
    while (zmq_msg_more(&msg)) { /* (the endpoint's frame) */
        zmq_msg_close(&msg);
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, monitor, 0) < 0) break;
    }
    zmq_msg_close(&msg);
    return kind;
}

/* Reads the monitors until each endpoint is told, or the window ends. */
static void read_monitors(zmq_pollitem_t *items, size_t n, bool *refused) {
    bool *waiting = calloc(n, sizeof *waiting), *connected = calloc(n, sizeof *connected);
    if (waiting == NULL || connected == NULL) goto done; /* (not told: not refused) */
    size_t open = 0;
    for (size_t i = 0; i < n; ++i) waiting[i] = items[i].socket != NULL, open += waiting[i];
    double deadline = mt_now() + MT_LISTENS_WINDOW;
    while (open > 0) {
        double left = deadline - mt_now();
        if (left <= 0) break;
        long ms = (long)(left * 1000) + 1;
        if (zmq_poll(items, (int)n, ms) < 0) break;
        for (size_t i = 0; i < n; ++i) {
            if (items[i].socket == NULL || !(items[i].revents & ZMQ_POLLIN)) continue;
            int kind = next_event(items[i].socket);
            if (kind < 0 || !waiting[i]) continue; /* (told already: a later reconnection) */
            if (kind == ZMQ_EVENT_CONNECTED) {
                connected[i] = true; /* (accepted: its handshake's end awaited) */
                continue;
            }
            if (kind == ZMQ_EVENT_CLOSED && !connected[i]) refused[i] = true;
            waiting[i] = false, --open;
        }
    }
done:
    free(waiting);
    free(connected);
}

void mt_listens_refused(char *const *endpoints, char *const *keys, const bool *asked,
                        size_t n, bool *refused) {
    for (size_t i = 0; i < n; ++i) refused[i] = false;
    void *ctx = zmq_ctx_new();
    void **sockets = calloc(n ? n : 1, sizeof *sockets);
    zmq_pollitem_t *items = calloc(n ? n : 1, sizeof *items);
    if (ctx == NULL || sockets == NULL || items == NULL) goto done;
    int zero = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!asked[i]) continue;
        void *s = zmq_socket(ctx, ZMQ_PUSH);
        if (s == NULL) continue;
        sockets[i] = s;
        zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
        char pub[41], sec[41], address[64];
        if (keys[i] != NULL &&
            (zmq_curve_keypair(pub, sec) != 0 ||
             zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, keys[i], 40) != 0 ||
             zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 40) != 0 ||
             zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 40) != 0))
            continue; /* (not dialled: not told) */
        snprintf(address, sizeof address, "inproc://melissa-listens-%zu", i);
        if (zmq_socket_monitor(s, address, LISTENS_EVENTS) != 0) continue;
        void *m = zmq_socket(ctx, ZMQ_PAIR);
        if (m == NULL) continue;
        zmq_setsockopt(m, ZMQ_LINGER, &zero, sizeof zero);
        items[i].events = ZMQ_POLLIN;
        items[i].socket = m;
        if (zmq_connect(m, address) != 0 || zmq_connect(s, endpoints[i]) != 0) {
            zmq_close(m);
            items[i].socket = NULL;
        }
    }
    read_monitors(items, n, refused);
done:
    for (size_t i = 0; sockets != NULL && i < n; ++i)
        if (sockets[i] != NULL) zmq_close(sockets[i]);
    for (size_t i = 0; items != NULL && i < n; ++i)
        if (items[i].socket != NULL) zmq_close(items[i].socket);
    free(sockets);
    free(items);
    if (ctx != NULL) zmq_ctx_term(ctx);
}

void mt_listens_words(mt_buf *problem, size_t rank, const char *endpoint, long long pid,
                      const char *host) {
    char who[320] = "";
    if (pid > 0 && host != NULL) snprintf(who, sizeof who, " (pid %lld on %s)", pid, host);
    else if (host != NULL) snprintf(who, sizeof who, " (on %s)", host);
    if (problem->len) mt_buf_puts(problem, "; ");
    mt_buf_printf(problem,
                  "rank_%zu.json: nothing accepts connections at %s (refused, or its host "
                  "unreachable): its trainer%s is gone without marking it stopped (killed: "
                  "kill -9, out of memory?), or a firewall rejects this machine: start the "
                  "trainer first (resumed: --resume_from_checkpoint latest), or point "
                  "MELISSA_TRAINER_RENDEZVOUS at the running trainer's {output_dir}/rendezvous",
                  rank, endpoint, who);
}
