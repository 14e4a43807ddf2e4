/* host_scope.c: who can reach a loopback endpoint (melissa_trainer/stream/host_scope.py):
 * the processes of one network namespace of one running kernel. A receiver publishes,
 * beside its endpoint in its rendezvous file, the host it runs on ("host") and that
 * scope ("loopback_scope": "<boot id>/<st_dev>:<st_ino>" of
 * /proc/sys/kernel/random/boot_id and /proc/self/ns/net). A client that read a loopback
 * endpoint there from another scope (another machine: a Slurm compute node, an mpiexec
 * host; or a container with its own network on the same machine) can never connect to
 * it: mt_client_start says so at once (MT_EUNREACHABLE), in the Python client's words
 * (ReceiverUnreachable), naming both hosts and the fix, where it would otherwise send
 * into the void and fail after its disconnected timeout (60 s), blaming a trainer that
 * was never started. Linux only; elsewhere there is no scope, and nothing is checked.
 * Endpoints given directly (mt_set_endpoints, MELISSA_TRAINER_ENDPOINTS) are never
 * checked: a tunnel (ssh -L) can carry a loopback port to another machine on purpose.
 * A host name this process resolves to loopback addresses only counts as loopback when
 * the scopes differ (host_scope.py _loopback_name: an /etc/hosts shared by a cluster's
 * nodes that maps the trainer's name to 127.0.0.1). */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include "internal.h"
#include "host_scope.h"

/* Whether only this machine can reach `endpoint` (endpoints.py is_loopback, the same
 * test): not tcp:// (ipc://, inproc://), or a tcp:// address, brackets stripped, that is
 * localhost, ::1 or 127.*. */
static bool is_loopback(const char *endpoint) {
    if (strncmp(endpoint, "tcp://", 6) != 0) return true;
    const char *addr = endpoint + 6, *colon = strrchr(addr, ':');
    size_t n = colon == NULL ? 0 : (size_t)(colon - addr); /* (Python's rpartition(":")) */
    while (n > 0 && (*addr == '[' || *addr == ']')) ++addr, --n; /* (.strip("[]")) */
    while (n > 0 && (addr[n - 1] == '[' || addr[n - 1] == ']')) --n;
    return (n == 9 && strncmp(addr, "localhost", 9) == 0) ||
           (n == 3 && strncmp(addr, "::1", 3) == 0) || (n >= 4 && strncmp(addr, "127.", 4) == 0);
}

static int by_text(const void *a, const void *b) {
    return strcmp((const char *)a, (const char *)b);
}

/* host_scope.py _loopback_name: into `out`, ", "-joined and sorted, the distinct
 * addresses this process resolves `endpoint`'s host name to, and true, when they are all
 * loopback (127.*, ::1); false for an address literal, a wildcard, a name that does not
 * resolve, or one with an address others could reach. */
static bool loopback_name(const char *endpoint, char *out, size_t size) {
    if (strncmp(endpoint, "tcp://", 6) != 0) return false;
    const char *addr = endpoint + 6, *colon = strrchr(addr, ':');
    size_t n = colon == NULL ? 0 : (size_t)(colon - addr);
    while (n > 0 && (*addr == '[' || *addr == ']')) ++addr, --n;
    while (n > 0 && (addr[n - 1] == '[' || addr[n - 1] == ']')) --n;
    char name[256];
    if (n == 0 || n >= sizeof name) return false;
    memcpy(name, addr, n), name[n] = '\0';
    bool digits = true; /* (Python: name.replace(".", "").isdigit()) */
    for (size_t i = 0; i < n; ++i)
        if (name[i] != '.' && !isdigit((unsigned char)name[i])) digits = false;
    if (strcmp(name, "*") == 0 || strchr(name, ':') != NULL || digits) return false;
    struct addrinfo hints = {0}, *found = NULL;
    hints.ai_protocol = IPPROTO_TCP;
    if (getaddrinfo(name, NULL, &hints, &found) != 0) return false;
    char seen[16][INET6_ADDRSTRLEN];
    size_t k = 0;
    bool all = true;
    for (struct addrinfo *a = found; a != NULL && all; a = a->ai_next) {
        char text[INET6_ADDRSTRLEN] = "";
        if (a->ai_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)a->ai_addr)->sin_addr, text, sizeof text);
        else if (a->ai_family == AF_INET6)
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr, text,
                      sizeof text);
        all = strcmp(text, "::1") == 0 || strncmp(text, "127.", 4) == 0;
        bool dup = false;
        for (size_t i = 0; i < k; ++i) dup = dup || strcmp(seen[i], text) == 0;
        if (all && !dup && k < 16) strcpy(seen[k++], text);
    }
    freeaddrinfo(found);
    if (!all || k == 0) return false;
    qsort(seen, k, sizeof seen[0], by_text);
    out[0] = '\0';
    for (size_t i = 0; i < k; ++i) {
        size_t used = strlen(out);
        snprintf(out + used, size - used, "%s%s", i > 0 ? ", " : "", seen[i]);
    }
    return true;
}

/* This process's scope in `out` (host_scope.py loopback_scope), or false where it cannot
 * be read (not Linux, /proc not mounted, an empty boot id). Read at each start, not kept:
 * once per client. */
static bool own_scope(char *out, size_t size) {
    char boot[128];
    struct stat st;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f == NULL) return false;
    size_t n = fread(boot, 1, sizeof boot - 1, f);
    fclose(f);
    boot[n] = '\0';
    const char *b = boot; /* (str.strip(): the file ends with a newline) */
    while (isspace((unsigned char)*b)) ++b;
    while (n > 0 && isspace((unsigned char)boot[n - 1])) boot[--n] = '\0';
    if (*b == '\0' || stat("/proc/self/ns/net", &st) != 0) return false;
    snprintf(out, size, "%s/%llu:%llu", b, (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    return true;
}

/* The publishers' words (host_scope.py RECEIVER, SERVING; their "endpoints=" and
 * "endpoint=" the C client's setters). */
const mt_publisher MT_RECEIVER = {
    "the receiver",
    "StreamSource(ReceiverConfig(bind='tcp://*:*')) (the examples: --bind 'tcp://*:*')",
    "mt_set_endpoints or MELISSA_TRAINER_ENDPOINTS"};
const mt_publisher MT_SERVING = {
    "the trainer's serving socket",
    "StreamSource(ReceiverConfig(bind='tcp://*:*')) (the examples: --bind 'tcp://*:*'; the "
    "serving socket binds the receiver's interface), or ServingHook(bind='tcp://*:*')",
    "mt_set_serve_endpoints or MELISSA_TRAINER_SERVE_ENDPOINTS"};

int mt_scope_why(const char *endpoint, const char *host, const char *theirs,
                 const mt_publisher *p, mt_buf *out) {
    char mine[256];
    if (theirs == NULL || !own_scope(mine, sizeof mine) || strcmp(theirs, mine) == 0) return 0;
    char named[1024]; /* (16 addresses of INET6_ADDRSTRLEN at most, ", "-joined) */
    bool by_name = !is_loopback(endpoint) && loopback_name(endpoint, named, sizeof named);
    if (!is_loopback(endpoint) && !by_name) return 0;
    struct utsname u; /* (the kernel's node name: Python's socket.gethostname) */
    size_t boot = strcspn(mine, "/"); /* (the boot ids: partition("/")[0]) */
    bool machine = strcspn(theirs, "/") != boot || strncmp(theirs, mine, boot) != 0;
    /* (a Unix socket: a file of this machine, any network namespace's) */
    if (!machine && strncmp(endpoint, "ipc://", 6) == 0) return 0;
    char *them = mt_py_repr(host != NULL ? host : "?");
    char *here = mt_py_repr(uname(&u) == 0 ? u.nodename : "?");
    if (them == NULL || here == NULL) {
        free(them), free(here);
        return -1;
    }
    const char *where_1 = machine ? "host " : "the same machine (";
    const char *where_2 = machine ? ", another machine"
                                  : ") but in another network namespace (a container "
                                    "with its own network?), with a loopback of its own";
    /* (word for word host_scope.py out_of_reach) */
    if (by_name)
        mt_buf_printf(out,
                      "%s published the endpoint %s (its host %s), whose name this process "
                      "resolves to loopback only (%s: /etc/hosts?), its own machine's; this "
                      "process runs on %s%s%s: no connection can ever be made. Publish the "
                      "trainer's host by an address the simulations reach: "
                      "ReceiverConfig(bind='tcp://*:*', advertise_host='ADDRESS'), or bind "
                      "that address (the examples: --bind 'tcp://ADDRESS:*'); keep the port "
                      "behind a firewall. (Endpoints given directly, %s, are not checked: a "
                      "tunnel may carry them.)",
                      p->who, endpoint, them, named, where_1, here, where_2, p->given);
    else
        mt_buf_printf(out,
                      "%s published the loopback endpoint %s (its host %s), which only "
                      "processes of its own machine and network reach; this process runs on "
                      "%s%s%s: no connection can ever be made. The trainer must bind an "
                      "interface the simulations reach: %s, with advertise_host=... when they "
                      "know its host by another name; keep the port behind a firewall. "
                      "(Endpoints given directly, %s, are not checked: a tunnel may carry "
                      "them.)",
                      p->who, endpoint, them, where_1, here, where_2, p->bind, p->given);
    free(them), free(here);
    return out->oom ? -1 : 1;
}

mt_status mt_rendezvous_reach(mt_client *c, const char *dir, const mt_rendezvous *rv) {
    for (size_t r = 0; rv->scopes != NULL && r < rv->n; ++r) {
        mt_buf why = {0};
        int far = mt_scope_why(rv->endpoints[r], rv->hosts[r], rv->scopes[r], &MT_RECEIVER, &why);
        mt_status st = far < 0   ? mt_fail(c, MT_ENOMEM, "out of memory")
                       : far > 0 ? mt_fail(c, MT_EUNREACHABLE, "rendezvous %s: %s", dir, why.data)
                                 : MT_OK;
        free(why.data);
        if (st != MT_OK) return st;
    }
    return MT_OK;
}

mt_status mt_serve_reach(mt_client *c, const char *dir, mt_serve_entry *e) {
    mt_buf why = {0};
    int far = mt_scope_why(e->endpoint, e->host, e->scope, &MT_SERVING, &why);
    mt_status st = MT_OK;
    if (far < 0) {
        st = mt_fail(c, MT_ENOMEM, "out of memory");
    } else if (far > 0) {
        st = mt_fail(c, MT_ETIMEDOUT, "serve file %s/serve_%lld.json: %s", dir, e->rank, why.data);
        if (!c->said_unreachable) /* (once: a simulation that falls back hears nothing else) */
            fprintf(stderr, "melissa_trainer: mt_predict: %s\n", mt_client_error(c));
        c->said_unreachable = true;
    }
    free(why.data);
    if (st != MT_OK) mt_serve_entry_free(e);
    return st;
}
