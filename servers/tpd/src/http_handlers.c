/*
 * http_handlers.c - tpd's HTTP request handlers: routing a parsed request
 * (http_try_request), GET and HEAD of files below the first user's home
 * (single Range requests, 206/416, a file body handed to the connection
 * for sendfile(), directory listings streamed by the connection, 301 to
 * the directory with a slash), PUT and POST of a body to a file
 * (Content-Length or chunked, Expect: 100-continue, --max-body: 413; the
 * body's sink: decoding, writing to the temporary file, 201/204 on
 * completion), OPTIONS, and explicit 4xx/5xx replies.
 *
 * Request bodies of refused uploads are read and discarded, so the
 * connection can stay alive; if the client waits for 100-continue the
 * refusal is sent at once and the connection is closed instead.
 *
 * Calls http_parse.c (request, Range, chunked, percent coding), vpath.c,
 * vfs.c (confined opens, listings, uploads), users.c, obuf.c, io.c
 * (io_write_all) and http_conn.c's http_consume; reads g_cfg.  Responses
 * are queued in c->out and the state set to HS_SEND for http_conn.c to
 * send (only an interim "100 Continue" is flushed here at once).
 */
#include "http_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

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
int http_body_feed(struct http_conn *c, char *data, size_t len, size_t *used)
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

/* Handle the outcome of http_body_feed (-2: over --max-body, 413). */
void http_body_result(struct http_conn *c, int r)
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
        int r = http_body_feed(c, c->in, c->inlen, &used);
        http_consume(c, used);
        http_body_result(c, r);
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
bool http_try_request(struct http_conn *c)
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
    http_consume(c, (size_t)r);       /* req.* pointers are invalid now */
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
