/*
 * main.c - tpd entry point: the single epoll event loop, idle timeouts,
 * SIGTERM handling, logging, and the small helpers shared by the protocol
 * modules (epoll interest management, connection bookkeeping, output
 * buffers).  Configuration is in config.c, the listeners in listen.c.
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

int64_t g_now;
int g_nconns;

static int g_epfd = -1;
static struct handler g_sigh = { .type = H_SIGNAL, .fd = -1 };
static struct conn *g_lru_head, *g_lru_tail;   /* oldest first */
static struct conn *g_free_list;               /* killed this batch */
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

    if (h->fd < 0)
        return;
    if (h->ssl)
        events = tls_interest(h, events);
    if (h->events == events)
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

/* Free h's TLS session, deregister and close h's descriptor (no-op when
 * already closed). */
void ev_close(struct handler *h)
{
    tls_detach(h);
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
 * Write as much of b as socket h takes (send(), or SSL_write on a TLS
 * socket; nothing before its handshake is done).  Returns 1 when b is
 * empty, 0 when the socket is full, -1 on a write error.  Small buffers are
 * released once drained so idle sessions hold no output memory.
 */
int obuf_flush(struct handler *h, struct obuf *b)
{
    for (int guard = 0; b->off < b->len && guard < 4096; guard++) {
        size_t n;
        int r = io_send(h, b->data + b->off, b->len - b->off, &n);
        if (r == IO_AGAIN)
            return 0;
        if (r != IO_OK)
            return -1;
        b->off += n;
    }
    if (b->off < b->len)
        return 0;
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
/* main loop                                                                 */
/* ------------------------------------------------------------------------ */

/* Run the handler of readiness `e` on h. */
static void dispatch(struct handler *h, uint32_t e)
{
    if (h->conn && h->conn->dead)
        return;
    e = tls_events(h, e);
    switch (h->type) {
    case H_LISTEN_FTP:
    case H_LISTEN_HTTP:
    case H_LISTEN_FTPS:
    case H_LISTEN_HTTPS:
        listen_event(h);
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

/*
 * Serve TLS sockets that hold decrypted plaintext and want to read (epoll
 * cannot report it): each is run once as if EPOLLIN had fired, and goes
 * back on the list while plaintext remains.
 */
static void run_tls_pending(void)
{
    struct handler *hs[512];
    int n = tls_pending_take(hs, 512);
    for (int i = 0; i < n; i++)
        if (hs[i]->fd >= 0 && hs[i]->ssl)
            dispatch(hs[i], EPOLLIN);
}

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
    int64_t resume = listen_resume_at();
    if (resume) {
        int64_t d = resume - g_now;
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

    if (config_load(argc, argv))
        return 2;
    if (g_cfg.tls_info) {
        int r = tls_init();
        tls_print_info(stdout);
        tls_cleanup();
        return r ? 2 : 0;
    }
    if (users_load(g_cfg.users_file))
        return 2;
    if (tls_init()) {
        users_free();
        return 2;
    }
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

    g_now = mono_ms();
    if (listen_start())
        return 1;
    log_info("tpd ready: epoll level-triggered, sendfile %s, max-conns %d, "
             "idle-timeout %ds, TLS %s", g_cfg.use_sendfile ? "on" : "off",
             g_cfg.max_conns, g_cfg.idle_timeout, tls_enabled() ? "on" : "off");

    while (!g_stop) {
        int n = epoll_wait(g_epfd, evs, 512,
                           tls_have_pending() ? 0 : next_timeout_ms());
        if (n < 0 && errno != EINTR) {
            log_error("epoll_wait: %s", strerror(errno));
            break;
        }
        g_now = mono_ms();
        for (int i = 0; i < n; i++)
            dispatch(evs[i].data.ptr, evs[i].events);
        run_tls_pending();
        expire_idle();
        free_dead();
        listen_resume();
    }

    /* clean shutdown: listeners first, then every connection */
    listen_stop();
    int guard = 0;
    while (g_lru_head && guard++ < 10000000)
        conn_kill(g_lru_head);
    free_dead();
    ev_close(&g_sigh);
    close(g_epfd);
    users_free();
    tls_cleanup();
    log_info("tpd stopped");
    return 0;
}
