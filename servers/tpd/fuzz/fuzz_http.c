/*
 * fuzz_http.c - libFuzzer target for the HTTP request parser.
 *
 * Each input is a byte stream received on an HTTP connection.  It runs
 * http_parse_request() on it, percent-decodes and normalises the target,
 * parses any Range header, and decodes the bytes after the head as a
 * chunked body in two pieces (split at a data-dependent point) to check
 * that incremental decoding never over-reads or over-produces.
 */
#include "tpd.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct http_req req;
    char raw[VPATH_MAX], vp[VPATH_MAX];

    if (size > HTTP_HDR_MAX * 2)
        return 0;
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    int r = http_parse_request(buf, size, &req);
    if (r > (int)size)
        abort();
    if (r > 0) {
        if (req.target < buf || req.target + req.target_len > buf + size)
            abort();
        if (url_decode(req.target, req.target_len, raw, sizeof(raw)) >= 0 &&
            vpath_join("/", raw, vp, sizeof(vp)) == 0 && vp[0] != '/')
            abort();
        if (req.range) {
            int64_t a = 0, b = 0;
            int64_t sizes[] = { 0, 1, 1000, (int64_t)1 << 40 };
            for (int i = 0; i < 4; i++) {
                int rr = http_parse_range(req.range, req.range_len, sizes[i],
                                          &a, &b);
                if (rr > 0 && (a < 0 || b < a || b >= sizes[i]))
                    abort();
            }
        }
        /* the rest as a chunked body, fed in two parts */
        struct chunk_dec d;
        memset(&d, 0, sizeof(d));
        size_t rest = size - (size_t)r, split = rest ? (size_t)data[0] % (rest + 1) : 0;
        size_t consumed = 0, produced = 0;
        int cr = chunk_decode(&d, buf + r, split, &consumed, &produced);
        if (cr >= 0 && (consumed > split || produced > consumed))
            abort();
        if (cr == 0) {
            char *p2 = buf + r + split;
            consumed = produced = 0;
            cr = chunk_decode(&d, p2, rest - split, &consumed, &produced);
            if (cr >= 0 && (consumed > rest - split || produced > consumed))
                abort();
        }
    }
    free(buf);
    return 0;
}
