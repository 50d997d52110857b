/*
 * http_parse.c - the HTTP/1.1 request grammar of tpd: the request line
 * and header fields (framing, keep-alive, Expect, Range), the incremental
 * chunked transfer-coding decoder, single-range Range values, and the
 * percent coding of request targets and Location values.
 *
 * Pure: works on caller-supplied, length-bounded buffers, never reads
 * outside [buf, buf+len), no I/O, no allocation, no globals; calls only
 * libc (string, ctype).  Fuzzed by fuzz/fuzz_http.c; declarations in
 * http_int.h.
 */
#include "http_int.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

/* Case-insensitive compare of a counted string with a C string. */
static bool ieq(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(s, lit, n) == 0;
}

/* True if comma-separated header value list contains token `tok`. */
static bool has_token(const char *v, size_t n, const char *tok)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (ieq(v + s, e - s, tok))
            return true;
    }
    return false;
}

/* RFC 9110 token characters (method and header names). */
static bool is_tchar(unsigned char c)
{
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/*
 * Parse an HTTP/1.x request head in buf[0..len).  Lines may end in CRLF or
 * bare LF.  Returns the length of the head (through the blank line) when
 * complete, 0 when more bytes are needed, or a negative HTTP status:
 * -400 malformed, -431 too many header fields, -501 unsupported
 * transfer coding, -505 unsupported version.
 */
int http_parse_request(const char *buf, size_t len, struct http_req *req)
{
    size_t pos = 0, nhdr = 0;
    bool have_cl = false, have_te = false, conn_close = false,
         conn_keep = false;

    memset(req, 0, sizeof(*req));
    req->content_length = -1;

    /* tolerate (a few) empty lines before the request line (RFC 9112 2.2) */
    for (int skip = 0; skip < 4 && pos < len; skip++) {
        if (buf[pos] == '\r' && pos + 1 < len && buf[pos + 1] == '\n')
            pos += 2;
        else if (buf[pos] == '\n')
            pos += 1;
        else
            break;
    }

    /* find end of request line */
    const char *nl = memchr(buf + pos, '\n', len - pos);
    if (!nl)
        return 0;
    size_t ll = (size_t)(nl - (buf + pos));
    const char *l = buf + pos;
    if (ll > 0 && l[ll - 1] == '\r')
        ll--;
    size_t next = (size_t)(nl - buf) + 1;

    /* method SP target SP version */
    size_t i = 0;
    while (i < ll && is_tchar((unsigned char)l[i]))
        i++;
    if (i == 0 || i >= ll || l[i] != ' ' || i >= sizeof(req->method_str))
        return -400;
    memcpy(req->method_str, l, i);
    req->method_str[i] = '\0';
    if (strcmp(req->method_str, "GET") == 0) req->method = HM_GET;
    else if (strcmp(req->method_str, "HEAD") == 0) req->method = HM_HEAD;
    else if (strcmp(req->method_str, "PUT") == 0) req->method = HM_PUT;
    else if (strcmp(req->method_str, "POST") == 0) req->method = HM_POST;
    else if (strcmp(req->method_str, "DELETE") == 0) req->method = HM_DELETE;
    else if (strcmp(req->method_str, "OPTIONS") == 0) req->method = HM_OPTIONS;
    else req->method = HM_OTHER;
    size_t ts = ++i;
    while (i < ll && l[i] != ' ') {
        unsigned char c = (unsigned char)l[i];
        if (c <= 0x20 || c == 0x7F)
            return -400;
        i++;
    }
    if (i == ts || i >= ll)
        return -400;
    req->target = l + ts;
    req->target_len = i - ts;
    i++;
    if (ll - i != 8 || memcmp(l + i, "HTTP/", 5) != 0 ||
        !isdigit((unsigned char)l[i + 5]) || l[i + 6] != '.' ||
        !isdigit((unsigned char)l[i + 7]))
        return -400;
    if (l[i + 5] != '1')
        return -505;
    req->minor = l[i + 7] - '0';

    /* header fields */
    pos = next;
    for (;;) {
        nl = memchr(buf + pos, '\n', len - pos);
        if (!nl)
            return 0;
        l = buf + pos;
        ll = (size_t)(nl - l);
        next = (size_t)(nl - buf) + 1;
        if (ll > 0 && l[ll - 1] == '\r')
            ll--;
        if (ll == 0)
            break;                       /* end of head */
        if (++nhdr > HTTP_MAX_HEADERS)
            return -431;
        if (l[0] == ' ' || l[0] == '\t')
            return -400;                 /* obsolete line folding */
        size_t c = 0;
        while (c < ll && is_tchar((unsigned char)l[c]))
            c++;
        if (c == 0 || c >= ll || l[c] != ':')
            return -400;
        const char *name = l;
        size_t nlen = c;
        size_t vs = c + 1, ve = ll;
        while (vs < ve && (l[vs] == ' ' || l[vs] == '\t'))
            vs++;
        while (ve > vs && (l[ve - 1] == ' ' || l[ve - 1] == '\t'))
            ve--;
        const char *val = l + vs;
        size_t vlen = ve - vs;
        for (size_t k = 0; k < vlen; k++)
            if ((unsigned char)val[k] < 0x20 && val[k] != '\t')
                return -400;

        if (ieq(name, nlen, "Content-Length")) {
            int64_t v = 0;
            if (vlen == 0 || vlen > 18)
                return -400;
            for (size_t k = 0; k < vlen; k++) {
                if (!isdigit((unsigned char)val[k]))
                    return -400;
                v = v * 10 + (val[k] - '0');
            }
            if (have_cl && v != req->content_length)
                return -400;
            have_cl = true;
            req->content_length = v;
        } else if (ieq(name, nlen, "Transfer-Encoding")) {
            if (have_te)
                return -400;
            have_te = true;
            if (ieq(val, vlen, "chunked"))
                req->chunked = true;
            else if (ieq(val, vlen, "identity"))
                ;
            else
                return -501;
        } else if (ieq(name, nlen, "Connection")) {
            if (has_token(val, vlen, "close"))
                conn_close = true;
            if (has_token(val, vlen, "keep-alive"))
                conn_keep = true;
        } else if (ieq(name, nlen, "Expect")) {
            if (ieq(val, vlen, "100-continue"))
                req->expect_continue = true;
        } else if (ieq(name, nlen, "Range")) {
            req->range = val;
            req->range_len = vlen;
        }
        pos = next;
    }
    if (have_cl && req->chunked)
        return -400;                     /* request smuggling guard */
    if (req->minor >= 1)
        req->keepalive = !conn_close;
    else
        req->keepalive = conn_keep && !conn_close;
    /* RFC 9112 6.1: an HTTP/1.0 message with Transfer-Encoding has faulty
     * framing; the server must close the connection after responding. */
    if (req->minor == 0 && have_te)
        req->keepalive = false;
    return (int)next;
}

enum { CK_SIZE, CK_EXT, CK_SIZE_LF, CK_DATA, CK_DATA_CR, CK_DATA_LF,
       CK_TRAILER, CK_TRAILER_LF, CK_DONE };

/*
 * Incremental chunked-body decoder (RFC 9112 7.1).  Decodes buf[0..len) in
 * place: decoded payload is moved to the front of buf (*produced bytes);
 * *consumed tells how much input was used.  Returns 1 when the last chunk
 * and trailers are complete, 0 if more input is needed, -1 on bad syntax.
 * Chunk-size digits, extensions and trailer lines are length-bounded.
 */
int chunk_decode(struct chunk_dec *d, char *buf, size_t len,
                 size_t *consumed, size_t *produced)
{
    size_t i = 0, o = 0;
    while (i < len && d->state != CK_DONE) {
        unsigned char c = (unsigned char)buf[i];
        switch (d->state) {
        case CK_SIZE:
            if (isxdigit(c)) {
                if (++d->ndigits > 15)
                    return -1;
                d->remaining = d->remaining * 16 +
                    (uint64_t)(isdigit(c) ? c - '0' : (tolower(c) - 'a' + 10));
                i++;
            } else if (d->ndigits == 0) {
                return -1;
            } else if (c == ';' || c == ' ' || c == '\t') {
                d->state = CK_EXT;
                d->linelen = 0;
                i++;
            } else if (c == '\r') {
                d->state = CK_SIZE_LF;
                i++;
            } else if (c == '\n') {
                goto size_done;
            } else {
                return -1;
            }
            break;
        case CK_EXT:
            if (c == '\n')
                goto size_done;
            if (++d->linelen > 4096)
                return -1;
            i++;
            break;
        case CK_SIZE_LF:
            if (c != '\n')
                return -1;
        size_done:
            i++;
            d->ndigits = 0;
            if (d->remaining == 0) {
                d->state = CK_TRAILER;
                d->linelen = 0;
            } else {
                d->state = CK_DATA;
            }
            break;
        case CK_DATA: {
            size_t n = len - i;
            if (n > d->remaining)
                n = (size_t)d->remaining;
            if (o != i)
                memmove(buf + o, buf + i, n);
            o += n;
            i += n;
            d->remaining -= n;
            if (d->remaining == 0)
                d->state = CK_DATA_CR;
            break;
        }
        case CK_DATA_CR:
            if (c == '\r') {
                d->state = CK_DATA_LF;
                i++;
                break;
            }
            /* tolerate a bare LF after the chunk data */
            __attribute__((fallthrough));
        case CK_DATA_LF:
            if (c != '\n')
                return -1;
            i++;
            d->state = CK_SIZE;
            d->remaining = 0;
            d->ndigits = 0;
            break;
        case CK_TRAILER:
            if (c == '\n') {
                i++;
                if (d->linelen == 0)
                    d->state = CK_DONE;
                d->linelen = 0;
            } else if (c == '\r') {
                i++;
            } else {
                if (++d->linelen > 4096)
                    return -1;
                i++;
            }
            break;
        default:
            return -1;
        }
    }
    *consumed = i;
    *produced = o;
    return d->state == CK_DONE ? 1 : 0;
}

/* Read the decimal number at s[*i] (if any) into *out, advancing *i.
 * Returns 0 (*out untouched when there is no digit), or -1 past 18 digits. */
static int range_num(const char *s, size_t len, size_t *i, int64_t *out)
{
    int n = 0;
    if (*i < len && isdigit((unsigned char)s[*i]))
        *out = 0;
    while (*i < len && isdigit((unsigned char)s[*i])) {
        if (++n > 18)
            return -1;
        *out = *out * 10 + (s[(*i)++] - '0');
    }
    return 0;
}

/*
 * Parse a Range header value for a representation of `size` bytes.
 * Supports one "bytes=" range (a-b, a-, -n).  Returns 1 with an inclusive
 * [*start, *end] when satisfiable, -1 when unsatisfiable (416), and 0 when
 * the header is to be ignored (syntax error, other unit, several ranges).
 */
int http_parse_range(const char *s, size_t len, int64_t size,
                     int64_t *start, int64_t *end)
{
    size_t i = 6;
    int64_t a = -1, b = -1;
    if (len < 7 || strncasecmp(s, "bytes=", 6) != 0)
        return 0;
    while (i < len && s[i] == ' ')
        i++;
    if (range_num(s, len, &i, &a) < 0)
        return 0;
    if (i >= len || s[i] != '-')
        return 0;
    i++;
    if (range_num(s, len, &i, &b) < 0)
        return 0;
    while (i < len && s[i] == ' ')
        i++;
    if (i != len)
        return 0;                      /* multiple ranges or junk: ignore */
    if (a < 0 && b < 0)
        return 0;
    if (a < 0) {                       /* suffix range: last b bytes */
        if (b == 0 || size == 0)
            return -1;
        *start = b >= size ? 0 : size - b;
        *end = size - 1;
        return 1;
    }
    if (b >= 0 && b < a)
        return 0;
    if (a >= size)
        return -1;
    *start = a;
    *end = (b < 0 || b >= size) ? size - 1 : b;
    return 1;
}

/* Hex digit value or -1. */
static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/*
 * Percent-decode the path part of a request target (up to '?' or '#')
 * into out (NUL-terminated).  Returns the decoded length, or -1 for bad
 * escapes, a control byte (0x00-0x1F, 0x7F; encoded or not: a decoded path
 * ends up in log lines and in Location headers), or an output overflow.
 */
int url_decode(const char *in, size_t inlen, char *out, size_t outsz)
{
    size_t o = 0;
    for (size_t i = 0; i < inlen; i++) {
        char c = in[i];
        if (c == '?' || c == '#')
            break;
        if (c == '%') {
            if (i + 2 >= inlen)
                return -1;
            int h = hexval(in[i + 1]), lo = hexval(in[i + 2]);
            if (h < 0 || lo < 0)
                return -1;
            c = (char)(h * 16 + lo);
            i += 2;
        }
        if ((unsigned char)c < 0x20 || (unsigned char)c == 0x7F)
            return -1;
        if (o + 1 >= outsz)
            return -1;
        out[o++] = c;
    }
    if (outsz == 0)
        return -1;
    out[o] = '\0';
    return (int)o;
}

/*
 * Percent-encode the normalised virtual path `path` for use as the value of
 * a Location header (RFC 3986 path-absolute): unreserved characters, '/'
 * and the sub-delims that are safe in a path are copied, every other byte
 * (controls, space, '%', '?', '#', non-ASCII, ...) becomes %XX.  Two
 * leading slashes would make the reference scheme-relative ("//host/...",
 * an open redirect), so a '/' directly after a leading '/' is encoded as
 * %2F.  `path` must start with '/'.  Writes a NUL-terminated string to
 * out; returns its length, or -1 if path does not start with '/' or out
 * (outsz bytes) is too small (worst case 3 * strlen(path) + 1).
 */
int http_location_encode(const char *path, char *out, size_t outsz)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    if (!path || path[0] != '/' || outsz == 0)
        return -1;
    for (size_t i = 0; path[i]; i++) {
        unsigned char c = (unsigned char)path[i];
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                     (c >= '0' && c <= '9') || strchr("-._~/!$&'()*+,;=:@", c);
        if (c == '/' && i == 1)
            plain = false;                 /* never "//": scheme-relative */
        if (plain) {
            if (o + 1 >= outsz)
                return -1;
            out[o++] = (char)c;
        } else {
            if (o + 3 >= outsz)
                return -1;
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
    return (int)o;
}
