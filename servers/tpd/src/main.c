/*
 * main.c - tpd entry point: configuration (file + command line), listening
 * sockets, the single epoll event loop, idle timeouts, SIGTERM handling,
 * logging, and the small helpers shared by ftp.c and http.c (epoll
 * interest management, connection bookkeeping, output buffers).
 *
 * Event model: one process, one thread, every socket non-blocking,
 * registered in one epoll instance in LEVEL-TRIGGERED mode.  Each wakeup
 * does a bounded amount of work per descriptor (one read, or at most
 * SEND_BUDGET bytes of sendfile), so a fast client cannot starve others
 * and a slow one only ever costs a kernel socket buffer.  Interest sets are
 * kept exact (EPOLLOUT only while there is something to send, EPOLLIN only
 * while there is room to read), which is what makes level triggering cheap.
 *
 * Idle timeouts: all FTP sessions and HTTP connections sit on one list
 * ordered by last activity (touching moves a connection to the tail), so
 * expiry is O(1) per expired connection and nothing scans idle sessions.
 */
#include "tpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

struct config g_cfg;
int g_log_level = LOG_INFO;
int64_t g_now;
int g_nconns;

static int g_epfd = -1;
static struct handler g_ftp_listen = { H_LISTEN_FTP, -1, 0, NULL };
static struct handler g_http_listen = { H_LISTEN_HTTP, -1, 0, NULL };
static struct handler g_sigh = { H_SIGNAL, -1, 0, NULL };
static struct conn *g_lru_head, *g_lru_tail;   /* oldest first */
static struct conn *g_free_list;               /* killed this batch */
static int g_reserve_fd = -1;                  /* for EMFILE recovery */
static int64_t g_listen_resume;                 /* ms; 0 = listeners armed */
#define LISTEN_BACKOFF_MS 250
static volatile int g_stop;

/* ------------------------------------------------------------------------ */
/* logging                                                                   */
/* ------------------------------------------------------------------------ */

/* Write one log line "<time> [level] message" to stderr. */
void tpd_log(int level, const char *fmt, ...)
{
    static const char *names[] = { "error", "warn", "info", "debug" };
    char msg[1024], ts[32];
    struct timespec tv;
    struct tm tm;
    va_list ap;

    if (level > g_log_level)
        return;
    clock_gettime(CLOCK_REALTIME, &tv);
    gmtime_r(&tv.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s.%03ldZ [%s] %s\n", ts, tv.tv_nsec / 1000000,
            names[level], msg);
}

/* Monotonic clock in milliseconds. */
static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------ */
/* epoll + connection helpers                                                */
/* ------------------------------------------------------------------------ */

/*
 * Set the epoll interest of h to exactly `events` (0 = deregistered; a
 * socket with no interest is removed so that a reset peer cannot make a
 * level-triggered EPOLLERR/EPOLLHUP spin).
 */
void ev_set(struct handler *h, uint32_t events)
{
    struct epoll_event ev;
    int op;

    if (h->fd < 0 || h->events == events)
        return;
    if (events == 0)
        op = EPOLL_CTL_DEL;
    else if (h->events == 0)
        op = EPOLL_CTL_ADD;
    else
        op = EPOLL_CTL_MOD;
    memset(&ev, 0, sizeof(ev));
    ev.events = events;
    ev.data.ptr = h;
    if (epoll_ctl(g_epfd, op, h->fd, &ev) < 0)
        log_error("epoll_ctl(%d, fd %d): %s", op, h->fd, strerror(errno));
    h->events = events;
}

/* Deregister and close h's descriptor (no-op when already closed). */
void ev_close(struct handler *h)
{
    if (h->fd < 0)
        return;
    if (h->events)
        epoll_ctl(g_epfd, EPOLL_CTL_DEL, h->fd, NULL);
    close(h->fd);
    h->fd = -1;
    h->events = 0;
}

/* Unlink c from the idle list. */
static void lru_unlink(struct conn *c)
{
    if (c->lru_prev)
        c->lru_prev->lru_next = c->lru_next;
    else if (g_lru_head == c)
        g_lru_head = c->lru_next;
    if (c->lru_next)
        c->lru_next->lru_prev = c->lru_prev;
    else if (g_lru_tail == c)
        g_lru_tail = c->lru_prev;
    c->lru_prev = c->lru_next = NULL;
}

/* Append c at the tail (most recently active) of the idle list. */
static void lru_append(struct conn *c)
{
    c->lru_prev = g_lru_tail;
    c->lru_next = NULL;
    if (g_lru_tail)
        g_lru_tail->lru_next = c;
    else
        g_lru_head = c;
    g_lru_tail = c;
}

/* Start tracking a new connection (counts towards --max-conns). */
void conn_register(struct conn *c)
{
    c->last_active = g_now;
    lru_append(c);
    g_nconns++;
}

/* Record activity on c: it becomes the youngest connection. */
void conn_touch(struct conn *c)
{
    c->last_active = g_now;
    if (g_lru_tail != c) {
        lru_unlink(c);
        lru_append(c);
    }
}

/*
 * Close a connection now (its descriptors are closed by the protocol's
 * close function) and free its memory after the current event batch, so
 * that later events of the same batch can still safely see `dead`.
 */
void conn_kill(struct conn *c)
{
    if (c->dead)
        return;
    c->dead = true;
    lru_unlink(c);
    g_nconns--;
    if (c->kind == C_FTP)
        ftp_close(c);
    else
        http_close(c);
    c->free_next = g_free_list;
    g_free_list = c;
}

/* Release connections killed during this batch. */
static void free_dead(void)
{
    while (g_free_list) {
        struct conn *c = g_free_list;
        g_free_list = c->free_next;
        if (c->kind == C_FTP)
            ftp_free(c);
        else
            http_free(c);
    }
}

/* Bytes still waiting in b. */
size_t obuf_pending(const struct obuf *b)
{
    return b->len - b->off;
}

/* Append to b; fails (-1) if the pending data would exceed `limit`. */
int obuf_append(struct obuf *b, const void *data, size_t len, size_t limit)
{
    if (obuf_pending(b) + len > limit)
        return -1;
    if (b->off > 0 && b->off == b->len)
        b->off = b->len = 0;
    if (b->len + len > b->cap) {
        if (b->off > 0) {                    /* compact first */
            memmove(b->data, b->data + b->off, b->len - b->off);
            b->len -= b->off;
            b->off = 0;
        }
        if (b->len + len > b->cap) {
            size_t ncap = b->cap ? b->cap : 256;
            while (ncap < b->len + len)
                ncap *= 2;
            char *n = realloc(b->data, ncap);
            if (!n)
                return -1;
            b->data = n;
            b->cap = ncap;
        }
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
    return 0;
}

/*
 * printf-style append.  The whole formatted text is appended or nothing:
 * text longer than the stack buffer is formatted again into a heap buffer
 * (a response head with a 12 KiB Location must never be cut short, or the
 * next pipelined response would be read as part of it).  Returns 0, or -1
 * when formatting fails, memory runs out or b would pass limit.
 */
int obuf_printf(struct obuf *b, size_t limit, const char *fmt, ...)
{
    char tmp[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    if ((size_t)n < sizeof(tmp))
        return obuf_append(b, tmp, (size_t)n, limit);
    if (b->len - b->off + (size_t)n > limit)
        return -1;
    char *big = malloc((size_t)n + 1);
    if (!big)
        return -1;
    va_start(ap, fmt);
    int m = vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int r = m == n ? obuf_append(b, big, (size_t)n, limit) : -1;
    free(big);
    return r;
}

/*
 * Write as much of b as the socket takes.  Returns 1 when b is empty,
 * 0 when the socket is full, -1 on a write error.  Small buffers are
 * released once drained so idle sessions hold no output memory.
 */
int obuf_flush(int fd, struct obuf *b)
{
    while (b->off < b->len) {
        ssize_t n = send(fd, b->data + b->off, b->len - b->off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -1;
        }
        b->off += (size_t)n;
    }
    b->off = b->len = 0;
    if (b->cap > 4096) {
        obuf_free(b);
    }
    return 1;
}

/* Release b's memory. */
void obuf_free(struct obuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->off = b->cap = 0;
}

/* Format a socket address as "a.b.c.d:port" or "[v6]:port". */
void sockaddr_to_str(const struct sockaddr *sa, char *buf, size_t sz)
{
    char a[INET6_ADDRSTRLEN];
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const void *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
        snprintf(buf, sz, "%s:%u", a, ntohs(s4->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const void *)sa;
        inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
        snprintf(buf, sz, "[%s]:%u", a, ntohs(s6->sin6_port));
    } else {
        snprintf(buf, sz, "?");
    }
}

/* ------------------------------------------------------------------------ */
/* configuration                                                             */
/* ------------------------------------------------------------------------ */

/* Print usage to f. */
static void usage(FILE *f)
{
    fprintf(f,
"usage: tpd --users FILE [options]\n"
"  --ftp-listen ADDR:PORT    FTP control listener (default 127.0.0.1:2121)\n"
"  --http-listen ADDR:PORT   HTTP listener (omit to disable HTTP)\n"
"  --users FILE              users file: name:password:/home:r|rw\n"
"  --pasv-ports LO-HI        passive data port range (default: ephemeral)\n"
"  --masquerade ADDR         IPv4 address announced in PASV replies (NAT)\n"
"  --max-conns N             max FTP sessions + HTTP connections (10000)\n"
"  --idle-timeout SECONDS    close idle connections after this (300)\n"
"  --log-level LEVEL         error|warn|info|debug (info)\n"
"  --no-sendfile             use read/write instead of sendfile()\n"
"  --config FILE             'key = value' file with the same keys\n");
}

/* Parse a positive integer option value in [lo, hi]; -1 on error. */
static int parse_int(const char *v, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi)
        return -1;
    *out = (int)n;
    return 0;
}

/* Parse a boolean ("1/0/true/false/yes/no/on/off"). */
static int parse_bool(const char *v, bool *out)
{
    if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
        !strcasecmp(v, "on")) {
        *out = true;
        return 0;
    }
    if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") ||
        !strcasecmp(v, "off")) {
        *out = false;
        return 0;
    }
    return -1;
}

/* Apply one configuration key (file key or long option name). */
static int apply_option(const char *key, const char *val)
{
    bool b;
    if (!strcmp(key, "ftp-listen")) {
        if (strlen(val) >= sizeof(g_cfg.ftp_listen)) return -1;
        strcpy(g_cfg.ftp_listen, val);
    } else if (!strcmp(key, "http-listen")) {
        if (strlen(val) >= sizeof(g_cfg.http_listen)) return -1;
        strcpy(g_cfg.http_listen, val);
    } else if (!strcmp(key, "users")) {
        if (strlen(val) >= sizeof(g_cfg.users_file)) return -1;
        strcpy(g_cfg.users_file, val);
    } else if (!strcmp(key, "pasv-ports")) {
        int lo, hi;
        char tmp[64];
        const char *dash = strchr(val, '-');
        if (!dash || (size_t)(dash - val) >= sizeof(tmp)) return -1;
        memcpy(tmp, val, (size_t)(dash - val));
        tmp[dash - val] = '\0';
        if (parse_int(tmp, 1, 65535, &lo) || parse_int(dash + 1, 1, 65535, &hi)
            || hi < lo)
            return -1;
        g_cfg.pasv_lo = lo;
        g_cfg.pasv_hi = hi;
    } else if (!strcmp(key, "masquerade")) {
        if (inet_pton(AF_INET, val, &g_cfg.masq_addr) != 1) return -1;
        g_cfg.have_masq = true;
    } else if (!strcmp(key, "max-conns")) {
        return parse_int(val, 1, 1000000, &g_cfg.max_conns);
    } else if (!strcmp(key, "idle-timeout")) {
        return parse_int(val, 1, 86400 * 7, &g_cfg.idle_timeout);
    } else if (!strcmp(key, "log-level")) {
        static const char *lv[] = { "error", "warn", "info", "debug" };
        for (int i = 0; i < 4; i++)
            if (!strcasecmp(val, lv[i])) {
                g_log_level = i;
                return 0;
            }
        return -1;
    } else if (!strcmp(key, "no-sendfile")) {
        if (parse_bool(val, &b)) return -1;
        g_cfg.use_sendfile = !b;
    } else if (!strcmp(key, "sendfile")) {
        if (parse_bool(val, &b)) return -1;
        g_cfg.use_sendfile = b;
    } else {
        return -2;
    }
    return 0;
}

/* Trim ASCII whitespace at both ends, in place. */
static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' ||
                 s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

/* Read a "key = value" configuration file ('#' starts a comment). */
static int load_config_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[2048];
    int lineno = 0;
    if (!f) {
        log_error("config %s: %s", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof(line), f) && lineno < 100000) {
        lineno++;
        char *s = trim(line);
        if (*s == '\0' || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            log_error("config %s:%d: expected key = value", path, lineno);
            fclose(f);
            return -1;
        }
        *eq = '\0';
        char *k = trim(s), *v = trim(eq + 1);
        int r = apply_option(k, v);
        if (r) {
            log_error("config %s:%d: %s '%s'", path, lineno,
                      r == -2 ? "unknown key" : "bad value for", k);
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

/* Parse command line: --config first, then flags override it. */
static int parse_args(int argc, char **argv)
{
    static const struct option opts[] = {
        { "ftp-listen", required_argument, 0, 0 },
        { "http-listen", required_argument, 0, 0 },
        { "users", required_argument, 0, 0 },
        { "pasv-ports", required_argument, 0, 0 },
        { "masquerade", required_argument, 0, 0 },
        { "max-conns", required_argument, 0, 0 },
        { "idle-timeout", required_argument, 0, 0 },
        { "log-level", required_argument, 0, 0 },
        { "no-sendfile", no_argument, 0, 0 },
        { "config", required_argument, 0, 0 },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    int idx, c;

    /* pass 1: configuration file */
    for (int i = 1; i < argc; i++) {
        const char *path = NULL;
        if (!strcmp(argv[i], "--config") && i + 1 < argc)
            path = argv[i + 1];
        else if (!strncmp(argv[i], "--config=", 9))
            path = argv[i] + 9;
        if (path && load_config_file(path))
            return -1;
    }
    /* pass 2: flags */
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        if (c == 'h') {
            usage(stdout);
            exit(0);
        }
        if (c != 0) {
            usage(stderr);
            return -1;
        }
        const char *name = opts[idx].name;
        if (!strcmp(name, "config"))
            continue;
        if (apply_option(name, optarg ? optarg : "true")) {
            log_error("bad value for --%s", name);
            return -1;
        }
    }
    if (optind < argc) {
        log_error("unexpected argument '%s'", argv[optind]);
        return -1;
    }
    if (!g_cfg.users_file[0]) {
        log_error("--users FILE is required");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* listeners                                                                 */
/* ------------------------------------------------------------------------ */

/* Parse "host:port" / "[v6]:port" / ":port" into a socket address. */
static int parse_listen(const char *spec, struct sockaddr_storage *ss,
                        socklen_t *len)
{
    char host[128];
    const char *port;
    int p;

    memset(ss, 0, sizeof(*ss));
    if (spec[0] == '[') {
        const char *rb = strchr(spec, ']');
        if (!rb || rb[1] != ':' || (size_t)(rb - spec - 1) >= sizeof(host))
            return -1;
        memcpy(host, spec + 1, (size_t)(rb - spec - 1));
        host[rb - spec - 1] = '\0';
        port = rb + 2;
    } else {
        const char *colon = strrchr(spec, ':');
        if (!colon || (size_t)(colon - spec) >= sizeof(host))
            return -1;
        memcpy(host, spec, (size_t)(colon - spec));
        host[colon - spec] = '\0';
        port = colon + 1;
    }
    if (parse_int(port, 0, 65535, &p))
        return -1;
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    if (host[0] == '\0' || !strcmp(host, "*")) {
        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_ANY);
        s4->sin_port = htons((uint16_t)p);
        *len = sizeof(*s4);
    } else if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)p);
        *len = sizeof(*s4);
    } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)p);
        *len = sizeof(*s6);
    } else {
        return -1;
    }
    return 0;
}

/* Create a non-blocking listening socket for spec and register it. */
static int open_listener(const char *spec, struct handler *h)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int one = 1;

    if (parse_listen(spec, &ss, &len)) {
        log_error("bad listen address '%s'", spec);
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        log_error("socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, TPD_LISTEN_BACKLOG) < 0) {
        log_error("listen %s: %s", spec, strerror(errno));
        close(fd);
        return -1;
    }
    h->fd = fd;
    ev_set(h, EPOLLIN);
    log_info("listening on %s (%s)", spec,
             h->type == H_LISTEN_FTP ? "ftp" : "http");
    return 0;
}

/*
 * Accept up to 128 pending connections from listener h.  Connections over
 * --max-conns get a protocol-level "busy" reply and are closed.  On
 * EMFILE/ENFILE a reserved descriptor is released to accept-and-close the
 * head of the queue, so level-triggered readiness cannot spin.
 */
static void do_accept(struct handler *h)
{
    for (int i = 0; i < 128; i++) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof(peer);
        int fd = accept4(h->fd, (struct sockaddr *)&peer, &plen,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                errno == ENOMEM) {
                /* accept4() reports EMFILE before it looks at the queue:
                 * with the reserve descriptor released, EAGAIN means
                 * nothing is pending. */
                int dropped = 0, handled = 0;
                if (g_reserve_fd >= 0) {
                    close(g_reserve_fd);
                    fd = accept(h->fd, NULL, NULL);
                    if (fd >= 0) {
                        close(fd);
                        dropped = handled = 1;
                    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                        handled = 1;
                    }
                    g_reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                }
                if (!handled || g_reserve_fd < 0) {
                    /* cannot even drop the connection: stop listening for
                     * a while instead of spinning on level-triggered
                     * readiness (re-armed by the main loop) */
                    ev_set(&g_ftp_listen, 0);
                    ev_set(&g_http_listen, 0);
                    g_listen_resume = g_now + LISTEN_BACKOFF_MS;
                }
                if (dropped || !handled || g_reserve_fd < 0)
                    log_warn("out of file descriptors: %s",
                             dropped ? "dropped a connection"
                                     : "pausing accept for 250 ms");
            } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
                log_warn("accept: %s", strerror(errno));
            }
            return;
        }
        if (g_nconns >= g_cfg.max_conns) {
            static const char ftp_busy[] =
                "421 Too many connections, try again later.\r\n";
            static const char http_busy[] =
                "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 20\r\n"
                "Connection: close\r\nRetry-After: 5\r\n\r\nToo many clients.\r\n\r\n";
            const char *m = h->type == H_LISTEN_FTP ? ftp_busy : http_busy;
            ssize_t r = send(fd, m, strlen(m), MSG_NOSIGNAL);
            (void)r;
            close(fd);
            log_debug("connection refused: max-conns %d reached",
                      g_cfg.max_conns);
            continue;
        }
        if (h->type == H_LISTEN_FTP)
            ftp_accept(fd, &peer);
        else
            http_accept(fd, &peer);
    }
}

/* ------------------------------------------------------------------------ */
/* main loop                                                                 */
/* ------------------------------------------------------------------------ */

/* Close connections idle for longer than --idle-timeout. */
static void expire_idle(void)
{
    int64_t limit = (int64_t)g_cfg.idle_timeout * 1000;
    int guard = 0;
    while (g_lru_head && g_now - g_lru_head->last_active >= limit &&
           guard++ < 100000) {
        struct conn *c = g_lru_head;
        if (c->kind == C_FTP)
            ftp_timeout(c);
        else
            http_timeout(c);
        if (!c->dead)
            conn_kill(c);
    }
}

/* Milliseconds until the oldest connection expires or paused listeners
 * are re-armed (capped at 1 s). */
static int next_timeout_ms(void)
{
    int cap = 1000;
    if (g_listen_resume) {
        int64_t d = g_listen_resume - g_now;
        cap = d <= 0 ? 0 : d > 1000 ? 1000 : (int)d;
    }
    if (!g_lru_head)
        return cap;
    int64_t due = g_lru_head->last_active + (int64_t)g_cfg.idle_timeout * 1000
                  - g_now;
    if (due < 0)
        return 0;
    return due > cap ? cap : (int)due;
}

/* Raise RLIMIT_NOFILE soft limit to the hard limit. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int main(int argc, char **argv)
{
    struct epoll_event evs[512];
    sigset_t mask;

    /* defaults */
    strcpy(g_cfg.ftp_listen, "127.0.0.1:2121");
    g_cfg.max_conns = 10000;
    g_cfg.idle_timeout = 300;
    g_cfg.use_sendfile = true;

    if (parse_args(argc, argv))
        return 2;
    if (users_load(g_cfg.users_file))
        return 2;
    raise_nofile();
    signal(SIGPIPE, SIG_IGN);

    g_epfd = epoll_create1(EPOLL_CLOEXEC);
    if (g_epfd < 0) {
        log_error("epoll_create1: %s", strerror(errno));
        return 1;
    }
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    g_sigh.fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (g_sigh.fd < 0) {
        log_error("signalfd: %s", strerror(errno));
        return 1;
    }
    ev_set(&g_sigh, EPOLLIN);
    g_reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

    g_now = mono_ms();
    if (open_listener(g_cfg.ftp_listen, &g_ftp_listen))
        return 1;
    if (g_cfg.http_listen[0] && open_listener(g_cfg.http_listen, &g_http_listen))
        return 1;
    log_info("tpd ready: epoll level-triggered, sendfile %s, max-conns %d, "
             "idle-timeout %ds", g_cfg.use_sendfile ? "on" : "off",
             g_cfg.max_conns, g_cfg.idle_timeout);

    while (!g_stop) {
        int n = epoll_wait(g_epfd, evs, 512, next_timeout_ms());
        if (n < 0 && errno != EINTR) {
            log_error("epoll_wait: %s", strerror(errno));
            break;
        }
        g_now = mono_ms();
        for (int i = 0; i < n; i++) {
            struct handler *h = evs[i].data.ptr;
            uint32_t e = evs[i].events;
            if (h->conn && h->conn->dead)
                continue;
            switch (h->type) {
            case H_LISTEN_FTP:
            case H_LISTEN_HTTP:
                do_accept(h);
                break;
            case H_SIGNAL: {
                struct signalfd_siginfo si;
                while (read(h->fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                    log_info("signal %u: shutting down", si.ssi_signo);
                    g_stop = 1;
                }
                break;
            }
            case H_FTP_CTL:
            case H_FTP_PASV:
            case H_FTP_DATA:
                ftp_event(h, e);
                break;
            case H_HTTP:
                http_event(h, e);
                break;
            }
        }
        expire_idle();
        free_dead();
        if (g_listen_resume && g_now >= g_listen_resume) {
            g_listen_resume = 0;
            ev_set(&g_ftp_listen, EPOLLIN);
            ev_set(&g_http_listen, EPOLLIN);
            if (g_reserve_fd < 0)
                g_reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        }
    }

    /* clean shutdown: listeners first, then every connection */
    ev_close(&g_ftp_listen);
    ev_close(&g_http_listen);
    int guard = 0;
    while (g_lru_head && guard++ < 10000000)
        conn_kill(g_lru_head);
    free_dead();
    ev_close(&g_sigh);
    if (g_reserve_fd >= 0)
        close(g_reserve_fd);
    close(g_epfd);
    users_free();
    log_info("tpd stopped");
    return 0;
}
