/*
 * fuzz_http.c - libFuzzer target for the HTTP request parser.
 *
 * Each input is a byte stream received on an HTTP connection.  It runs
 * http_parse_request() on it, percent-decodes and normalises the target,
 * parses any Range header, and decodes the bytes after the head as a
 * chunked body in two pieces (split at a data-dependent point) to check
 * that incremental decoding never over-reads or over-produces.  The
 * decoded, normalised path also goes through the Location encoder (the
 * 301/201 header path) and the listing-line formatter (the HTTP/FTP
 * directory listing path, with the path as an entry name and fuzz-derived
 * attributes): a Location never holds a control byte, a space or '%'
 * that is not an escape, never starts with "//", and decodes back to the
 * path; a listing line is bounded and ends in exactly one CRLF.
 */
#include "http_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Location and listing checks for a normalised path vp. */
static void check_location_and_listing(const char *vp, const uint8_t *data,
                                       size_t size)
{
    static char loc[VPATH_MAX * 3 + 8], back[VPATH_MAX + 8];
    static char line[LIST_LINE_MAX];
    int n = http_location_encode(vp, loc, sizeof(loc));
    if (n < 0)
        abort();                              /* worst case always fits */
    if (n >= 2 && loc[0] == '/' && loc[1] == '/')
        abort();
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)loc[i];
        if (c <= 0x20 || c >= 0x7F || c == '"' || c == '<' || c == '>' ||
            c == '\\' || c == '?' || c == '#')
            abort();
    }
    if (url_decode(loc, (size_t)n, back, sizeof(back)) < 0 ||
        strcmp(back, vp) != 0)
        abort();
    /* the path (minus its leading '/') as a directory entry name */
    struct stat st;
    memset(&st, 0, sizeof(st));
    uint64_t bits = 0;
    for (size_t i = 0; i < size && i < 8; i++)
        bits = bits << 8 | data[i];
    st.st_mode = (mode_t)(bits & 0177777);
    st.st_size = (off_t)(bits >> 3);
    st.st_mtime = (time_t)(int32_t)(bits >> 17);
    st.st_nlink = (nlink_t)(bits & 0xFFFF);
    for (int style = LS_LIST; style <= LS_MLSD; style++) {
        int l = list_format_line(style, vp + 1, &st, (bits & 1) ? vp : NULL,
                                 bits & 2, (time_t)1700000000, line,
                                 sizeof(line));
        if (l < 2 || (size_t)l >= sizeof(line) || line[l] != '\0' ||
            line[l - 2] != '\r' || line[l - 1] != '\n')
            abort();
    }
}

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
        if (url_decode(req.target, req.target_len, raw, sizeof(raw)) >= 0) {
            for (const char *p = raw; *p; p++)
                if ((unsigned char)*p < 0x20 || *p == 0x7F)
                    abort();                  /* control bytes are refused */
            if (vpath_join("/", raw, vp, sizeof(vp)) == 0) {
                if (vp[0] != '/')
                    abort();
                check_location_and_listing(vp, data, size);
            }
        }
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
