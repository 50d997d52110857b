/*
 * http_int.h - declarations shared by the HTTP modules of tpd (not by FTP):
 *   http_parse.c   pure parsers: request head, chunked bodies, Range,
 *                  percent coding (fuzzed: fuzz_http)
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

#endif /* HTTP_INT_H */
