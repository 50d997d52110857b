/*
 * ftp.c - FTP sessions (RFC 959, with the RFC 2389 FEAT/OPTS, RFC 3659
 * SIZE/MDTM/REST/MLST/MLSD and RFC 2428 EPSV/EPRT extensions).
 *
 * A session owns three handlers: the control connection, an optional
 * passive listener (PASV/EPSV) and an optional data connection.  The
 * control connection is line-buffered in a fixed FTP_LINE_MAX buffer; each
 * complete line is parsed (parse.c) and dispatched.  While a transfer runs,
 * only ABOR, QUIT, STAT and NOOP are executed; other commands wait in the
 * buffer (in order) until the transfer reply has been sent.
 *
 * Transfers: RETR uses sendfile() from the file to the data socket, at most
 * SEND_BUDGET bytes per wakeup (or pread+send with --no-sendfile); STOR and
 * APPE read the data socket into a 256 KiB buffer and write() it to the
 * file (large buffered writes); a STOR that starts a new file writes a
 * temporary name and renames it over the target only on success; listings
 * are generated LIST_CHUNK bytes at a time as the data socket drains.  Replies that cannot be written at once are kept in a
 * per-session output buffer; a client that stops reading replies stops
 * having its commands processed, and is closed past OBUF_LIMIT.
 *
 * Errors never close the session directly: they set `broken`, and the
 * session is killed at the end of the event (ftp_event) - this keeps every
 * code path free of use-after-free.
 */
#include "tpd.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

enum { X_NONE, X_FILE_OUT, X_BUF_OUT, X_FILE_IN };

struct ftp_sess {
    struct conn base;              /* must be first */
    struct handler ctl, pasv, data;
    struct sockaddr_storage peer, local;
    struct user *user;             /* NULL until PASS succeeds */
    char *pending_user;            /* name given with USER */
    char *cwd;                     /* virtual working directory */
    char *rnfr;                    /* pending rename source */
    off_t rest;                    /* REST offset for next transfer */
    int fails;                     /* failed logins */
    bool broken;                   /* kill at end of event */
    bool quitting;                 /* close once replies are flushed */
    bool discarding;               /* skipping the rest of a long line */
    bool in_process;               /* reentrancy guard for process_lines */
    bool epsv_all;
    bool port_set;                 /* PORT/EPRT address pending */
    bool connecting;               /* active-mode connect in progress */
    struct sockaddr_storage port_addr;
    socklen_t port_len;
    int xfer;                      /* X_* */
    const char *xverb;             /* for the transfer log line */
    int file_fd;
    struct io_src src;             /* RETR range (file_fd, xbuf borrowed) */
    char *xbuf;                    /* STOR / no-sendfile buffer */
    struct obuf list;              /* listing chunk being sent */
    struct lister *lister;         /* listing in progress (streamed) */
    struct upload up;              /* STOR to a temporary name */
    uint64_t xbytes;
    int64_t xstart;
    struct obuf out;               /* pending control replies */
    size_t inlen;
    char in[FTP_LINE_MAX];
};

static int g_next_pasv_port;

static void process_lines(struct ftp_sess *s);

/* ------------------------------------------------------------------------ */
/* replies                                                                   */
/* ------------------------------------------------------------------------ */

/* Queue raw reply text and try to send it now. */
static void reply_raw(struct ftp_sess *s, const char *text, size_t len)
{
    if (s->broken)
        return;
    if (obuf_append(&s->out, text, len, OBUF_LIMIT) < 0) {
        log_warn("ftp %s: client not reading replies, closing",
                 s->base.peer_str);
        s->broken = true;
        return;
    }
    if (obuf_flush(s->ctl.fd, &s->out) < 0)
        s->broken = true;
}

/* Queue a single-line reply "code text". */
static void reply(struct ftp_sess *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void reply(struct ftp_sess *s, int code, const char *fmt, ...)
{
    char buf[VPATH_MAX * 2 + 256];    /* a quoted path doubles its '"' */
    int n = snprintf(buf, sizeof(buf), "%d ", code);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 2, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += m;
    if ((size_t)n > sizeof(buf) - 3)
        n = (int)sizeof(buf) - 3;
    /* a reply must not contain CR/LF from client-supplied text */
    for (int i = 4; i < n; i++)
        if (buf[i] == '\r' || buf[i] == '\n')
            buf[i] = ' ';
    buf[n++] = '\r';
    buf[n++] = '\n';
    reply_raw(s, buf, (size_t)n);
}

/* Set the control connection's epoll interest from the session state. */
static void ctl_update(struct ftp_sess *s)
{
    uint32_t ev = 0;
    size_t pend = obuf_pending(&s->out);
    if (pend)
        ev |= EPOLLOUT;
    if (!s->quitting && s->inlen < FTP_LINE_MAX && pend < 16384)
        ev |= EPOLLIN;
    ev_set(&s->ctl, ev);
}

/* Quote a path for a 257 reply (RFC 959: embedded '"' is doubled). */
static void quote_path(const char *p, char *out, size_t sz)
{
    size_t o = 0;
    for (; *p && o + 3 < sz; p++) {
        if (*p == '"')
            out[o++] = '"';
        out[o++] = *p;
    }
    out[o] = '\0';
}

/* ------------------------------------------------------------------------ */
/* data connections                                                          */
/* ------------------------------------------------------------------------ */

/* IPv4 address of sa (also for v4-mapped IPv6), or false. */
static bool ipv4_of(const struct sockaddr_storage *sa, struct in_addr *out)
{
    if (sa->ss_family == AF_INET) {
        *out = ((const struct sockaddr_in *)sa)->sin_addr;
        return true;
    }
    if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const void *)sa;
        if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
            memcpy(out, &s6->sin6_addr.s6_addr[12], 4);
            return true;
        }
    }
    return false;
}

/* Do a and b carry the same IP address (ports ignored)? */
static bool same_ip(const struct sockaddr_storage *a,
                    const struct sockaddr_storage *b)
{
    struct in_addr x, y;
    if (ipv4_of(a, &x) && ipv4_of(b, &y))
        return x.s_addr == y.s_addr;
    if (a->ss_family == AF_INET6 && b->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
    return false;
}

/* Close any passive listener / data connection and forget PORT. */
static void data_reset(struct ftp_sess *s)
{
    ev_close(&s->pasv);
    ev_close(&s->data);
    s->port_set = false;
    s->connecting = false;
}

/* Is a data connection set up or on its way? */
static bool data_ready(const struct ftp_sess *s)
{
    return s->data.fd >= 0 || s->pasv.fd >= 0 || s->port_set;
}

/*
 * Open a passive listener on the control connection's local address, with
 * a port from --pasv-ports (or an ephemeral one).  Returns the port or -1.
 */
static int open_pasv(struct ftp_sess *s)
{
    struct sockaddr_storage a = s->local;
    socklen_t alen = a.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                            : sizeof(struct sockaddr_in6);
    int fd, tries, range;

    data_reset(s);
    fd = socket(a.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    /* tpd closes data connections first, so each passive port is left with
     * a TIME_WAIT connection for 60 s; without SO_REUSEADDR that blocks
     * bind() on the port and quick transfers exhaust the range (425). */
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    range = g_cfg.pasv_lo ? g_cfg.pasv_hi - g_cfg.pasv_lo + 1 : 1;
    if (range > 4096)
        range = 4096;                      /* bounded search */
    for (tries = 0; tries < range; tries++) {
        int port = 0;
        if (g_cfg.pasv_lo) {
            int span = g_cfg.pasv_hi - g_cfg.pasv_lo + 1;
            port = g_cfg.pasv_lo + (g_next_pasv_port++ % span);
            if (g_next_pasv_port >= span)
                g_next_pasv_port = 0;
        }
        if (a.ss_family == AF_INET)
            ((struct sockaddr_in *)&a)->sin_port = htons((uint16_t)port);
        else
            ((struct sockaddr_in6 *)&a)->sin6_port = htons((uint16_t)port);
        if (bind(fd, (struct sockaddr *)&a, alen) == 0)
            break;
        if (errno != EADDRINUSE) {
            close(fd);
            return -1;
        }
    }
    if (tries == range || listen(fd, 1) < 0) {
        close(fd);
        return -1;
    }
    if (getsockname(fd, (struct sockaddr *)&a, &alen) < 0) {
        close(fd);
        return -1;
    }
    s->pasv.fd = fd;
    ev_set(&s->pasv, EPOLLIN);
    return a.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&a)->sin_port)
                                  : ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
}

/* Free transfer state and send the final transfer reply. */
static void xfer_done(struct ftp_sess *s, int code, const char *msg)
{
    if (s->xfer != X_NONE && g_log_level >= LOG_INFO) {
        double secs = (double)(g_now - s->xstart) / 1000.0;
        log_info("ftp %s %s: %s %llu bytes in %.3fs (%d)", s->base.peer_str,
                 s->user ? s->user->name : "-", s->xverb,
                 (unsigned long long)s->xbytes, secs, code);
    }
    data_reset(s);
    if (s->file_fd >= 0)
        close(s->file_fd);
    s->file_fd = -1;
    if (s->up.dirfd >= 0) {
        /* STOR: the upload replaces the target only if it completed */
        if (code == 226 && vfs_upload_commit(&s->up) < 0) {
            code = 451;
            msg = "Failure writing to local storage.";
        } else {
            vfs_upload_abort(&s->up);
        }
    }
    vfs_list_close(s->lister);
    s->lister = NULL;
    free(s->xbuf);
    s->xbuf = NULL;
    s->src = (struct io_src){ .fd = -1 };
    obuf_free(&s->list);
    s->xfer = X_NONE;
    reply(s, code, "%s", msg);
    process_lines(s);          /* resume commands queued behind the transfer */
}

/* Data connection ready: arm the direction the transfer needs. */
static void xfer_io(struct ftp_sess *s)
{
    ev_set(&s->data, s->xfer == X_FILE_IN ? EPOLLIN : EPOLLOUT);
}

/* Start the data side of a transfer that has just been accepted (150). */
static void xfer_begin(struct ftp_sess *s)
{
    s->xstart = g_now;
    s->xbytes = 0;
    if (s->data.fd >= 0) {
        xfer_io(s);
    } else if (s->pasv.fd >= 0) {
        /* wait for the client to connect (pasv_accept) */
    } else if (s->port_set) {
        int fd = socket(s->port_addr.ss_family,
                        SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        s->port_set = false;
        if (fd < 0) {
            xfer_done(s, 425, "Failed to establish connection.");
            return;
        }
        if (s->local.ss_family == s->port_addr.ss_family) {
            struct sockaddr_storage src = s->local;
            if (src.ss_family == AF_INET)
                ((struct sockaddr_in *)&src)->sin_port = 0;
            else
                ((struct sockaddr_in6 *)&src)->sin6_port = 0;
            (void)bind(fd, (struct sockaddr *)&src,
                       src.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                                : sizeof(struct sockaddr_in6));
        }
        if (connect(fd, (struct sockaddr *)&s->port_addr, s->port_len) < 0 &&
            errno != EINPROGRESS) {
            close(fd);
            xfer_done(s, 425, "Failed to establish connection.");
            return;
        }
        s->data.fd = fd;
        s->connecting = true;
        ev_set(&s->data, EPOLLOUT);
    } else {
        xfer_done(s, 425, "Use PORT or PASV first.");
    }
}

/* Accept the client's connection on the passive listener. */
static void pasv_accept(struct ftp_sess *s)
{
    struct sockaddr_storage peer;
    socklen_t plen = sizeof(peer);
    if (s->pasv.fd < 0)
        return;
    int fd = accept4(s->pasv.fd, (struct sockaddr *)&peer, &plen,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
            errno == ENOMEM) {
            /* The pending connection stays queued, so a level-triggered
             * listener would fire again at once and spin.  Give up this
             * passive port: a waiting transfer gets 425, otherwise the
             * next transfer command does ("Use PORT or PASV first"). */
            log_warn("ftp %s: passive accept: %s", s->base.peer_str,
                     strerror(errno));
            ev_close(&s->pasv);
            if (s->xfer != X_NONE)
                xfer_done(s, 425, "Failed to establish connection.");
        }
        return;
    }
    if (!same_ip(&peer, &s->peer)) {
        char ps[64];
        sockaddr_to_str((struct sockaddr *)&peer, ps, sizeof(ps));
        log_warn("ftp %s: rejected data connection from %s",
                 s->base.peer_str, ps);
        close(fd);
        return;
    }
    ev_close(&s->pasv);               /* one connection per PASV */
    s->data.fd = fd;
    if (s->xfer != X_NONE)
        xfer_io(s);
}

/* RETR: sendfile() (or pread+send) up to SEND_BUDGET bytes (io.c). */
static void send_file(struct ftp_sess *s)
{
    unsigned fl = g_cfg.use_sendfile ? IO_SENDFILE : 0;
    switch (io_send_file(s->data.fd, &s->src, SEND_BUDGET, fl, &s->xbytes)) {
    case IO_OK:
        xfer_done(s, 226, "Transfer complete.");
        return;
    case IO_EOF:
        xfer_done(s, 451, "File shrank during transfer.");
        return;
    case IO_FILE_ERR:
        xfer_done(s, 451, "Error reading local file.");
        return;
    case IO_SOCK_ERR:
        xfer_done(s, 426, "Connection closed; transfer aborted.");
        return;
    }
    conn_touch(&s->base);
}

/*
 * LIST/NLST/MLSD: send the listing, generated LIST_CHUNK bytes at a time
 * when the previous chunk has gone (bounded memory per session).
 */
static void send_list(struct ftp_sess *s)
{
    for (int guard = 0; guard < 64; guard++) {
        if (obuf_pending(&s->list) == 0) {
            char chunk[LIST_CHUNK];
            ssize_t n = vfs_list_read(s->lister, chunk, sizeof(chunk));
            if (n == 0) {
                xfer_done(s, 226, "Directory send OK.");
                return;
            }
            if (obuf_append(&s->list, chunk, (size_t)n, LIST_CHUNK) < 0) {
                xfer_done(s, 451, "Out of memory.");
                return;
            }
        }
        size_t before = obuf_pending(&s->list);
        int r = obuf_flush(s->data.fd, &s->list);
        s->xbytes += before - obuf_pending(&s->list);
        if (r < 0) {
            xfer_done(s, 426, "Connection closed; transfer aborted.");
            return;
        }
        if (r == 0)
            break;
    }
    conn_touch(&s->base);
}

/* STOR/APPE: read the data socket and write the file (buffered). */
static void recv_file(struct ftp_sess *s)
{
    for (int i = 0; i < 16; i++) {
        size_t n;
        int r = io_recv(s->data.fd, s->xbuf, XFER_BUF_SIZE, &n);
        if (r == IO_AGAIN)
            break;
        if (r == IO_EOF) {
            xfer_done(s, 226, "Transfer complete.");
            return;
        }
        if (r != IO_OK) {
            xfer_done(s, 426, "Connection closed; transfer aborted.");
            return;
        }
        if (io_write_all(s->file_fd, s->xbuf, n) != IO_OK) {
            xfer_done(s, 451, "Failure writing to local storage.");
            return;
        }
        s->xbytes += (uint64_t)n;
    }
    conn_touch(&s->base);
}

/* Readiness on the data connection. */
static void data_event(struct ftp_sess *s, uint32_t events)
{
    (void)events;
    if (s->data.fd < 0)
        return;
    if (s->connecting) {
        int err = 0;
        socklen_t el = sizeof(err);
        getsockopt(s->data.fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) {
            xfer_done(s, 425, "Failed to establish connection.");
            return;
        }
        s->connecting = false;
        if (s->xfer == X_NONE)
            ev_set(&s->data, 0);
        else
            xfer_io(s);
        return;
    }
    switch (s->xfer) {
    case X_FILE_OUT: send_file(s); break;
    case X_BUF_OUT:  send_list(s); break;
    case X_FILE_IN:  recv_file(s); break;
    default:         ev_set(&s->data, 0); break;
    }
}

/* ------------------------------------------------------------------------ */
/* command handlers                                                          */
/* ------------------------------------------------------------------------ */

/* Resolve arg against cwd into vp; replies 553 and returns -1 on overflow. */
static int resolve(struct ftp_sess *s, const char *arg, char *vp)
{
    if (vpath_join(s->cwd ? s->cwd : "/", arg, vp, VPATH_MAX) < 0) {
        reply(s, 553, "File name too long.");
        return -1;
    }
    return 0;
}

static void cmd_user(struct ftp_sess *s, const char *arg)
{
    if (s->user) {
        reply(s, 530, "Can't change to another user.");
        return;
    }
    free(s->pending_user);
    s->pending_user = strndup(arg, 64);
    reply(s, 331, "Please specify the password.");
}

static void cmd_pass(struct ftp_sess *s, const char *arg)
{
    if (s->user) {
        reply(s, 230, "Already logged in.");
        return;
    }
    if (!s->pending_user) {
        reply(s, 503, "Login with USER first.");
        return;
    }
    struct user *u = users_find(s->pending_user);
    if (u && users_check_password(u, arg)) {
        s->user = u;
        s->cwd = strdup("/");
        if (!s->cwd) {
            s->broken = true;
            return;
        }
        log_info("ftp %s: user %s logged in", s->base.peer_str, u->name);
        reply(s, 230, "Login successful.");
    } else {
        log_info("ftp %s: failed login for '%s'", s->base.peer_str,
                 s->pending_user);
        reply(s, 530, "Login incorrect.");
        if (++s->fails >= 3)
            s->quitting = true;
    }
    free(s->pending_user);
    s->pending_user = NULL;
}

static void cmd_syst(struct ftp_sess *s, const char *arg)
{
    (void)arg;
    reply(s, 215, "UNIX Type: L8");
}

static void cmd_feat(struct ftp_sess *s, const char *arg)
{
    static const char feat[] =
        "211-Features:\r\n"
        " EPRT\r\n"
        " EPSV\r\n"
        " MDTM\r\n"
        " MLST type*;size*;modify*;perm*;unix.mode*;unique*;\r\n"
        " PASV\r\n"
        " REST STREAM\r\n"
        " SIZE\r\n"
        " TVFS\r\n"
        " UTF8\r\n"
        "211 End\r\n";
    (void)arg;
    reply_raw(s, feat, sizeof(feat) - 1);
}

static void cmd_opts(struct ftp_sess *s, const char *arg)
{
    if (!strncasecmp(arg, "UTF8", 4) && (arg[4] == '\0' || arg[4] == ' '))
        reply(s, 200, "Always in UTF8 mode.");
    else if (!strncasecmp(arg, "MLST", 4))
        reply(s, 200, "MLST OPTS type;size;modify;perm;unix.mode;unique;");
    else
        reply(s, 501, "Option not understood.");
}

static void cmd_pwd(struct ftp_sess *s, const char *arg)
{
    char q[VPATH_MAX * 2];
    (void)arg;
    quote_path(s->cwd, q, sizeof(q));
    reply(s, 257, "\"%s\" is the current directory", q);
}

/* Change the working directory to arg if it is a directory. */
static void change_dir(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX];
    if (resolve(s, arg, vp))
        return;
    int fd = vfs_open(s->user, vp, O_PATH | O_DIRECTORY, 0);
    if (fd < 0) {
        reply(s, 550, "Failed to change directory.");
        return;
    }
    close(fd);
    char *n = strdup(vp);
    if (!n) {
        s->broken = true;
        return;
    }
    free(s->cwd);
    s->cwd = n;
    reply(s, 250, "Directory successfully changed.");
}

static void cmd_cwd(struct ftp_sess *s, const char *arg) { change_dir(s, arg); }
static void cmd_cdup(struct ftp_sess *s, const char *arg)
{
    (void)arg;
    change_dir(s, "..");
}

static void cmd_type(struct ftp_sess *s, const char *arg)
{
    char t = (char)toupper((unsigned char)arg[0]);
    if ((t == 'I' && arg[1] == '\0') ||
        (t == 'L' && !strcmp(arg + 1, " 8")))
        reply(s, 200, "Switching to Binary mode.");
    else if (t == 'A' && (arg[1] == '\0' || !strcasecmp(arg + 1, " N")))
        reply(s, 200, "Switching to ASCII mode.");
    else
        reply(s, 504, "Bad TYPE command.");
}

static void cmd_mode(struct ftp_sess *s, const char *arg)
{
    if (!strcasecmp(arg, "S"))
        reply(s, 200, "Mode set to S.");
    else
        reply(s, 504, "Bad MODE command.");
}

static void cmd_stru(struct ftp_sess *s, const char *arg)
{
    if (!strcasecmp(arg, "F"))
        reply(s, 200, "Structure set to F.");
    else
        reply(s, 504, "Bad STRU command.");
}

static void cmd_pasv(struct ftp_sess *s, const char *arg)
{
    struct in_addr a;
    (void)arg;
    if (s->epsv_all) {
        reply(s, 501, "PASV not allowed after EPSV ALL.");
        return;
    }
    if (g_cfg.have_masq)
        a = g_cfg.masq_addr;
    else if (!ipv4_of(&s->local, &a)) {
        reply(s, 425, "PASV needs IPv4; use EPSV.");
        return;
    }
    int port = open_pasv(s);
    if (port < 0) {
        reply(s, 425, "Could not open passive port.");
        return;
    }
    uint32_t ip = ntohl(a.s_addr);
    reply(s, 227, "Entering Passive Mode (%u,%u,%u,%u,%u,%u).",
          ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255,
          (unsigned)port >> 8, (unsigned)port & 255);
}

static void cmd_epsv(struct ftp_sess *s, const char *arg)
{
    struct in_addr dummy;
    int fam = ipv4_of(&s->local, &dummy) ? 1 : 2;
    if (!strcasecmp(arg, "ALL")) {
        s->epsv_all = true;
        reply(s, 200, "EPSV ALL ok.");
        return;
    }
    if (arg[0] && !((arg[0] == '1' || arg[0] == '2') && arg[1] == '\0')) {
        reply(s, 501, "Bad EPSV argument.");
        return;
    }
    if (arg[0] && arg[0] - '0' != fam) {
        reply(s, 522, "Network protocol not supported, use (%d)", fam);
        return;
    }
    int port = open_pasv(s);
    if (port < 0) {
        reply(s, 425, "Could not open passive port.");
        return;
    }
    reply(s, 229, "Entering Extended Passive Mode (|||%d|)", port);
}

/* Accept addr for active mode only if it is the client's own address. */
static void set_port(struct ftp_sess *s, const struct sockaddr_storage *ss,
                     socklen_t len)
{
    if (!same_ip(ss, &s->peer)) {
        reply(s, 500, "Illegal PORT command: address differs from client.");
        return;
    }
    data_reset(s);
    s->port_addr = *ss;
    s->port_len = len;
    s->port_set = true;
    reply(s, 200, "PORT command successful. Consider using PASV.");
}

static void cmd_port(struct ftp_sess *s, const char *arg)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (s->epsv_all) {
        reply(s, 501, "PORT not allowed after EPSV ALL.");
        return;
    }
    if (ftp_parse_port(arg, (struct sockaddr_in *)&ss) < 0) {
        reply(s, 501, "Illegal PORT command.");
        return;
    }
    /* a v4-mapped control connection needs a v4-mapped target */
    if (s->local.ss_family == AF_INET6) {
        struct sockaddr_in6 s6;
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        memset(&s6, 0, sizeof(s6));
        s6.sin6_family = AF_INET6;
        s6.sin6_port = s4->sin_port;
        s6.sin6_addr.s6_addr[10] = 0xff;
        s6.sin6_addr.s6_addr[11] = 0xff;
        memcpy(&s6.sin6_addr.s6_addr[12], &s4->sin_addr, 4);
        memset(&ss, 0, sizeof(ss));
        memcpy(&ss, &s6, sizeof(s6));
        set_port(s, &ss, sizeof(s6));
        return;
    }
    set_port(s, &ss, sizeof(struct sockaddr_in));
}

static void cmd_eprt(struct ftp_sess *s, const char *arg)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (s->epsv_all) {
        reply(s, 501, "EPRT not allowed after EPSV ALL.");
        return;
    }
    if (ftp_parse_eprt(arg, &ss, &len) < 0) {
        reply(s, 501, "Bad EPRT command.");
        return;
    }
    if (ss.ss_family != s->local.ss_family) {
        struct in_addr dummy;
        reply(s, 522, "Network protocol not supported, use (%d)",
              ipv4_of(&s->local, &dummy) && s->local.ss_family == AF_INET ? 1 : 2);
        return;
    }
    set_port(s, &ss, len);
}

/* Strip leading "-la"-style options from a LIST/NLST argument. */
static const char *skip_ls_options(const char *arg)
{
    for (int i = 0; i < 16 && arg[0] == '-'; i++) {
        while (*arg && *arg != ' ')
            arg++;
        while (*arg == ' ')
            arg++;
    }
    return arg;
}

/* LIST, NLST and MLSD. */
static void do_list(struct ftp_sess *s, const char *arg, int style)
{
    char vp[VPATH_MAX];
    if (!data_ready(s)) {
        reply(s, 425, "Use PORT or PASV first.");
        return;
    }
    if (style != LS_MLSD)
        arg = skip_ls_options(arg);
    if (resolve(s, arg, vp))
        return;
    s->lister = vfs_list_open(s->user, vp, style);
    if (!s->lister) {
        data_reset(s);
        reply(s, style == LS_MLSD && errno == ENOTDIR ? 501 : 550,
              style == LS_MLSD && errno == ENOTDIR ? "Not a directory."
                                                   : "Failed to open directory.");
        return;
    }
    s->xfer = X_BUF_OUT;
    s->xverb = style == LS_MLSD ? "MLSD" : style == LS_NLST ? "NLST" : "LIST";
    reply(s, 150, "Here comes the directory listing.");
    xfer_begin(s);
}

static void cmd_list(struct ftp_sess *s, const char *arg) { do_list(s, arg, LS_LIST); }
static void cmd_nlst(struct ftp_sess *s, const char *arg) { do_list(s, arg, LS_NLST); }
static void cmd_mlsd(struct ftp_sess *s, const char *arg) { do_list(s, arg, LS_MLSD); }

/* stat() a path below home following in-home symlinks; -1 + reply 550. */
static int stat_path(struct ftp_sess *s, const char *arg, char *vp,
                     struct stat *st)
{
    if (resolve(s, arg, vp))
        return -1;
    int fd = vfs_open(s->user, vp, O_PATH, 0);
    if (fd < 0 || fstat(fd, st) < 0) {
        if (fd >= 0)
            close(fd);
        reply(s, 550, "No such file or directory.");
        return -1;
    }
    close(fd);
    return 0;
}

static void cmd_mlst(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX], facts[512];
    struct stat st;
    if (stat_path(s, arg, vp, &st))
        return;
    vfs_mlst_line(&st, NULL, s->user->can_write, facts, sizeof(facts));
    char buf[VPATH_MAX * 2 + 600];
    int n = snprintf(buf, sizeof(buf), "250-Listing %s\r\n %s %s\r\n250 End\r\n",
                     vp, facts, vp);
    if (n > 0 && (size_t)n < sizeof(buf))
        reply_raw(s, buf, (size_t)n);
    else
        reply(s, 553, "File name too long.");
}

static void cmd_size(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX];
    struct stat st;
    if (stat_path(s, arg, vp, &st))
        return;
    if (!S_ISREG(st.st_mode))
        reply(s, 550, "Could not get file size.");
    else
        reply(s, 213, "%lld", (long long)st.st_size);
}

static void cmd_mdtm(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX], t[32];
    struct stat st;
    struct tm tm;
    if (stat_path(s, arg, vp, &st))
        return;
    gmtime_r(&st.st_mtime, &tm);
    strftime(t, sizeof(t), "%Y%m%d%H%M%S", &tm);
    reply(s, 213, "%s", t);
}

static void cmd_rest(struct ftp_sess *s, const char *arg)
{
    long long v = 0;
    size_t i;
    for (i = 0; arg[i]; i++) {
        if (!isdigit((unsigned char)arg[i]) || i >= 18) {
            reply(s, 501, "Bad REST argument.");
            return;
        }
        v = v * 10 + (arg[i] - '0');
    }
    s->rest = (off_t)v;
    reply(s, 350, "Restart position accepted (%lld).", v);
}

static void cmd_retr(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX];
    struct stat st;
    off_t rest = s->rest;
    s->rest = 0;
    if (!data_ready(s)) {
        reply(s, 425, "Use PORT or PASV first.");
        return;
    }
    if (resolve(s, arg, vp))
        return;
    int fd = vfs_open(s->user, vp, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        data_reset(s);
        reply(s, 550, "Failed to open file.");
        return;
    }
    if (!g_cfg.use_sendfile) {
        s->xbuf = malloc(XFER_BUF_SIZE);
        if (!s->xbuf) {
            close(fd);
            reply(s, 451, "Out of memory.");
            return;
        }
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    s->file_fd = fd;
    s->src = (struct io_src){ fd, rest > st.st_size ? st.st_size : rest,
                              st.st_size, s->xbuf, XFER_BUF_SIZE, 0, 0 };
    s->xfer = X_FILE_OUT;
    s->xverb = "RETR";
    reply(s, 150, "Opening BINARY mode data connection for %s (%lld bytes).",
          vp, (long long)st.st_size);
    xfer_begin(s);
}

/* STOR (append=false) and APPE (append=true). */
static void do_store(struct ftp_sess *s, const char *arg, bool append)
{
    char vp[VPATH_MAX];
    struct stat st;
    off_t rest = s->rest;
    s->rest = 0;
    if (!data_ready(s)) {
        reply(s, 425, "Use PORT or PASV first.");
        return;
    }
    if (resolve(s, arg, vp))
        return;
    int fd;
    if (!append && rest == 0) {
        /* a whole new file: write a temporary name, rename on 226 */
        bool existed;
        fd = vfs_upload_open(s->user, vp, &s->up, &existed);
    } else {
        int flags = O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY;
        if (append)
            flags |= O_APPEND;
        fd = vfs_open(s->user, vp, flags, 0644);
    }
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        (!append && rest > 0 && lseek(fd, rest, SEEK_SET) < 0)) {
        if (fd >= 0)
            close(fd);
        vfs_upload_abort(&s->up);
        data_reset(s);
        reply(s, 553, "Could not create file.");
        return;
    }
    s->xbuf = malloc(XFER_BUF_SIZE);
    if (!s->xbuf) {
        close(fd);
        vfs_upload_abort(&s->up);
        reply(s, 451, "Out of memory.");
        return;
    }
    s->file_fd = fd;
    s->xfer = X_FILE_IN;
    s->xverb = append ? "APPE" : "STOR";
    reply(s, 150, "Ok to send data.");
    xfer_begin(s);
}

static void cmd_stor(struct ftp_sess *s, const char *arg) { do_store(s, arg, false); }
static void cmd_appe(struct ftp_sess *s, const char *arg) { do_store(s, arg, true); }

static void cmd_dele(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX];
    const char *name;
    if (resolve(s, arg, vp))
        return;
    int pfd = vfs_open_parent(s->user, vp, &name);
    if (pfd < 0 || unlinkat(pfd, name, 0) < 0) {
        if (pfd >= 0)
            close(pfd);
        reply(s, 550, "Delete operation failed.");
        return;
    }
    close(pfd);
    reply(s, 250, "Delete operation successful.");
}

static void cmd_mkd(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX], q[VPATH_MAX * 2];
    const char *name;
    if (resolve(s, arg, vp))
        return;
    int pfd = vfs_open_parent(s->user, vp, &name);
    if (pfd < 0 || mkdirat(pfd, name, 0755) < 0) {
        if (pfd >= 0)
            close(pfd);
        reply(s, 550, "Create directory operation failed.");
        return;
    }
    close(pfd);
    quote_path(vp, q, sizeof(q));
    reply(s, 257, "\"%s\" created", q);
}

static void cmd_rmd(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX];
    const char *name;
    if (resolve(s, arg, vp))
        return;
    int pfd = vfs_open_parent(s->user, vp, &name);
    if (pfd < 0 || unlinkat(pfd, name, AT_REMOVEDIR) < 0) {
        if (pfd >= 0)
            close(pfd);
        reply(s, 550, "Remove directory operation failed.");
        return;
    }
    close(pfd);
    reply(s, 250, "Remove directory operation successful.");
}

static void cmd_rnfr(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX];
    const char *name;
    struct stat st;
    if (resolve(s, arg, vp))
        return;
    int pfd = vfs_open_parent(s->user, vp, &name);
    if (pfd < 0 || fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (pfd >= 0)
            close(pfd);
        reply(s, 550, "RNFR command failed.");
        return;
    }
    close(pfd);
    free(s->rnfr);
    s->rnfr = strdup(vp);
    reply(s, 350, "Ready for RNTO.");
}

static void cmd_rnto(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX];
    const char *from_name, *to_name;
    if (!s->rnfr) {
        reply(s, 503, "RNFR required first.");
        return;
    }
    char *from = s->rnfr;
    s->rnfr = NULL;
    if (resolve(s, arg, vp)) {
        free(from);
        return;
    }
    int fp = vfs_open_parent(s->user, from, &from_name);
    int tp = fp >= 0 ? vfs_open_parent(s->user, vp, &to_name) : -1;
    int ok = fp >= 0 && tp >= 0 && renameat(fp, from_name, tp, to_name) == 0;
    if (fp >= 0)
        close(fp);
    if (tp >= 0)
        close(tp);
    free(from);
    if (ok)
        reply(s, 250, "Rename successful.");
    else
        reply(s, 550, "Rename failed.");
}

static void cmd_noop(struct ftp_sess *s, const char *arg)
{
    (void)arg;
    reply(s, 200, "NOOP ok.");
}

static void cmd_abor(struct ftp_sess *s, const char *arg)
{
    (void)arg;
    if (s->xfer != X_NONE) {
        xfer_done(s, 426, "Transfer aborted.");
        reply(s, 226, "ABOR successful.");
    } else {
        data_reset(s);
        reply(s, 225, "No transfer to abort.");
    }
}

static void cmd_quit(struct ftp_sess *s, const char *arg)
{
    (void)arg;
    reply(s, 221, "Goodbye.");
    s->quitting = true;
}

static void cmd_stat(struct ftp_sess *s, const char *arg)
{
    char buf[512];
    if (arg[0]) {
        reply(s, 502, "STAT with argument not implemented; use LIST.");
        return;
    }
    int n = snprintf(buf, sizeof(buf),
                     "211-tpd FTP server status:\r\n"
                     " Connected from %s\r\n Logged in as %s\r\n"
                     " Transfer in progress: %s\r\n211 End of status\r\n",
                     s->base.peer_str, s->user ? s->user->name : "(none)",
                     s->xfer != X_NONE ? "yes" : "no");
    if (n > 0 && (size_t)n < sizeof(buf))
        reply_raw(s, buf, (size_t)n);
}

static void cmd_help(struct ftp_sess *s, const char *arg)
{
    static const char help[] =
        "214-The following commands are recognized.\r\n"
        " ABOR APPE CDUP CWD DELE EPRT EPSV FEAT HELP LIST MDTM MKD MLSD\r\n"
        " MLST MODE NLST NOOP OPTS PASS PASV PORT PWD QUIT REST RETR RMD\r\n"
        " RNFR RNTO SIZE STAT STOR STRU SYST TYPE USER XCUP XCWD XMKD XPWD\r\n"
        " XRMD\r\n"
        "214 Help OK.\r\n";
    (void)arg;
    reply_raw(s, help, sizeof(help) - 1);
}

static void cmd_allo(struct ftp_sess *s, const char *arg)
{
    (void)arg;
    reply(s, 202, "ALLO command ignored.");
}

static void cmd_acct(struct ftp_sess *s, const char *arg)
{
    (void)arg;
    reply(s, 202, "ACCT not needed.");
}

static void cmd_clnt(struct ftp_sess *s, const char *arg)
{
    (void)arg;
    reply(s, 200, "Noted.");
}

static void cmd_notimpl(struct ftp_sess *s, const char *arg)
{
    (void)arg;
    reply(s, 502, "Command not implemented.");
}

#define F_AUTH  1u   /* requires login */
#define F_ARG   2u   /* requires an argument */
#define F_WRITE 4u   /* requires "rw" permission */
#define F_XFER  8u   /* allowed while a transfer runs */

static const struct {
    void (*fn)(struct ftp_sess *, const char *);
    unsigned flags;
} g_cmds[FC__COUNT] = {
    [FC_USER] = { cmd_user, F_ARG },
    [FC_PASS] = { cmd_pass, 0 },
    [FC_ACCT] = { cmd_acct, 0 },
    [FC_SYST] = { cmd_syst, 0 },
    [FC_FEAT] = { cmd_feat, 0 },
    [FC_OPTS] = { cmd_opts, F_ARG },
    [FC_PWD]  = { cmd_pwd, F_AUTH },
    [FC_CWD]  = { cmd_cwd, F_AUTH | F_ARG },
    [FC_CDUP] = { cmd_cdup, F_AUTH },
    [FC_TYPE] = { cmd_type, F_AUTH | F_ARG },
    [FC_MODE] = { cmd_mode, F_AUTH | F_ARG },
    [FC_STRU] = { cmd_stru, F_AUTH | F_ARG },
    [FC_PASV] = { cmd_pasv, F_AUTH },
    [FC_EPSV] = { cmd_epsv, F_AUTH },
    [FC_PORT] = { cmd_port, F_AUTH | F_ARG },
    [FC_EPRT] = { cmd_eprt, F_AUTH | F_ARG },
    [FC_LIST] = { cmd_list, F_AUTH },
    [FC_NLST] = { cmd_nlst, F_AUTH },
    [FC_MLSD] = { cmd_mlsd, F_AUTH },
    [FC_MLST] = { cmd_mlst, F_AUTH },
    [FC_SIZE] = { cmd_size, F_AUTH | F_ARG },
    [FC_MDTM] = { cmd_mdtm, F_AUTH | F_ARG },
    [FC_REST] = { cmd_rest, F_AUTH | F_ARG },
    [FC_RETR] = { cmd_retr, F_AUTH | F_ARG },
    [FC_STOR] = { cmd_stor, F_AUTH | F_ARG | F_WRITE },
    [FC_APPE] = { cmd_appe, F_AUTH | F_ARG | F_WRITE },
    [FC_DELE] = { cmd_dele, F_AUTH | F_ARG | F_WRITE },
    [FC_MKD]  = { cmd_mkd, F_AUTH | F_ARG | F_WRITE },
    [FC_RMD]  = { cmd_rmd, F_AUTH | F_ARG | F_WRITE },
    [FC_RNFR] = { cmd_rnfr, F_AUTH | F_ARG | F_WRITE },
    [FC_RNTO] = { cmd_rnto, F_AUTH | F_ARG | F_WRITE },
    [FC_NOOP] = { cmd_noop, F_XFER },
    [FC_ABOR] = { cmd_abor, F_AUTH | F_XFER },
    [FC_QUIT] = { cmd_quit, F_XFER },
    [FC_STAT] = { cmd_stat, F_XFER },
    [FC_HELP] = { cmd_help, 0 },
    [FC_ALLO] = { cmd_allo, F_AUTH },
    [FC_SITE] = { cmd_notimpl, F_AUTH },
    [FC_AUTH] = { cmd_notimpl, 0 },
    [FC_PBSZ] = { cmd_notimpl, 0 },
    [FC_PROT] = { cmd_notimpl, 0 },
    [FC_LANG] = { cmd_notimpl, 0 },
    [FC_HOST] = { cmd_notimpl, 0 },
    [FC_CLNT] = { cmd_clnt, 0 },
};

/* Check preconditions and run one parsed command. */
static void dispatch(struct ftp_sess *s, const struct ftp_cmd *cmd)
{
    if (cmd->id == FC_PASS)
        log_debug("ftp %s: <- PASS ****", s->base.peer_str);
    else
        log_debug("ftp %s: <- %s %s", s->base.peer_str, cmd->verb, cmd->arg);
    if (cmd->id == FC_UNKNOWN || !g_cmds[cmd->id].fn) {
        reply(s, 500, "Unknown command.");
        return;
    }
    unsigned fl = g_cmds[cmd->id].flags;
    if (s->rnfr && cmd->id != FC_RNTO) {     /* RNTO must follow RNFR */
        free(s->rnfr);
        s->rnfr = NULL;
    }
    if ((fl & F_AUTH) && !s->user) {
        reply(s, 530, "Please login with USER and PASS.");
        return;
    }
    if ((fl & F_ARG) && cmd->arg[0] == '\0') {
        reply(s, 501, "Syntax error in parameters or arguments.");
        return;
    }
    if ((fl & F_WRITE) && !s->user->can_write) {
        reply(s, 550, "Permission denied.");
        return;
    }
    g_cmds[cmd->id].fn(s, cmd->arg);
}

/* ------------------------------------------------------------------------ */
/* control connection                                                        */
/* ------------------------------------------------------------------------ */

/* Drop the first n bytes of the input buffer. */
static void consume(struct ftp_sess *s, size_t n)
{
    memmove(s->in, s->in + n, s->inlen - n);
    s->inlen -= n;
}

/*
 * Execute complete command lines from the input buffer, in order.  Stops
 * when no complete line remains, when replies back up (the client is not
 * reading), or when a command must wait for the running transfer.
 */
static void process_lines(struct ftp_sess *s)
{
    char work[FTP_LINE_MAX];
    struct ftp_cmd cmd;

    if (s->in_process)
        return;
    s->in_process = true;
    for (int guard = 0; guard < FTP_LINE_MAX && !s->broken && !s->quitting;
         guard++) {
        if (obuf_pending(&s->out) > 16384)
            break;
        char *nl = memchr(s->in, '\n', s->inlen);
        if (!nl) {
            if (s->inlen == FTP_LINE_MAX) {
                s->inlen = 0;
                if (!s->discarding)
                    reply(s, 500, "Command line too long.");
                s->discarding = true;
            }
            break;
        }
        size_t ll = (size_t)(nl - s->in) + 1;
        if (s->discarding) {
            consume(s, ll);
            s->discarding = false;
            continue;
        }
        int r = ftp_parse_line(s->in, ll, work, sizeof(work), &cmd);
        if (r == 0 && s->xfer != X_NONE && cmd.id != FC_UNKNOWN &&
            !(g_cmds[cmd.id].flags & F_XFER))
            break;                     /* wait for the transfer to end */
        consume(s, ll);
        if (r < 0) {
            if (ll > 2)
                reply(s, 500, "Syntax error, command unrecognized.");
            continue;
        }
        dispatch(s, &cmd);
    }
    s->in_process = false;
}

/* Read from the control connection and run what arrived. */
static void ctl_read(struct ftp_sess *s)
{
    if (s->inlen >= FTP_LINE_MAX)
        return;
    size_t n;
    int r = io_recv(s->ctl.fd, s->in + s->inlen, FTP_LINE_MAX - s->inlen, &n);
    if (r == IO_AGAIN)
        return;
    if (r != IO_OK) {
        if (r == IO_EOF)
            log_debug("ftp %s: client closed control connection",
                      s->base.peer_str);
        s->broken = true;
        return;
    }
    s->inlen += n;
    conn_touch(&s->base);
    process_lines(s);
}

/* Dispatch readiness on any of a session's descriptors. */
void ftp_event(struct handler *h, uint32_t events)
{
    struct ftp_sess *s = (struct ftp_sess *)h->conn;

    switch (h->type) {
    case H_FTP_CTL:
        if (events & EPOLLOUT) {
            if (obuf_flush(s->ctl.fd, &s->out) < 0)
                s->broken = true;
            else if (obuf_pending(&s->out) == 0)
                process_lines(s);      /* resume after back-pressure */
        }
        if (!s->broken && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
            ctl_read(s);
        break;
    case H_FTP_PASV:
        pasv_accept(s);
        break;
    case H_FTP_DATA:
        data_event(s, events);
        break;
    }
    if (s->broken || (s->quitting && obuf_pending(&s->out) == 0))
        conn_kill(&s->base);
    else
        ctl_update(s);
}

/* New control connection: allocate the session and greet. */
void ftp_accept(int fd, const struct sockaddr_storage *peer)
{
    struct ftp_sess *s = calloc(1, sizeof(*s));
    int one = 1;
    socklen_t llen = sizeof(s->local);
    if (!s) {
        close(fd);
        return;
    }
    s->base.kind = C_FTP;
    s->ctl = (struct handler){ H_FTP_CTL, fd, 0, &s->base };
    s->pasv = (struct handler){ H_FTP_PASV, -1, 0, &s->base };
    s->data = (struct handler){ H_FTP_DATA, -1, 0, &s->base };
    s->file_fd = -1;
    s->src.fd = -1;
    s->up.dirfd = s->up.fd = -1;
    s->peer = *peer;
    getsockname(fd, (struct sockaddr *)&s->local, &llen);
    setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_to_str((const struct sockaddr *)peer, s->base.peer_str,
                    sizeof(s->base.peer_str));
    conn_register(&s->base);
    log_debug("ftp %s: connected", s->base.peer_str);
    reply(s, 220, "tpd FTP server ready.");
    if (s->broken)
        conn_kill(&s->base);
    else
        ctl_update(s);
}

/* Idle timeout: say so (best effort) before main.c closes the session. */
void ftp_timeout(struct conn *c)
{
    struct ftp_sess *s = (struct ftp_sess *)c;
    static const char msg[] = "421 Timeout.\r\n";
    ssize_t r = send(s->ctl.fd, msg, sizeof(msg) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)r;
    log_info("ftp %s: idle timeout", c->peer_str);
}

/* Close every descriptor of the session (memory freed by ftp_free). */
void ftp_close(struct conn *c)
{
    struct ftp_sess *s = (struct ftp_sess *)c;
    ev_close(&s->ctl);
    ev_close(&s->pasv);
    ev_close(&s->data);
    if (s->file_fd >= 0)
        close(s->file_fd);
    s->file_fd = -1;
    vfs_upload_abort(&s->up);          /* an unfinished STOR leaves no trace */
    vfs_list_close(s->lister);
    s->lister = NULL;
    log_debug("ftp %s: closed", c->peer_str);
}

/* Release the session's memory. */
void ftp_free(struct conn *c)
{
    struct ftp_sess *s = (struct ftp_sess *)c;
    free(s->pending_user);
    free(s->cwd);
    free(s->rnfr);
    free(s->xbuf);
    obuf_free(&s->list);
    obuf_free(&s->out);
    free(s);
}
