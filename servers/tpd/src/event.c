/*
 * event.c - tpd's event loop: the epoll instance, handler interest, the
 * loop itself (wait, dispatch by handler type, TLS sockets with buffered
 * plaintext, idle expiry, deferred frees, listener re-arming), the idle
 * list with its timeouts, and connection bookkeeping.  Declared in
 * event.h.  Calls the protocol entry points (ftp_*, http_*), listen.c
 * (listen_event, listen_resume_at, listen_resume), tls.c (interest,
 * events, the pending list), main.c's signal_event, and logging.
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

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

int64_t g_now;
int g_nconns;

static int g_epfd = -1;
static struct conn *g_lru_head, *g_lru_tail;   /* oldest first */
static struct conn *g_free_list;               /* killed this batch */
static volatile int g_stop;

/* Monotonic clock in milliseconds. */
static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Read the monotonic clock into g_now. */
void ev_now_update(void)
{
    g_now = mono_ms();
}

/* Create the epoll instance.  Returns 0, or -1 (logged). */
int ev_init(void)
{
    g_epfd = epoll_create1(EPOLL_CLOEXEC);
    if (g_epfd < 0) {
        log_error("epoll_create1: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* epoll interest + connections                                              */
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

/* ------------------------------------------------------------------------ */
/* the loop                                                                  */
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
    case H_SIGNAL:
        signal_event(h);
        break;
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

/* Leave ev_run once the current batch is done. */
void ev_stop(void)
{
    g_stop = 1;
}

/* Run the loop until ev_stop: wait (bounded by the next idle expiry or
 * listener re-arm), dispatch, then the per-iteration housekeeping. */
void ev_run(void)
{
    struct epoll_event evs[512];

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
}

/* Close every connection (oldest first) and free them. */
void ev_drain(void)
{
    int guard = 0;
    while (g_lru_head && guard++ < 10000000)
        conn_kill(g_lru_head);
    free_dead();
}

/* Close the epoll descriptor. */
void ev_fini(void)
{
    close(g_epfd);
}
