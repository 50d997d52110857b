/*
 * ftp_parse.c - the FTP command-line grammar and the RFC 4217 security
 * command rules of tpd: one command line to a verb id and argument
 * (telnet IAC stripping, the verb table and its aliases), the PORT and
 * EPRT address arguments, and the AUTH / PBSZ / PROT state transitions.
 *
 * Pure: works on caller-supplied, length-bounded buffers, no I/O, no
 * allocation, no globals; calls only libc (string, ctype, inet_pton).
 * Fuzzed by fuzz/fuzz_ftp.c (lines, PORT, EPRT) and fuzz/fuzz_tls.c (the
 * security command states); declarations in ftp_int.h.
 */
#include "ftp_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>

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
