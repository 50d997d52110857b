/*
 * http.c - HTTP/1.1 connections: GET and HEAD of files below the first
 * user's home (single Range requests, 206/416), PUT and POST of a body to
 * a file (Content-Length or chunked, Expect: 100-continue), persistent
 * connections with pipelining, and explicit 4xx/5xx replies.
 *
 * Per-connection state machine (all non-blocking, driven by http_event):
 *   HS_READ   accumulate the request head in a fixed HTTP_HDR_MAX buffer
 *   HS_BODY   receive an upload body into a 256 KiB buffer, write() it
 *   HS_SEND   send the response head (obuf) then the file via sendfile()
 *   HS_DRAIN  after a "Connection: close" response: write side shut down,
 *             unread input discarded until EOF (so the kernel does not
 *             reset the connection under the response)
 *   HS_SHUT   (TLS) close_notify waits for room in the socket, then
 *             HS_DRAIN
 * Request bodies of refused uploads are read and discarded, so the
 * connection can stay alive; if the client waits for 100-continue the
 * refusal is sent at once and the connection is closed instead.
 *
 * HTTPS (--https-listen) runs the same machine over TLS: the handshake
 * comes first (in the loop, nothing read or sent before it is done), a
 * GET body goes out with SSL_sendfile() under kTLS or else pread +
 * SSL_write through a TLS_BUF_SIZE buffer held only while a body is
 * being sent, and a closing response ends with close_notify.
 */
#include "http_int.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

enum { HS_READ, HS_BODY, HS_SEND, HS_DRAIN, HS_SHUT };

struct http_conn {
    struct conn base;          /* must be first */
    struct handler h;
    int state;
    bool keepalive;
    bool broken;
    bool kick;                 /* more pipelined work: wake up again */
    struct obuf out;           /* response head (+ small generated body) */
    int file_fd;               /* response body file, -1 if none */
    struct lister *lister;     /* directory listing being streamed */
    bool chunked_out;          /* listing sent with chunked coding */
    int minor;                 /* HTTP/1.x minor version of the request */
    struct io_src body;        /* file range of the response body */
    /* upload */
    int up_fd;                 /* -1 while discarding a refused body */
    struct upload up;          /* temporary file renamed on success */
    int up_status;             /* 201 or 204 on success */
    int up_err;                /* error status to send after the body */
    bool up_chunked;
    int64_t up_remaining;      /* Content-Length bytes still expected */
    struct chunk_dec dec;
    char *upbuf;
    char *tlsbuf;              /* TLS_BUF_SIZE: GET body over TLS, no kTLS */
    char *location;            /* Location for 201 */
    size_t drained;
    /* request log */
    char method[16];
    int status;
    uint64_t sent;
    size_t inlen;
    char in[HTTP_HDR_MAX];
};

/* Reason phrase for the statuses tpd sends. */
static const char *reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    case 507: return "Insufficient Storage";
    default:  return "Unknown";
    }
}

/* RFC 9110 IMF-fixdate for t. */
static void http_date(time_t t, char *buf, size_t sz)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, sz, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* Content-Type from the file name extension. */
static const char *mime_type(const char *path)
{
    static const struct { const char *ext, *type; } types[] = {
        { ".html", "text/html; charset=utf-8" },
        { ".htm", "text/html; charset=utf-8" },
        { ".txt", "text/plain; charset=utf-8" },
        { ".css", "text/css" }, { ".js", "text/javascript" },
        { ".json", "application/json" }, { ".xml", "application/xml" },
        { ".png", "image/png" }, { ".jpg", "image/jpeg" },
        { ".jpeg", "image/jpeg" }, { ".gif", "image/gif" },
        { ".svg", "image/svg+xml" }, { ".pdf", "application/pdf" },
        { ".gz", "application/gzip" }, { ".zip", "application/zip" },
        { ".tar", "application/x-tar" },
    };
    const char *dot = strrchr(path, '.');
    if (dot && !strchr(dot, '/'))
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
            if (!strcasecmp(dot, types[i].ext))
                return types[i].type;
    return "application/octet-stream";
}

/*
 * Queue a response head (and an optional in-memory body) and switch to
 * HS_SEND.  `extra` holds additional CRLF-terminated header lines.  clen
 * < 0 means no Content-Length: the body is chunked (c->chunked_out) or
 * delimited by closing the connection.  Everything buffered for the
 * connection stays below HTTP_OBUF_LIMIT.
 */
static void respond(struct http_conn *c, int status, const char *extra,
                    const char *ctype, int64_t clen, const char *body,
                    size_t blen)
{
    char date[64], len[64];
    http_date(time(NULL), date, sizeof(date));
    if (clen >= 0)
        snprintf(len, sizeof(len), "Content-Length: %lld\r\n",
                 (long long)clen);
    else
        snprintf(len, sizeof(len), "%s", c->chunked_out ?
                 "Transfer-Encoding: chunked\r\n" : "");
    if (obuf_printf(&c->out, HTTP_OBUF_LIMIT,
                    "HTTP/1.1 %d %s\r\nServer: tpd\r\nDate: %s\r\n"
                    "%s%s%s%sConnection: %s\r\n\r\n",
                    status, reason(status), date, extra ? extra : "",
                    ctype ? "Content-Type: " : "", ctype ? ctype : "",
                    len, c->keepalive ? "keep-alive" : "close") < 0
        || (body && blen && obuf_append(&c->out, body, blen,
                                        HTTP_OBUF_LIMIT) < 0)) {
        c->broken = true;
        return;
    }
    /* note: ctype strings carry their own trailing CRLF */
    c->status = status;
    c->state = HS_SEND;
}

/* Send an error page; close_conn forces "Connection: close". */
static void error_reply(struct http_conn *c, int status, bool close_conn,
                        bool head)
{
    char body[128];
    int n = snprintf(body, sizeof(body), "%d %s\n", status, reason(status));
    if (close_conn)
        c->keepalive = false;
    respond(c, status, NULL, "text/plain; charset=utf-8\r\n", n,
            head ? NULL : body, head ? 0 : (size_t)n);
}

/* Drop the first n bytes of the request buffer. */
static void consume(struct http_conn *c, size_t n)
{
    memmove(c->in, c->in + n, c->inlen - n);
    c->inlen -= n;
}

/* Map an errno from opening a path to an HTTP status. */
static int errno_status(int e)
{
    switch (e) {
    case ENOENT: case ENOTDIR: return 404;
    case EACCES: case EPERM: case EXDEV: case ELOOP: case ENXIO:
        return 403;
    case ENAMETOOLONG: return 414;
    case EISDIR: return 405;
    case ENOSPC: case EDQUOT: return 507;
    default: return 500;
    }
}

/* GET / HEAD of vp. */
static void serve_get(struct http_conn *c, const char *vp, const char *raw,
                      bool head, const char *range, size_t range_len)
{
    struct user *u = users_first();
    struct stat st;
    char extra[512], lm[64];

    int fd = vfs_open(u, vp, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
    if (fd < 0) {
        error_reply(c, errno_status(errno), false, head);
        return;
    }
    if (fstat(fd, &st) < 0) {
        close(fd);
        error_reply(c, 500, false, head);
        return;
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        size_t rl = strlen(raw);
        if (rl == 0 || raw[rl - 1] != '/') {
            /* Location from the normalised path, percent-encoded: no
             * client byte reaches the header raw, never "//host" */
            char loc[VPATH_MAX * 3 + 32], dir[VPATH_MAX + 2];
            int n = snprintf(dir, sizeof(dir), "%s%s", vp,
                             strcmp(vp, "/") ? "/" : "");
            if (n < 0 || (size_t)n >= sizeof(dir) ||
                http_location_encode(dir, loc + 10, sizeof(loc) - 12) < 0) {
                error_reply(c, 414, false, head);
                return;
            }
            memcpy(loc, "Location: ", 10);
            strcat(loc, "\r\n");
            respond(c, 301, loc, NULL, 0, NULL, 0);
            return;
        }
        /* Streamed in LIST_CHUNK pieces as the socket drains: chunked for
         * HTTP/1.1, close-delimited for HTTP/1.0. */
        struct lister *l = head ? NULL : vfs_list_open(u, vp, LS_NLST);
        if (!head && !l) {
            error_reply(c, errno_status(errno), false, head);
            return;
        }
        if (c->minor >= 1)
            c->chunked_out = true;
        else
            c->keepalive = false;
        respond(c, 200, NULL, "text/plain; charset=utf-8\r\n", -1, NULL, 0);
        c->lister = l;
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        error_reply(c, 403, false, head);
        return;
    }
    http_date(st.st_mtime, lm, sizeof(lm));
    int64_t start = 0, end = st.st_size - 1;
    int status = 200;
    int r = range ? http_parse_range(range, range_len, st.st_size, &start,
                                     &end) : 0;
    if (r < 0) {
        close(fd);
        snprintf(extra, sizeof(extra), "Content-Range: bytes */%lld\r\n",
                 (long long)st.st_size);
        char body[] = "416 Range Not Satisfiable\n";
        respond(c, 416, extra, "text/plain; charset=utf-8\r\n",
                (int64_t)strlen(body), head ? NULL : body,
                head ? 0 : strlen(body));
        return;
    }
    if (r > 0) {
        status = 206;
        snprintf(extra, sizeof(extra),
                 "Accept-Ranges: bytes\r\nLast-Modified: %s\r\n"
                 "Content-Range: bytes %lld-%lld/%lld\r\n", lm,
                 (long long)start, (long long)end, (long long)st.st_size);
    } else {
        start = 0;
        end = st.st_size - 1;
        snprintf(extra, sizeof(extra),
                 "Accept-Ranges: bytes\r\nLast-Modified: %s\r\n", lm);
    }
    char ct[128];
    snprintf(ct, sizeof(ct), "%s\r\n", mime_type(vp));
    respond(c, status, extra, ct, end - start + 1, NULL, 0);
    if (head || end < start) {
        close(fd);
        return;
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    c->file_fd = fd;
    c->body = (struct io_src){ fd, start, end + 1, NULL, 0, 0, 0 };
}

/* Finish an upload body: reply with the stored outcome. */
static void upload_finish(struct http_conn *c)
{
    if (c->up_fd >= 0)
        close(c->up_fd);
    c->up_fd = -1;
    free(c->upbuf);
    c->upbuf = NULL;
    /* the new content replaces the target only when the body was whole */
    if (!c->up_err && vfs_upload_commit(&c->up) < 0)
        c->up_err = errno_status(errno);
    vfs_upload_abort(&c->up);
    if (c->up_err) {
        error_reply(c, c->up_err, false, false);
    } else if (c->up_status == 201) {
        char loc[VPATH_MAX * 3 + 32];
        memcpy(loc, "Location: ", 10);
        if (http_location_encode(c->location ? c->location : "/", loc + 10,
                                 sizeof(loc) - 12) < 0)
            strcpy(loc + 10, "/");
        strcat(loc, "\r\n");
        respond(c, 201, loc, NULL, 0, NULL, 0);
    } else {
        respond(c, 204, NULL, NULL, 0, NULL, 0);
    }
    free(c->location);
    c->location = NULL;
}

/* Write decoded body bytes to the upload file (errors become up_err). */
static void body_write(struct http_conn *c, const char *p, size_t n)
{
    if (c->up_fd >= 0 && !c->up_err && io_write_all(c->up_fd, p, n) != IO_OK) {
        c->up_err = errno_status(errno);
        close(c->up_fd);
        c->up_fd = -1;
    }
    c->sent += n;
}

/*
 * Feed body bytes (in place; chunked decoding rewrites them).  Sets *used
 * to the bytes belonging to this body.  Returns 1 when the body is
 * complete, 0 when more is needed, -1 on malformed chunked coding.
 */
static int body_feed(struct http_conn *c, char *data, size_t len, size_t *used)
{
    if (c->up_chunked) {
        size_t consumed = 0, produced = 0;
        int r = chunk_decode(&c->dec, data, len, &consumed, &produced);
        if (r < 0)
            return -1;
        /* over --max-body: the bytes decoded so far plus what the current
         * chunk still announces (d.remaining: the rest of a chunk being
         * read, or the size of one whose size line is being read) - a
         * chunk announced past the bound is 413 before its data comes */
        if (c->sent + produced + c->dec.remaining > (uint64_t)g_cfg.max_body)
            return -2;
        body_write(c, data, produced);
        *used = consumed;
        return r;
    }
    size_t n = len;
    if ((int64_t)n > c->up_remaining)
        n = (size_t)c->up_remaining;
    body_write(c, data, n);
    c->up_remaining -= (int64_t)n;
    *used = n;
    return c->up_remaining == 0;
}

/* Handle the outcome of body_feed (-2: over --max-body, 413). */
static void body_result(struct http_conn *c, int r)
{
    if (r < 0) {
        if (c->up_fd >= 0)
            close(c->up_fd);
        c->up_fd = -1;
        vfs_upload_abort(&c->up);
        free(c->upbuf);
        c->upbuf = NULL;
        free(c->location);
        c->location = NULL;
        error_reply(c, r == -2 ? 413 : 400, true, false);
    } else if (r > 0) {
        upload_finish(c);
    }
}

/* True when the decoded path has a ".." segment (refused for uploads). */
static bool has_dotdot(const char *raw)
{
    for (const char *p = raw; *p; ) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

/*
 * POST to a directory: open a new file there under a name tpd picks
 * ("p-" + 16 hex digits: a per-process random start, then a counter, so
 * no per-request syscall).  On success *vp2 holds the new file's path.
 * Returns the write descriptor, or -1 with errno set.
 */
static int post_open(const struct user *u, const char *vp, char *vp2,
                     struct upload *up)
{
    static uint64_t next;
    static bool seeded;
    bool existed = false;
    if (!seeded) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        next = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^
               ((uint64_t)getpid() << 48);
        seeded = true;
    }
    for (int i = 0; i < 8; i++) {
        int n = snprintf(vp2, VPATH_MAX, "%s%sp-%016llx", vp,
                         strcmp(vp, "/") ? "/" : "",
                         (unsigned long long)next++);
        if (n < 0 || n >= VPATH_MAX) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = vfs_upload_open(u, vp2, up, &existed);
        if (fd < 0 || !existed)
            return fd;
        close(fd);                     /* taken: try the next name */
        vfs_upload_abort(up);
    }
    errno = EEXIST;
    return -1;
}

/* PUT / POST: open the target and enter HS_BODY. */
static void start_upload(struct http_conn *c, const char *vp, const char *raw,
                         const struct http_req *req)
{
    struct user *u = users_first();
    int err = 0, fd = -1;
    bool existed = false;
    char vp2[VPATH_MAX];

    if (!req->chunked && req->content_length < 0) {
        error_reply(c, 411, true, false);
        return;
    }
    if (req->content_length > g_cfg.max_body) {
        error_reply(c, 413, true, false);   /* body not read: close after */
        return;
    }
    if (!u->can_write) {
        err = 403;
    } else if (has_dotdot(raw)) {
        err = 400;
    } else if (req->method == HM_POST && raw[strlen(raw) - 1] == '/') {
        fd = post_open(u, vp, vp2, &c->up);
        if (fd < 0)
            err = errno == EEXIST ? 500 : errno_status(errno);
        else
            vp = vp2;
    } else if (strcmp(vp, "/") == 0 || raw[strlen(raw) - 1] == '/') {
        err = 405;
    } else {
        /* never truncate the target: write a temporary file in the same
         * directory, rename it over the target when the body is complete */
        fd = vfs_upload_open(u, vp, &c->up, &existed);
        if (fd < 0)
            err = errno_status(errno);
    }
    bool has_body = req->chunked || req->content_length > 0;
    if (err && (!has_body || req->expect_continue)) {
        error_reply(c, err, has_body, false);
        return;
    }
    if (!err && req->expect_continue) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (obuf_append(&c->out, cont, sizeof(cont) - 1, 1 << 20) < 0 ||
            obuf_flush(&c->h, &c->out) < 0) {
            c->broken = true;
            if (fd >= 0)
                close(fd);
            vfs_upload_abort(&c->up);
            return;
        }
    }
    c->up_fd = fd;
    c->up_err = err;
    c->up_status = existed ? 204 : 201;
    c->up_chunked = req->chunked;
    c->up_remaining = req->chunked ? 0 : req->content_length;
    memset(&c->dec, 0, sizeof(c->dec));
    c->location = strdup(vp);
    c->state = HS_BODY;
    if (!req->chunked && req->content_length == 0) {
        upload_finish(c);
        return;
    }
    if (c->inlen > 0) {            /* body bytes that came with the head */
        size_t used = 0;
        int r = body_feed(c, c->in, c->inlen, &used);
        consume(c, used);
        body_result(c, r);
    }
}

/* Decode the request target to a normalised virtual path. */
static int target_path(const struct http_req *req, char *raw, char *vp)
{
    const char *t = req->target;
    size_t tl = req->target_len;
    if (tl >= 7 && (!strncasecmp(t, "http://", 7) ||
                    (tl >= 8 && !strncasecmp(t, "https://", 8)))) {
        const char *p = memchr(t + 8 - (t[4] == ':'), '/',
                               tl - (size_t)(8 - (t[4] == ':')));
        if (!p) {
            t = "/";
            tl = 1;
        } else {
            tl -= (size_t)(p - t);
            t = p;
        }
    }
    if (tl == 0 || t[0] != '/')
        return 400;
    if (url_decode(t, tl, raw, VPATH_MAX) < 0)
        return tl >= VPATH_MAX ? 414 : 400;
    if (vpath_join("/", raw, vp, VPATH_MAX) < 0)
        return 414;
    return 0;
}

/*
 * Try to take one complete request from the buffer.  Returns true when a
 * request was consumed (the state changed), false when more input is
 * needed.
 */
static bool try_request(struct http_conn *c)
{
    struct http_req req;
    char raw[VPATH_MAX], vp[VPATH_MAX], range[128];
    size_t range_len = 0;

    if (c->inlen == 0)
        return false;
    int r = http_parse_request(c->in, c->inlen, &req);
    if (r == 0) {
        if (c->inlen >= HTTP_HDR_MAX) {
            bool line_done = memchr(c->in, '\n', c->inlen) != NULL;
            c->inlen = 0;
            snprintf(c->method, sizeof(c->method), "-");
            error_reply(c, line_done ? 431 : 414, true, false);
            return true;
        }
        return false;
    }
    if (r < 0) {
        c->inlen = 0;
        snprintf(c->method, sizeof(c->method), "-");
        error_reply(c, -r, true, false);
        return true;
    }
    snprintf(c->method, sizeof(c->method), "%s", req.method_str);
    c->keepalive = req.keepalive;
    c->minor = req.minor;
    c->chunked_out = false;
    c->sent = 0;
    int perr = target_path(&req, raw, vp);
    if (req.range && req.range_len < sizeof(range)) {
        memcpy(range, req.range, req.range_len);
        range_len = req.range_len;
    }
    consume(c, (size_t)r);            /* req.* pointers are invalid now */
    bool has_body = req.chunked || req.content_length > 0;
    bool head = req.method == HM_HEAD;

    if (perr) {
        error_reply(c, perr, true, head);
    } else if (req.method == HM_GET || req.method == HM_HEAD) {
        if (has_body)
            c->keepalive = false;     /* body is not read: close after */
        serve_get(c, vp, raw, head, range_len ? range : NULL, range_len);
    } else if (req.method == HM_PUT || req.method == HM_POST) {
        start_upload(c, vp, raw, &req);
    } else {
        if (has_body)
            c->keepalive = false;
        if (req.method == HM_OPTIONS)
            respond(c, 204, "Allow: GET, HEAD, PUT, POST, OPTIONS\r\n", NULL,
                    0, NULL, 0);
        else if (req.method == HM_DELETE)
            respond(c, 405, "Allow: GET, HEAD, PUT, POST, OPTIONS\r\n",
                    "text/plain\r\n", 23, "405 Method Not Allowed\n", 23);
        else
            error_reply(c, 501, false, false);
    }
    return true;
}

/*
 * Closing response sent: (TLS) close_notify, then shut the write side and
 * drain input (HS_DRAIN); HS_SHUT while close_notify waits for room.
 */
static void start_close(struct http_conn *c)
{
    if (c->h.ssl) {
        int r = tls_close_notify(&c->h);
        if (r == IO_AGAIN) {
            c->state = HS_SHUT;
            return;
        }
        if (r != IO_OK) {
            c->broken = true;
            return;
        }
    }
    shutdown(c->h.fd, SHUT_WR);
    c->state = HS_DRAIN;
    c->drained = 0;
}

/* Response fully sent: log, then keep-alive or start the lingering close. */
static void response_done(struct http_conn *c)
{
    log_info("http %s %s %d %llu", c->base.peer_str, c->method, c->status,
             (unsigned long long)c->sent);
    free(c->tlsbuf);
    c->tlsbuf = NULL;
    if (!c->keepalive) {
        start_close(c);
        return;
    }
    c->state = HS_READ;
}

/* Send the response head and file body.  True when the response is done. */
static bool send_some(struct http_conn *c)
{
    if (obuf_pending(&c->out)) {
        int r = obuf_flush(&c->h, &c->out);
        if (r < 0) {
            c->broken = true;
            return false;
        }
        if (r == 0)
            return false;
    }
    if (c->file_fd >= 0) {
        char buf[65536];               /* --no-sendfile bounce buffer */
        unsigned fl = g_cfg.use_sendfile ? IO_SENDFILE : IO_NOKEEP;
        int r;
        if (c->h.ssl && !(g_cfg.use_sendfile && (c->h.tls_flags & TLS_KTLS_SEND))) {
            /* TLS without kTLS: SSL_write must be offered the same bytes
             * again after IO_AGAIN, so the buffer outlives the wakeup */
            if (!c->tlsbuf && !(c->tlsbuf = malloc(TLS_BUF_SIZE))) {
                c->broken = true;
                return false;
            }
            c->body.buf = c->tlsbuf;
            c->body.cap = TLS_BUF_SIZE;
            r = io_send_file(&c->h, &c->body, SEND_BUDGET, 0, &c->sent);
        } else {
            c->body.buf = buf;
            c->body.cap = sizeof(buf);
            r = io_send_file(&c->h, &c->body, SEND_BUDGET,
                             c->h.ssl ? IO_SENDFILE : fl, &c->sent);
            c->body.buf = NULL;
        }
        if (r != IO_OK && r != IO_AGAIN) {
            /* error or file shrank: the length promised is wrong, close */
            c->broken = true;
            return false;
        }
        conn_touch(&c->base);
        if (r == IO_AGAIN)
            return false;
        close(c->file_fd);
        c->file_fd = -1;
    }
    if (c->lister) {
        /* next piece of a streamed listing, once the last one has gone */
        char chunk[LIST_CHUNK];
        ssize_t n = vfs_list_read(c->lister, chunk, sizeof(chunk));
        int r = 0;
        if (n > 0 && c->chunked_out)
            r = obuf_printf(&c->out, HTTP_OBUF_LIMIT, "%zx\r\n", (size_t)n);
        if (n > 0 && r == 0)
            r = obuf_append(&c->out, chunk, (size_t)n, HTTP_OBUF_LIMIT);
        if (n > 0 && r == 0 && c->chunked_out)
            r = obuf_append(&c->out, "\r\n", 2, HTTP_OBUF_LIMIT);
        if (n == 0) {
            vfs_list_close(c->lister);
            c->lister = NULL;
            if (c->chunked_out)
                r = obuf_append(&c->out, "0\r\n\r\n", 5, HTTP_OBUF_LIMIT);
        }
        if (r < 0) {
            c->broken = true;
            return false;
        }
        c->sent += (uint64_t)(n > 0 ? n : 0);
        conn_touch(&c->base);
        return true;                   /* loop again: flush what was queued */
    }
    response_done(c);
    return true;
}

/* Read more of the request head. */
static void read_head(struct http_conn *c)
{
    int r = io_recv_append(&c->h, c->in, &c->inlen, HTTP_HDR_MAX);
    if (r != IO_OK) {
        if (r != IO_AGAIN)
            c->broken = true;
        return;
    }
    conn_touch(&c->base);
}

/* Read upload body bytes from the socket (up to 4 MiB per wakeup). */
static void read_body(struct http_conn *c)
{
    if (!c->upbuf && !(c->upbuf = malloc(XFER_BUF_SIZE))) {
        c->broken = true;
        return;
    }
    for (int i = 0; i < 16 && c->state == HS_BODY; i++) {
        size_t cap = XFER_BUF_SIZE;
        if (!c->up_chunked && (int64_t)cap > c->up_remaining)
            cap = (size_t)c->up_remaining;
        size_t n;
        int r = io_recv(&c->h, c->upbuf, cap, &n);
        if (r == IO_EOF) {
            log_info("http %s: client closed during upload",
                     c->base.peer_str);
            c->broken = true;
            return;
        }
        if (r != IO_OK) {
            if (r != IO_AGAIN)
                c->broken = true;
            break;
        }
        conn_touch(&c->base);
        size_t used = 0;
        r = body_feed(c, c->upbuf, n, &used);
        if (r > 0 && used < n) {
            /* pipelined bytes after a chunked body: keep them if they fit */
            size_t left = n - used;
            if (c->inlen + left <= HTTP_HDR_MAX) {
                memcpy(c->in + c->inlen, c->upbuf + used, left);
                c->inlen += left;
            } else {
                c->keepalive = false;
            }
        }
        body_result(c, r);
    }
}

/* Discard input after a closing response until EOF (bounded; over TLS
 * the plaintext, so nothing stays buffered in OpenSSL). */
static void drain(struct http_conn *c)
{
    char buf[16384];
    for (int i = 0; i < 8; i++) {
        size_t n;
        int r = io_recv(&c->h, buf, sizeof(buf), &n);
        if (r == IO_OK) {
            c->drained += n;
            if (c->drained > (1u << 20)) {
                c->broken = true;
                return;
            }
            continue;
        }
        if (r == IO_AGAIN)
            return;
        c->broken = true;             /* EOF or error: done */
        return;
    }
}

/* Set epoll interest from the state. */
static void http_update(struct http_conn *c)
{
    uint32_t ev = 0;
    switch (c->state) {
    case HS_READ:
        if (c->inlen < HTTP_HDR_MAX)
            ev = EPOLLIN;
        if (c->kick)
            ev |= EPOLLOUT;
        break;
    case HS_BODY:
    case HS_DRAIN:
        ev = EPOLLIN;
        break;
    case HS_SEND:
    case HS_SHUT:
        ev = EPOLLOUT;
        break;
    }
    ev_set(&c->h, ev);
}

/* Readiness on an HTTP connection: run the state machine. */
void http_event(struct handler *h, uint32_t events)
{
    struct http_conn *c = (struct http_conn *)h->conn;
    bool readable = events & (EPOLLIN | EPOLLHUP | EPOLLERR);

    c->kick = false;
    if (c->h.ssl && (c->h.tls_flags & TLS_HANDSHAKE)) {
        int r = tls_handshake(&c->h);
        if (r == IO_OK) {
            tls_done_log(&c->h, "https");
        } else {
            if (r != IO_AGAIN) {
                log_info("http %s: TLS handshake failed: %s",
                         c->base.peer_str, tls_last_error());
                c->broken = true;
            }
            goto out;
        }
        readable = false;      /* the request comes with the next wakeup */
    }
    if (c->state == HS_SHUT && (events & EPOLLOUT))
        start_close(c);
    if (readable) {
        if (c->state == HS_READ)
            read_head(c);
        else if (c->state == HS_BODY)
            read_body(c);
        else if (c->state == HS_DRAIN)
            drain(c);
    }
    int guard;
    for (guard = 0; guard < 32 && !c->broken; guard++) {
        if (c->state == HS_READ) {
            if (!try_request(c))
                break;
        } else if (c->state == HS_SEND) {
            if (!send_some(c))
                break;
        } else {
            break;
        }
    }
    if (guard == 32 && c->state == HS_READ && c->inlen > 0)
        c->kick = true;
out:
    if (c->broken)
        conn_kill(&c->base);
    else
        http_update(c);
}

/* New HTTP connection (tls: from the HTTPS listener, handshake first). */
void http_accept(int fd, const struct sockaddr_storage *peer, bool tls)
{
    struct http_conn *c = malloc(sizeof(*c));
    if (!c) {
        close(fd);
        return;
    }
    memset(c, 0, offsetof(struct http_conn, in));
    /* A response is a head written with write() and a body sent with sendfile():
     * with Nagle on, the body's last partial segment waits for the ACK of the head,
     * which a keep-alive client delays (~40 ms on Linux) as it has nothing to send
     * until the response is complete: 22 GETs/s on one connection.  Every response
     * is built whole before it is written, so Nagle has nothing to coalesce here
     * (as on the FTP control connection); the cost is the head's own segment. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->base.kind = C_HTTP;
    c->h = (struct handler){ .type = H_HTTP, .fd = fd, .conn = &c->base };
    c->file_fd = -1;
    c->up_fd = -1;
    c->up.dirfd = c->up.fd = -1;
    c->state = HS_READ;
    sockaddr_to_str((const struct sockaddr *)peer, c->base.peer_str,
                    sizeof(c->base.peer_str));
    conn_register(&c->base);
    if (tls && tls_attach(&c->h, true) < 0) {
        conn_kill(&c->base);
        return;
    }
    http_update(c);
}

/* Idle timeout (event.c closes the connection afterwards). */
void http_timeout(struct conn *c)
{
    log_debug("http %s: idle timeout", c->peer_str);
}

/* Close the connection's descriptors. */
void http_close(struct conn *cc)
{
    struct http_conn *c = (struct http_conn *)cc;
    ev_close(&c->h);
    if (c->file_fd >= 0)
        close(c->file_fd);
    if (c->up_fd >= 0)
        close(c->up_fd);
    c->file_fd = c->up_fd = -1;
    vfs_upload_abort(&c->up);          /* an unfinished PUT leaves no trace */
    vfs_list_close(c->lister);
    c->lister = NULL;
}

/* Release the connection's memory. */
void http_free(struct conn *cc)
{
    struct http_conn *c = (struct http_conn *)cc;
    obuf_free(&c->out);
    free(c->upbuf);
    free(c->tlsbuf);
    free(c->location);
    free(c);
}
