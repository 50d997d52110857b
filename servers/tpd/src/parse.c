/*
 * parse.c - pure protocol parsers for tpd.
 *
 * Everything here works on caller-supplied, length-bounded buffers, does no
 * I/O and no allocation, and never reads outside [buf, buf+len).  That makes
 * these functions the fuzz targets (see fuzz/): FTP command lines, PORT and
 * EPRT arguments, virtual path normalisation, HTTP request heads, chunked
 * transfer coding, Range headers and percent-decoding.
 */
#include "tpd.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ------------------------------------------------------------------------ */
/* FTP                                                                       */
/* ------------------------------------------------------------------------ */

/* Verb table; aliases (XPWD, XMKD, ...) map onto the RFC 959 commands. */
static const struct { const char *name; int id; } ftp_verbs[] = {
    {"USER", FC_USER}, {"PASS", FC_PASS}, {"ACCT", FC_ACCT},
    {"SYST", FC_SYST}, {"FEAT", FC_FEAT}, {"OPTS", FC_OPTS},
    {"PWD", FC_PWD},   {"XPWD", FC_PWD},  {"CWD", FC_CWD},
    {"XCWD", FC_CWD},  {"CDUP", FC_CDUP}, {"XCUP", FC_CDUP},
    {"TYPE", FC_TYPE}, {"MODE", FC_MODE}, {"STRU", FC_STRU},
    {"PASV", FC_PASV}, {"EPSV", FC_EPSV}, {"PORT", FC_PORT},
    {"EPRT", FC_EPRT}, {"LIST", FC_LIST}, {"NLST", FC_NLST},
    {"MLSD", FC_MLSD}, {"MLST", FC_MLST}, {"SIZE", FC_SIZE},
    {"MDTM", FC_MDTM}, {"REST", FC_REST}, {"RETR", FC_RETR},
    {"STOR", FC_STOR}, {"APPE", FC_APPE}, {"DELE", FC_DELE},
    {"MKD", FC_MKD},   {"XMKD", FC_MKD},  {"RMD", FC_RMD},
    {"XRMD", FC_RMD},  {"RNFR", FC_RNFR}, {"RNTO", FC_RNTO},
    {"NOOP", FC_NOOP}, {"ABOR", FC_ABOR}, {"QUIT", FC_QUIT},
    {"STAT", FC_STAT}, {"HELP", FC_HELP}, {"ALLO", FC_ALLO},
    {"SITE", FC_SITE}, {"AUTH", FC_AUTH}, {"PBSZ", FC_PBSZ},
    {"PROT", FC_PROT}, {"LANG", FC_LANG}, {"HOST", FC_HOST},
    {"CLNT", FC_CLNT},
};

/*
 * Parse one FTP command line (with or without its CRLF/LF terminator).
 * Telnet IAC sequences are removed (RFC 854: IAC IAC is a literal 0xFF),
 * the verb is upper-cased and looked up, and the argument is copied into
 * `work` (NUL-terminated).  Returns 0 on success, -1 for an empty or
 * malformed line (non-letter verb, NUL byte, verb longer than 4 letters).
 */
int ftp_parse_line(const char *line, size_t len, char *work, size_t worksz,
                   struct ftp_cmd *cmd)
{
    size_t i, w = 0;

    memset(cmd, 0, sizeof(*cmd));
    if (worksz == 0)
        return -1;
    /* strip the line terminator */
    if (len > 0 && line[len - 1] == '\n')
        len--;
    if (len > 0 && line[len - 1] == '\r')
        len--;
    /* copy while dropping telnet commands */
    for (i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)line[i];
        if (ch == 0xFF) {
            if (i + 1 < len && (unsigned char)line[i + 1] == 0xFF) {
                ch = 0xFF;
                i++;
            } else {
                if (i + 1 < len) {
                    unsigned char op = (unsigned char)line[i + 1];
                    i += (op >= 0xFB && op <= 0xFE) ? 2 : 1;
                }
                continue;
            }
        } else if (ch == 0xF2 && w == 0) {
            continue;      /* stray telnet Data Mark before the verb */
        }
        if (ch == 0)
            return -1;
        if (w + 1 >= worksz)
            return -1;
        work[w++] = (char)ch;
    }
    work[w] = '\0';

    /* verb: 1..4 ASCII letters, terminated by space or end of line */
    size_t v = 0;
    while (v < w && work[v] != ' ') {
        if (v >= 4 || !isalpha((unsigned char)work[v]))
            return -1;
        cmd->verb[v] = (char)toupper((unsigned char)work[v]);
        v++;
    }
    if (v == 0)
        return -1;
    cmd->verb[v] = '\0';
    cmd->arg = (v < w) ? work + v + 1 : work + w;
    cmd->arglen = strlen(cmd->arg);
    cmd->id = FC_UNKNOWN;
    for (i = 0; i < sizeof(ftp_verbs) / sizeof(ftp_verbs[0]); i++) {
        if (strcmp(ftp_verbs[i].name, cmd->verb) == 0) {
            cmd->id = ftp_verbs[i].id;
            break;
        }
    }
    return 0;
}

/* Parse a decimal number in [0, max] from *p, advancing it; -1 on error. */
static long parse_dec(const char **p, long max)
{
    long v = 0;
    int n = 0;
    while (isdigit((unsigned char)**p)) {
        v = v * 10 + (**p - '0');
        if (v > max || ++n > 10)
            return -1;
        (*p)++;
    }
    return n ? v : -1;
}

/* Parse a PORT argument "h1,h2,h3,h4,p1,p2".  Returns 0 or -1. */
int ftp_parse_port(const char *arg, struct sockaddr_in *out)
{
    long v[6];
    const char *p = arg;
    for (int i = 0; i < 6; i++) {
        while (*p == ' ')
            p++;
        v[i] = parse_dec(&p, 255);
        if (v[i] < 0)
            return -1;
        if (i < 5) {
            if (*p != ',')
                return -1;
            p++;
        }
    }
    while (*p == ' ')
        p++;
    if (*p != '\0')
        return -1;
    memset(out, 0, sizeof(*out));
    out->sin_family = AF_INET;
    out->sin_addr.s_addr = htonl((uint32_t)((v[0] << 24) | (v[1] << 16) |
                                            (v[2] << 8) | v[3]));
    out->sin_port = htons((uint16_t)((v[4] << 8) | v[5]));
    if (out->sin_port == 0)
        return -1;
    return 0;
}

/* Parse an EPRT argument "<d>proto<d>addr<d>port<d>" (RFC 2428). */
int ftp_parse_eprt(const char *arg, struct sockaddr_storage *out,
                   socklen_t *outlen)
{
    char d = arg[0];
    char addr[INET6_ADDRSTRLEN + 1];
    const char *p, *q;
    long proto, port;

    if (d < 33 || d > 126)
        return -1;
    p = arg + 1;
    proto = parse_dec(&p, 2);
    if (proto < 1 || *p != d)
        return -1;
    p++;
    q = strchr(p, d);
    if (!q || (size_t)(q - p) >= sizeof(addr) || q == p)
        return -1;
    memcpy(addr, p, (size_t)(q - p));
    addr[q - p] = '\0';
    p = q + 1;
    port = parse_dec(&p, 65535);
    if (port < 1 || *p != d || p[1] != '\0')
        return -1;
    memset(out, 0, sizeof(*out));
    if (proto == 1) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)out;
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, addr, &s4->sin_addr) != 1)
            return -1;
        *outlen = sizeof(*s4);
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)out;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, addr, &s6->sin6_addr) != 1)
            return -1;
        *outlen = sizeof(*s6);
    }
    return 0;
}

/*
 * Join `arg` onto the virtual working directory `cwd` (absolute, already
 * normalised) and normalise the result lexically: empty and "." components
 * vanish, ".." pops one component and is clamped at the virtual root, so
 * the result always starts with '/' and never contains "." or "..".
 * Returns 0, or -1 if the result does not fit in `outsz`.
 */
int vpath_join(const char *cwd, const char *arg, char *out, size_t outsz)
{
    size_t o = 0;
    const char *parts[2];
    int np = 0;

    if (outsz < 2)
        return -1;
    if (arg[0] != '/')
        parts[np++] = cwd;
    parts[np++] = arg;
    out[o++] = '/';
    out[o] = '\0';
    for (int k = 0; k < np; k++) {
        const char *p = parts[k];
        while (*p) {
            while (*p == '/')
                p++;
            if (!*p)
                break;
            const char *e = p;
            while (*e && *e != '/')
                e++;
            size_t cl = (size_t)(e - p);
            if (cl == 1 && p[0] == '.') {
                /* nothing */
            } else if (cl == 2 && p[0] == '.' && p[1] == '.') {
                if (o > 1) {
                    while (o > 1 && out[o - 1] != '/')
                        o--;
                    if (o > 1)
                        o--;          /* drop the separator too */
                }
            } else {
                if (o > 1) {
                    if (o + 1 >= outsz)
                        return -1;
                    out[o++] = '/';
                }
                if (o + cl >= outsz)
                    return -1;
                memcpy(out + o, p, cl);
                o += cl;
            }
            p = e;
        }
    }
    out[o] = '\0';
    return 0;
}

/* Relative form of a normalised virtual path for *at() calls. */
const char *vpath_rel(const char *vpath)
{
    return vpath[1] ? vpath + 1 : ".";
}

/* ------------------------------------------------------------------------ */
/* HTTP                                                                      */
/* ------------------------------------------------------------------------ */

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

/*
 * MLST/MLSD fact list for st, "type=..;size=..;modify=..;perm=..;" with
 * no trailing name.  type overrides the derived type (e.g. "cdir").
 * Returns the snprintf result (may exceed sz: output truncated).
 */
int vfs_mlst_line(const struct stat *st, const char *type, bool writable,
                  char *buf, size_t sz)
{
    char mod[32];
    struct tm tm;
    gmtime_r(&st->st_mtime, &tm);
    if (strftime(mod, sizeof(mod), "%Y%m%d%H%M%S", &tm) == 0)
        strcpy(mod, "19700101000000");
    if (!type)
        type = S_ISDIR(st->st_mode) ? "dir" : S_ISREG(st->st_mode) ? "file"
             : S_ISLNK(st->st_mode) ? "OS.unix=slink" : "OS.unix=special";
    const char *perm = S_ISDIR(st->st_mode) ? (writable ? "flcdmpe" : "el")
                                            : (writable ? "adfrw" : "r");
    return snprintf(buf, sz,
                    "type=%s;size=%lld;modify=%s;perm=%s;unix.mode=0%o;"
                    "unique=%llxU%llx;",
                    type, (long long)st->st_size, mod, perm,
                    (unsigned)(st->st_mode & 07777),
                    (unsigned long long)st->st_dev,
                    (unsigned long long)st->st_ino);
}

/* "drwxr-xr-x"-style mode string. */
static void mode_str(mode_t m, char *s)
{
    s[0] = S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'l' : S_ISREG(m) ? '-' :
           S_ISFIFO(m) ? 'p' : S_ISSOCK(m) ? 's' : S_ISCHR(m) ? 'c' :
           S_ISBLK(m) ? 'b' : '?';
    const char *rwx = "rwxrwxrwx";
    for (int i = 0; i < 9; i++)
        s[i + 1] = (m & (1u << (8 - i))) ? rwx[i] : '-';
    s[10] = '\0';
}

/*
 * Format one directory-listing line (CRLF-terminated) for entry `name`
 * with attributes st: style LS_NLST (name only), LS_MLSD (RFC 3659 facts)
 * or LS_LIST (ls -l style; `link` is the symlink target or NULL; `now`
 * decides between the "Mon dd HH:MM" and "Mon dd  YYYY" date forms).
 * Writes at most sz - 1 bytes plus a NUL; sz must be >= LIST_LINE_MAX.
 * Returns the line length (always < sz, always ending in CRLF) or -1.
 */
int list_format_line(int style, const char *name, const struct stat *st,
                     const char *link, bool writable, time_t now,
                     char *line, size_t sz)
{
    int n;
    if (sz < LIST_LINE_MAX)
        return -1;
    if (style == LS_NLST) {
        n = snprintf(line, sz, "%s\r\n", name);
    } else if (style == LS_MLSD) {
        n = vfs_mlst_line(st, NULL, writable, line, sz);
        if (n < 0 || (size_t)n >= sz)
            return -1;
        n += snprintf(line + n, sz - (size_t)n, " %s\r\n", name);
    } else {
        char ms[11], date[32];
        struct tm tm;
        mode_str(st->st_mode, ms);
        localtime_r(&st->st_mtime, &tm);
        size_t dl;
        if (st->st_mtime > now - 180 * 86400 && st->st_mtime < now + 3600)
            dl = strftime(date, sizeof(date), "%b %e %H:%M", &tm);
        else
            dl = strftime(date, sizeof(date), "%b %e  %Y", &tm);
        if (dl == 0)
            strcpy(date, "Jan  1  1970");
        n = snprintf(line, sz, "%s %3lu ftp      ftp      %12lld %s %s%s%s\r\n",
                     ms, (unsigned long)st->st_nlink, (long long)st->st_size,
                     date, name, link ? " -> " : "", link ? link : "");
    }
    if (n < 0)
        return -1;
    if ((size_t)n >= sz) {                 /* truncated: keep the CRLF */
        n = (int)sz - 1;
        line[n - 2] = '\r';
        line[n - 1] = '\n';
        line[n] = '\0';
    }
    return n;
}

/*
 * The RFC 4217 security commands AUTH, PBSZ and PROT (id FC_AUTH, FC_PBSZ,
 * FC_PROT; arg non-empty) on session state st.  Returns the reply code and
 * sets *text to the reply text; updates st:
 *   AUTH TLS | TLS-C  234 (st->tls set: the caller sends the reply, then
 *                     starts the handshake; PBSZ and PROT are reset);
 *                     503 when TLS is already on or the user is logged
 *                     in; 504 for another mechanism
 *   PBSZ n            200 "PBSZ=0" (TLS protects whole records, so the
 *                     buffer size is 0 whatever was asked); 503 before
 *                     AUTH; 501 when n is not a decimal number
 *   PROT P | C        200 (st->prot_p set / cleared); 503 before PBSZ
 *                     (RFC 4217 section 9); 536 for S and E; 504 else
 * Without a certificate (st->can_tls false) all three answer 502.
 * Invariants (checked by fuzz/fuzz_tls.c): prot_p implies pbsz, pbsz
 * implies tls, tls implies can_tls.
 */
int ftp_sec_cmd(struct ftp_sec *st, int id, const char *arg,
                const char **text)
{
    if (!st->can_tls) {
        *text = "Command not implemented.";
        return 502;
    }
    if (id == FC_AUTH) {
        if (strcasecmp(arg, "TLS") && strcasecmp(arg, "TLS-C")) {
            *text = "AUTH mechanism not supported; use AUTH TLS.";
            return 504;
        }
        if (st->tls) {
            *text = "TLS is already on.";
            return 503;
        }
        if (st->logged_in) {
            *text = "AUTH TLS must come before USER and PASS.";
            return 503;
        }
        st->tls = true;
        st->pbsz = st->prot_p = false;
        *text = "AUTH TLS OK, starting TLS.";
        return 234;
    }
    if (id == FC_PBSZ) {
        if (!st->tls) {
            *text = "PBSZ needs AUTH TLS first.";
            return 503;
        }
        for (const char *p = arg; *p; p++)
            if (!isdigit((unsigned char)*p) || p - arg > 20) {
                *text = "Bad PBSZ argument.";
                return 501;
            }
        st->pbsz = true;
        *text = "PBSZ=0";
        return 200;
    }
    if (id == FC_PROT) {
        if (!st->pbsz) {
            *text = "PROT needs PBSZ first.";
            return 503;
        }
        char level = (char)toupper((unsigned char)arg[0]);
        if (arg[1] != '\0')
            level = '?';
        switch (level) {
        case 'P':
            st->prot_p = true;
            *text = "Data connections are protected with TLS.";
            return 200;
        case 'C':
            st->prot_p = false;
            *text = "Data connections are clear.";
            return 200;
        case 'S':
        case 'E':
            *text = "PROT level not supported by TLS.";
            return 536;
        default:
            *text = "Bad PROT level.";
            return 504;
        }
    }
    *text = "Command not implemented.";
    return 502;
}
