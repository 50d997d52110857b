/*
 * listen.c - the FTP and HTTP listening sockets (and their implicit-TLS
 * twins, FTPS and HTTPS): address parsing, bind and
 * listen, accepting new connections (with the --max-conns "busy" reply),
 * and descriptor-exhaustion recovery (a reserved descriptor, then a short
 * pause of both listeners that the event loop lifts).
 *
 * Calls the protocols' accept functions (ftp_accept, http_accept), event.c
 * (interest, g_now, g_nconns) and logging; reads g_cfg.
 */
#include "tpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

static struct handler g_ftp_listen = { .type = H_LISTEN_FTP, .fd = -1 };
static struct handler g_http_listen = { .type = H_LISTEN_HTTP, .fd = -1 };
static struct handler g_ftps_listen = { .type = H_LISTEN_FTPS, .fd = -1 };
static struct handler g_https_listen = { .type = H_LISTEN_HTTPS, .fd = -1 };
static struct handler *const g_listeners[] = {
    &g_ftp_listen, &g_http_listen, &g_ftps_listen, &g_https_listen };
#define NLISTENERS (sizeof(g_listeners) / sizeof(g_listeners[0]))
static int g_reserve_fd = -1;                  /* for EMFILE recovery */
static int64_t g_listen_resume;                 /* ms; 0 = listeners armed */
#define LISTEN_BACKOFF_MS 250

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
    if (config_parse_int(port, 0, 65535, &p))
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
    static const char *names[] = { [H_LISTEN_FTP] = "ftp",
        [H_LISTEN_HTTP] = "http", [H_LISTEN_FTPS] = "ftps (implicit TLS)",
        [H_LISTEN_HTTPS] = "https" };
    log_info("listening on %s (%s)", spec, names[h->type]);
    return 0;
}
/*
 * Accept up to 128 pending connections from listener h and hand each to
 * ftp_accept or http_accept.  Connections over
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
                     * readiness (re-armed by the event loop) */
                    for (size_t k = 0; k < NLISTENERS; k++)
                        ev_set(g_listeners[k], 0);
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
        bool tls = h->type == H_LISTEN_FTPS || h->type == H_LISTEN_HTTPS;
        if (g_nconns >= g_cfg.max_conns && tls) {
            /* no plaintext reply can go before a handshake: just close */
            close(fd);
            log_debug("TLS connection refused: max-conns %d reached",
                      g_cfg.max_conns);
            continue;
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
        if (h->type == H_LISTEN_FTP || h->type == H_LISTEN_FTPS)
            ftp_accept(fd, &peer, tls);
        else
            http_accept(fd, &peer, tls);
    }
}

/*
 * Open the reserve descriptor and the listeners of g_cfg (HTTP, FTPS and
 * HTTPS only when configured).  Returns 0, or -1 after logging why a listener could not be
 * opened.
 */
int listen_start(void)
{
    g_reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (open_listener(g_cfg.ftp_listen, &g_ftp_listen))
        return -1;
    if (g_cfg.http_listen[0] && open_listener(g_cfg.http_listen, &g_http_listen))
        return -1;
    if (g_cfg.ftps_listen[0] && open_listener(g_cfg.ftps_listen, &g_ftps_listen))
        return -1;
    if (g_cfg.https_listen[0] && open_listener(g_cfg.https_listen, &g_https_listen))
        return -1;
    return 0;
}

/* Readiness on a listener: accept what is pending (no errors returned). */
void listen_event(struct handler *h)
{
    do_accept(h);
}

/* When paused listeners are due to be re-armed (ms, monotonic), 0 if armed. */
int64_t listen_resume_at(void)
{
    return g_listen_resume;
}

/* Re-arm listeners paused for descriptor exhaustion once their time has
 * come (and retry the reserve descriptor).  Returns nothing. */
void listen_resume(void)
{
    if (g_listen_resume && g_now >= g_listen_resume) {
        g_listen_resume = 0;
        for (size_t k = 0; k < NLISTENERS; k++)
            ev_set(g_listeners[k], EPOLLIN);
        if (g_reserve_fd < 0)
            g_reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
}

/* Close the listeners and the reserve descriptor (no errors). */
void listen_stop(void)
{
    for (size_t k = 0; k < NLISTENERS; k++)
        ev_close(g_listeners[k]);
    if (g_reserve_fd >= 0)
        close(g_reserve_fd);
    g_reserve_fd = -1;
}
