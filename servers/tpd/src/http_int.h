/*
 * http_int.h - declarations shared by the HTTP modules of tpd (not by FTP):
 *   http_parse.c    pure parsers: request head, chunked bodies, Range,
 *                   percent coding (fuzzed: fuzz_http)
 *   http_conn.c     connections: the state machine, reading, sending,
 *                   keep-alive, lingering close
 *   http_handlers.c request handlers: GET/HEAD, PUT/POST, errors
 */
#ifndef HTTP_INT_H
#define HTTP_INT_H

#include "tpd.h"

/* ---- http_parse.c: pure parsers (no I/O, no allocation) ---------------- */
enum http_method { HM_OTHER = 0, HM_GET, HM_HEAD, HM_PUT, HM_POST,
                   HM_DELETE, HM_OPTIONS };
struct http_req {
    int method;            /* enum http_method                          */
    char method_str[16];
    const char *target;    /* points into the request buffer            */
    size_t target_len;
    int minor;             /* HTTP/1.x minor version                    */
    int64_t content_length;/* -1 when absent                            */
    bool chunked;
    bool keepalive;
    bool expect_continue;
    const char *range;     /* value of Range header or NULL             */
    size_t range_len;
};
int http_parse_request(const char *buf, size_t len, struct http_req *req);

struct chunk_dec {
    int state;
    uint64_t remaining;    /* bytes left in current chunk               */
    unsigned ndigits;
    unsigned linelen;      /* length of current extension/trailer line  */
};
int chunk_decode(struct chunk_dec *d, char *buf, size_t len,
                 size_t *consumed, size_t *produced);
int http_parse_range(const char *s, size_t len, int64_t size,
                     int64_t *start, int64_t *end);
int url_decode(const char *in, size_t inlen, char *out, size_t outsz);
int http_location_encode(const char *path, char *out, size_t outsz);

/* ---- connections (http_conn.c) and handlers (http_handlers.c) ---------- */
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

/* http_conn.c */
void http_consume(struct http_conn *c, size_t n);

/* http_handlers.c */
bool http_try_request(struct http_conn *c);
int  http_body_feed(struct http_conn *c, char *data, size_t len,
                    size_t *used);
void http_body_result(struct http_conn *c, int r);

#endif /* HTTP_INT_H */
