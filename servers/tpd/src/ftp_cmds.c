/*
 * ftp_cmds.c - FTP command handlers and the command table.  Each command
 * is one table entry (verb, handler or fixed reply, login / argument /
 * write-permission flags, whether it may run during a transfer, HELP
 * text); ftp_dispatch() checks the flags and runs the entry, and HELP is
 * generated from the table.  Data-channel commands (PASV, EPSV, PORT,
 * EPRT) live in ftp_data.c.
 *
 * Calls ftp_parse.c (the AUTH/PBSZ/PROT rules), ftp_session.c (replies),
 * ftp_data.c, vfs.c, vpath.c, listing.c (MLST), users.c and logging; reads
 * g_cfg.
 */
#include "ftp_int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

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

/* Resolve arg against cwd into vp; replies 553 and returns -1 on overflow. */
static int resolve(struct ftp_sess *s, const char *arg, char *vp)
{
    if (vpath_join(s->cwd ? s->cwd : "/", arg, vp, VPATH_MAX) < 0) {
        ftp_reply(s, 553, "File name too long.");
        return -1;
    }
    return 0;
}

static void cmd_user(struct ftp_sess *s, const char *arg)
{
    if (s->user) {
        ftp_reply(s, 530, "Can't change to another user.");
        return;
    }
    free(s->pending_user);
    s->pending_user = strndup(arg, 64);
    ftp_reply(s, 331, "Please specify the password.");
}

static void cmd_pass(struct ftp_sess *s, const char *arg)
{
    if (s->user) {
        ftp_reply(s, 230, "Already logged in.");
        return;
    }
    if (!s->pending_user) {
        ftp_reply(s, 503, "Login with USER first.");
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
        s->sec.logged_in = true;
        log_info("ftp %s: user %s logged in%s", s->base.peer_str, u->name,
                 s->sec.tls ? " (TLS)" : "");
        ftp_reply(s, 230, "Login successful.");
    } else {
        log_info("ftp %s: failed login for '%s'", s->base.peer_str,
                 s->pending_user);
        ftp_reply(s, 530, "Login incorrect.");
        if (++s->fails >= 3)
            s->quitting = true;
    }
    free(s->pending_user);
    s->pending_user = NULL;
}

static void cmd_feat(struct ftp_sess *s, const char *arg)
{
    static const char feat_tls[] =
        "211-Features:\r\n"
        " AUTH TLS\r\n"
        " PBSZ\r\n"
        " PROT\r\n";
    static const char feat[] =
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
    if (s->sec.can_tls)
        ftp_reply_raw(s, feat_tls, sizeof(feat_tls) - 1);
    else
        ftp_reply_raw(s, feat_tls, 15);        /* "211-Features:\r\n" */
    ftp_reply_raw(s, feat, sizeof(feat) - 1);
}

/*
 * Forget everything the plaintext part of the session set up, at a
 * successful AUTH (RFC 4217 section 4, RFC 2228: the security exchange
 * resets the login state, USER must follow it): the name of a USER sent
 * in clear, a REST offset, an RNFR source, a data connection and EPSV ALL.
 * Login itself cannot be in force (AUTH after login is 503); PBSZ and PROT
 * are reset by ftp_sec_cmd.  The failed-login count is kept.
 */
static void reset_plaintext_state(struct ftp_sess *s)
{
    free(s->pending_user);
    s->pending_user = NULL;
    free(s->rnfr);
    s->rnfr = NULL;
    s->rest = 0;
    s->epsv_all = false;
    ftp_data_reset(s);
}

/*
 * AUTH, PBSZ and PROT (RFC 4217; the rules are in ftp_sec_cmd, ftp_parse.c).
 * After a 234 the rest of the plaintext input is discarded - a command
 * the client (or someone in the path) sent before TLS must not run as if
 * it came over TLS - the plaintext session state is forgotten (a USER
 * sent in clear does not carry over: PASS needs a USER over TLS), and TLS
 * starts once the reply is out (ctl_update).
 * PROT drops a data connection (or passive listener) set up before it, so
 * none runs at a protection level other than the one in force.
 */
static void do_sec(struct ftp_sess *s, int id, const char *arg)
{
    const char *text;
    bool was = s->sec.tls;
    int code = ftp_sec_cmd(&s->sec, id, arg, &text);
    if (id == FC_PROT && code == 200)
        ftp_data_reset(s);     /* a data connection set up before: redo */
    ftp_reply(s, code, "%s", text);
    if (!was && s->sec.tls) {
        reset_plaintext_state(s);
        s->auth_pending = true;
        s->inlen = 0;
        s->discarding = false;
    }
}

static void cmd_auth(struct ftp_sess *s, const char *arg) { do_sec(s, FC_AUTH, arg); }
static void cmd_pbsz(struct ftp_sess *s, const char *arg) { do_sec(s, FC_PBSZ, arg); }
static void cmd_prot(struct ftp_sess *s, const char *arg) { do_sec(s, FC_PROT, arg); }

static void cmd_opts(struct ftp_sess *s, const char *arg)
{
    if (!strncasecmp(arg, "UTF8", 4) && (arg[4] == '\0' || arg[4] == ' '))
        ftp_reply(s, 200, "Always in UTF8 mode.");
    else if (!strncasecmp(arg, "MLST", 4))
        ftp_reply(s, 200, "MLST OPTS type;size;modify;perm;unix.mode;unique;");
    else
        ftp_reply(s, 501, "Option not understood.");
}

static void cmd_pwd(struct ftp_sess *s, const char *arg)
{
    char q[VPATH_MAX * 2];
    (void)arg;
    quote_path(s->cwd, q, sizeof(q));
    ftp_reply(s, 257, "\"%s\" is the current directory", q);
}

/* Change the working directory to arg if it is a directory. */
static void change_dir(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX];
    if (resolve(s, arg, vp))
        return;
    int fd = vfs_open(s->user, vp, O_PATH | O_DIRECTORY, 0);
    if (fd < 0) {
        ftp_reply(s, 550, "Failed to change directory.");
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
    ftp_reply(s, 250, "Directory successfully changed.");
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
        ftp_reply(s, 200, "Switching to Binary mode.");
    else if (t == 'A' && (arg[1] == '\0' || !strcasecmp(arg + 1, " N")))
        ftp_reply(s, 200, "Switching to ASCII mode.");
    else
        ftp_reply(s, 504, "Bad TYPE command.");
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
    if (!ftp_data_ready(s)) {
        ftp_reply(s, 425, "Use PORT or PASV first.");
        return;
    }
    if (style != LS_MLSD)
        arg = skip_ls_options(arg);
    if (resolve(s, arg, vp))
        return;
    s->lister = vfs_list_open(s->user, vp, style);
    if (!s->lister) {
        ftp_data_reset(s);
        ftp_reply(s, style == LS_MLSD && errno == ENOTDIR ? 501 : 550,
              style == LS_MLSD && errno == ENOTDIR ? "Not a directory."
                                                   : "Failed to open directory.");
        return;
    }
    s->xfer = X_BUF_OUT;
    s->xverb = style == LS_MLSD ? "MLSD" : style == LS_NLST ? "NLST" : "LIST";
    ftp_reply(s, 150, "Here comes the directory listing.");
    ftp_xfer_begin(s);
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
        ftp_reply(s, 550, "No such file or directory.");
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
        ftp_reply_raw(s, buf, (size_t)n);
    else
        ftp_reply(s, 553, "File name too long.");
}

static void cmd_size(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX];
    struct stat st;
    if (stat_path(s, arg, vp, &st))
        return;
    if (!S_ISREG(st.st_mode))
        ftp_reply(s, 550, "Could not get file size.");
    else
        ftp_reply(s, 213, "%lld", (long long)st.st_size);
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
    ftp_reply(s, 213, "%s", t);
}

static void cmd_rest(struct ftp_sess *s, const char *arg)
{
    long long v = 0;
    size_t i;
    for (i = 0; arg[i]; i++) {
        if (!isdigit((unsigned char)arg[i]) || i >= 18) {
            ftp_reply(s, 501, "Bad REST argument.");
            return;
        }
        v = v * 10 + (arg[i] - '0');
    }
    s->rest = (off_t)v;
    ftp_reply(s, 350, "Restart position accepted (%lld).", v);
}

/*
 * Common start of RETR, STOR and APPE: take the REST offset into *rest,
 * check that a data connection is arranged (425) and resolve arg into vp
 * (553).  Returns 0, or -1 after the reply.
 */
static int xfer_prologue(struct ftp_sess *s, const char *arg, char *vp,
                         off_t *rest)
{
    *rest = s->rest;
    s->rest = 0;
    if (!ftp_data_ready(s)) {
        ftp_reply(s, 425, "Use PORT or PASV first.");
        return -1;
    }
    return resolve(s, arg, vp);
}

static void cmd_retr(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX];
    struct stat st;
    off_t rest;
    if (xfer_prologue(s, arg, vp, &rest))
        return;
    int fd = vfs_open(s->user, vp, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        ftp_data_reset(s);
        ftp_reply(s, 550, "Failed to open file.");
        return;
    }
    if (!g_cfg.use_sendfile && !s->sec.prot_p) {   /* TLS: see send_file */
        s->xbuf = malloc(XFER_BUF_SIZE);
        if (!s->xbuf) {
            close(fd);
            ftp_reply(s, 451, "Out of memory.");
            return;
        }
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    s->file_fd = fd;
    s->src = (struct io_src){ fd, rest > st.st_size ? st.st_size : rest,
                              st.st_size, s->xbuf, XFER_BUF_SIZE, 0, 0 };
    s->xfer = X_FILE_OUT;
    s->xverb = "RETR";
    ftp_reply(s, 150, "Opening BINARY mode data connection for %s (%lld bytes).",
          vp, (long long)st.st_size);
    ftp_xfer_begin(s);
}

/* STOR (append=false) and APPE (append=true). */
static void do_store(struct ftp_sess *s, const char *arg, bool append)
{
    char vp[VPATH_MAX];
    struct stat st;
    off_t rest;
    if (xfer_prologue(s, arg, vp, &rest))
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
        ftp_data_reset(s);
        ftp_reply(s, 553, "Could not create file.");
        return;
    }
    s->xbuf = malloc(XFER_BUF_SIZE);
    if (!s->xbuf) {
        close(fd);
        vfs_upload_abort(&s->up);
        ftp_reply(s, 451, "Out of memory.");
        return;
    }
    s->file_fd = fd;
    s->xfer = X_FILE_IN;
    s->xverb = append ? "APPE" : "STOR";
    ftp_reply(s, 150, "Ok to send data.");
    ftp_xfer_begin(s);
}

static void cmd_stor(struct ftp_sess *s, const char *arg) { do_store(s, arg, false); }
static void cmd_appe(struct ftp_sess *s, const char *arg) { do_store(s, arg, true); }

enum { OP_UNLINK, OP_MKDIR, OP_RMDIR, OP_EXISTS };

/*
 * Resolve arg into vp, open its parent directory and unlink, mkdir, rmdir
 * or lstat the last component (op).  Returns 0, or -1 after replying 553
 * (name too long) or 550 `fail`.
 */
static int parent_op(struct ftp_sess *s, const char *arg, char *vp, int op,
                     const char *fail)
{
    const char *name;
    struct stat st;
    int r = -1;
    if (resolve(s, arg, vp))
        return -1;
    int pfd = vfs_open_parent(s->user, vp, &name);
    if (pfd >= 0) {
        if (op == OP_MKDIR)
            r = mkdirat(pfd, name, 0755);
        else if (op == OP_EXISTS)
            r = fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW);
        else
            r = unlinkat(pfd, name, op == OP_RMDIR ? AT_REMOVEDIR : 0);
        close(pfd);
    }
    if (r < 0)
        ftp_reply(s, 550, "%s", fail);
    return r < 0 ? -1 : 0;
}

static void cmd_dele(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX];
    if (!parent_op(s, arg, vp, OP_UNLINK, "Delete operation failed."))
        ftp_reply(s, 250, "Delete operation successful.");
}

static void cmd_mkd(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX], q[VPATH_MAX * 2];
    if (parent_op(s, arg, vp, OP_MKDIR, "Create directory operation failed."))
        return;
    quote_path(vp, q, sizeof(q));
    ftp_reply(s, 257, "\"%s\" created", q);
}

static void cmd_rmd(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX];
    if (!parent_op(s, arg, vp, OP_RMDIR, "Remove directory operation failed."))
        ftp_reply(s, 250, "Remove directory operation successful.");
}

static void cmd_rnfr(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX];
    if (parent_op(s, arg, vp, OP_EXISTS, "RNFR command failed."))
        return;
    free(s->rnfr);
    s->rnfr = strdup(vp);
    ftp_reply(s, 350, "Ready for RNTO.");
}

static void cmd_rnto(struct ftp_sess *s, const char *arg)
{
    char vp[VPATH_MAX];
    const char *from_name, *to_name;
    if (!s->rnfr) {
        ftp_reply(s, 503, "RNFR required first.");
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
        ftp_reply(s, 250, "Rename successful.");
    else
        ftp_reply(s, 550, "Rename failed.");
}

static void cmd_abor(struct ftp_sess *s, const char *arg)
{
    (void)arg;
    if (s->xfer != X_NONE) {
        ftp_xfer_done(s, 426, "Transfer aborted.");
        ftp_reply(s, 226, "ABOR successful.");
    } else {
        ftp_data_reset(s);
        ftp_reply(s, 225, "No transfer to abort.");
    }
}

static void cmd_quit(struct ftp_sess *s, const char *arg)
{
    (void)arg;
    ftp_reply(s, 221, "Goodbye.");
    s->quitting = true;
}

static void cmd_stat(struct ftp_sess *s, const char *arg)
{
    char buf[512];
    if (arg[0]) {
        ftp_reply(s, 502, "STAT with argument not implemented; use LIST.");
        return;
    }
    int n = snprintf(buf, sizeof(buf),
                     "211-tpd FTP server status:\r\n"
                     " Connected from %s\r\n Logged in as %s\r\n"
                     " Transfer in progress: %s\r\n211 End of status\r\n",
                     s->base.peer_str, s->user ? s->user->name : "(none)",
                     s->xfer != X_NONE ? "yes" : "no");
    if (n > 0 && (size_t)n < sizeof(buf))
        ftp_reply_raw(s, buf, (size_t)n);
}

/* Command flags. */
#define F_AUTH  1u   /* requires login */
#define F_ARG   2u   /* requires an argument */
#define F_WRITE 4u   /* requires "rw" permission */
#define F_XFER  8u   /* allowed while a transfer runs */

/*
 * The command table, indexed by enum ftp_cmd_id (ftp_parse.c maps verbs and
 * their RFC 775 X-forms to ids).  An entry runs `fn`, or, when fn is NULL,
 * sends the fixed reply `code text` - if `only` is set, only for that
 * argument (case-insensitive) and "504 Bad VERB command." otherwise.
 * Entries with `help` are listed by HELP (with `alias`) and HELP VERB
 * shows "VERB help".
 */
struct cmd_def {
    const char *name;      /* verb */
    const char *alias;     /* X-form accepted too (listed by HELP), or NULL */
    void (*fn)(struct ftp_sess *, const char *);
    int code;              /* fixed reply when fn is NULL */
    const char *text;
    const char *only;      /* the one argument the fixed reply accepts */
    unsigned flags;        /* F_* */
    const char *help;      /* argument syntax and purpose; NULL = unlisted */
};

static void cmd_help(struct ftp_sess *s, const char *arg);

#define FIXED(c, t) NULL, c, t, NULL
#define NOTIMPL FIXED(502, "Command not implemented.")

static const struct cmd_def g_cmds[FC__COUNT] = {
    [FC_USER] = { "USER", NULL, cmd_user, 0, NULL, NULL, F_ARG, "<name>: user name" },
    [FC_PASS] = { "PASS", NULL, cmd_pass, 0, NULL, NULL, 0, "<password>: log in" },
    [FC_ACCT] = { "ACCT", NULL, FIXED(202, "ACCT not needed."), 0, "<account>: ignored" },
    [FC_SYST] = { "SYST", NULL, FIXED(215, "UNIX Type: L8"), 0, ": system type" },
    [FC_FEAT] = { "FEAT", NULL, cmd_feat, 0, NULL, NULL, 0, ": list extensions" },
    [FC_OPTS] = { "OPTS", NULL, cmd_opts, 0, NULL, NULL, F_ARG, "UTF8 ON | MLST <facts>" },
    [FC_PWD]  = { "PWD", "XPWD", cmd_pwd, 0, NULL, NULL, F_AUTH, ": print working directory" },
    [FC_CWD]  = { "CWD", "XCWD", cmd_cwd, 0, NULL, NULL, F_AUTH | F_ARG, "<dir>: change directory" },
    [FC_CDUP] = { "CDUP", "XCUP", cmd_cdup, 0, NULL, NULL, F_AUTH, ": change to parent directory" },
    [FC_TYPE] = { "TYPE", NULL, cmd_type, 0, NULL, NULL, F_AUTH | F_ARG, "I | L 8 | A [N]: transfer type" },
    [FC_MODE] = { "MODE", NULL, NULL, 200, "Mode set to S.", "S", F_AUTH | F_ARG, "S: stream mode only" },
    [FC_STRU] = { "STRU", NULL, NULL, 200, "Structure set to F.", "F", F_AUTH | F_ARG, "F: file structure only" },
    [FC_PASV] = { "PASV", NULL, ftp_cmd_pasv, 0, NULL, NULL, F_AUTH, ": passive mode (IPv4)" },
    [FC_EPSV] = { "EPSV", NULL, ftp_cmd_epsv, 0, NULL, NULL, F_AUTH, "[1 | 2 | ALL]: extended passive mode" },
    [FC_PORT] = { "PORT", NULL, ftp_cmd_port, 0, NULL, NULL, F_AUTH | F_ARG, "h1,h2,h3,h4,p1,p2: active mode" },
    [FC_EPRT] = { "EPRT", NULL, ftp_cmd_eprt, 0, NULL, NULL, F_AUTH | F_ARG, "|af|addr|port|: extended active mode" },
    [FC_LIST] = { "LIST", NULL, cmd_list, 0, NULL, NULL, F_AUTH, "[<path>]: long listing" },
    [FC_NLST] = { "NLST", NULL, cmd_nlst, 0, NULL, NULL, F_AUTH, "[<path>]: name listing" },
    [FC_MLSD] = { "MLSD", NULL, cmd_mlsd, 0, NULL, NULL, F_AUTH, "[<dir>]: machine listing" },
    [FC_MLST] = { "MLST", NULL, cmd_mlst, 0, NULL, NULL, F_AUTH, "[<path>]: facts of one file" },
    [FC_SIZE] = { "SIZE", NULL, cmd_size, 0, NULL, NULL, F_AUTH | F_ARG, "<file>: size in bytes" },
    [FC_MDTM] = { "MDTM", NULL, cmd_mdtm, 0, NULL, NULL, F_AUTH | F_ARG, "<file>: modification time" },
    [FC_REST] = { "REST", NULL, cmd_rest, 0, NULL, NULL, F_AUTH | F_ARG, "<offset>: restart the next transfer" },
    [FC_RETR] = { "RETR", NULL, cmd_retr, 0, NULL, NULL, F_AUTH | F_ARG, "<file>: download" },
    [FC_STOR] = { "STOR", NULL, cmd_stor, 0, NULL, NULL, F_AUTH | F_ARG | F_WRITE, "<file>: upload" },
    [FC_APPE] = { "APPE", NULL, cmd_appe, 0, NULL, NULL, F_AUTH | F_ARG | F_WRITE, "<file>: append" },
    [FC_DELE] = { "DELE", NULL, cmd_dele, 0, NULL, NULL, F_AUTH | F_ARG | F_WRITE, "<file>: delete" },
    [FC_MKD]  = { "MKD", "XMKD", cmd_mkd, 0, NULL, NULL, F_AUTH | F_ARG | F_WRITE, "<dir>: make directory" },
    [FC_RMD]  = { "RMD", "XRMD", cmd_rmd, 0, NULL, NULL, F_AUTH | F_ARG | F_WRITE, "<dir>: remove directory" },
    [FC_RNFR] = { "RNFR", NULL, cmd_rnfr, 0, NULL, NULL, F_AUTH | F_ARG | F_WRITE, "<path>: rename from" },
    [FC_RNTO] = { "RNTO", NULL, cmd_rnto, 0, NULL, NULL, F_AUTH | F_ARG | F_WRITE, "<path>: rename to" },
    [FC_NOOP] = { "NOOP", NULL, FIXED(200, "NOOP ok."), F_XFER, ": do nothing" },
    [FC_ABOR] = { "ABOR", NULL, cmd_abor, 0, NULL, NULL, F_AUTH | F_XFER, ": abort the transfer" },
    [FC_QUIT] = { "QUIT", NULL, cmd_quit, 0, NULL, NULL, F_XFER, ": log out" },
    [FC_STAT] = { "STAT", NULL, cmd_stat, 0, NULL, NULL, F_XFER, ": session status" },
    [FC_HELP] = { "HELP", NULL, cmd_help, 0, NULL, NULL, 0, "[<verb>]: this list, or one command" },
    [FC_ALLO] = { "ALLO", NULL, FIXED(202, "ALLO command ignored."), F_AUTH, "<bytes>: ignored" },
    [FC_SITE] = { "SITE", NULL, NOTIMPL, F_AUTH, NULL },
    [FC_AUTH] = { "AUTH", NULL, cmd_auth, 0, NULL, NULL, F_ARG, "TLS: start TLS (RFC 4217; with --tls-cert)" },
    [FC_PBSZ] = { "PBSZ", NULL, cmd_pbsz, 0, NULL, NULL, F_ARG, "0: protection buffer size (after AUTH)" },
    [FC_PROT] = { "PROT", NULL, cmd_prot, 0, NULL, NULL, F_ARG, "P | C: protect data connections (after PBSZ)" },
    [FC_LANG] = { "LANG", NULL, NOTIMPL, 0, NULL },
    [FC_HOST] = { "HOST", NULL, NOTIMPL, 0, NULL },
    [FC_CLNT] = { "CLNT", NULL, FIXED(200, "Noted."), 0, "<client name>: noted" },
};

/* qsort comparison of two verbs (const char **). */
static int cmp_verb(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * HELP: without an argument (or with an unknown one), the sorted list of
 * the verbs with help text, 13 a line; HELP VERB gives that verb's line.
 */
static void cmd_help(struct ftp_sess *s, const char *arg)
{
    const char *names[2 * FC__COUNT];
    size_t n = 0;
    for (int i = 1; i < FC__COUNT; i++) {
        const struct cmd_def *d = &g_cmds[i];
        if (!d->help)
            continue;
        if (arg[0] && (!strcasecmp(arg, d->name) ||
                       (d->alias && !strcasecmp(arg, d->alias)))) {
            ftp_reply(s, 214, "%s%s%s", d->name,
                      d->help[0] == ':' ? "" : " ", d->help);
            return;
        }
        names[n++] = d->name;
        if (d->alias)
            names[n++] = d->alias;
    }
    qsort(names, n, sizeof(names[0]), cmp_verb);
    char buf[1024];
    size_t o = (size_t)snprintf(buf, sizeof(buf),
                                "214-The following commands are recognized.");
    for (size_t i = 0; i < n && o + 16 < sizeof(buf); i++)
        o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s %s",
                              i % 13 ? "" : "\r\n", names[i]);
    o += (size_t)snprintf(buf + o, sizeof(buf) - o, "\r\n214 Help OK.\r\n");
    if (o < sizeof(buf))
        ftp_reply_raw(s, buf, o);
}

/* True when command `id` may run while a transfer is in progress. */
bool ftp_cmd_in_xfer(int id)
{
    return id > FC_UNKNOWN && id < FC__COUNT && (g_cmds[id].flags & F_XFER);
}

/*
 * Check the preconditions of one parsed command (known verb, login,
 * argument, write permission) and run it.  Returns nothing: every outcome,
 * including the refusals (500, 530, 501, 550), is a reply on the session.
 */
void ftp_dispatch(struct ftp_sess *s, const struct ftp_cmd *cmd)
{
    if (cmd->id == FC_PASS)
        log_debug("ftp %s: <- PASS ****", s->base.peer_str);
    else
        log_debug("ftp %s: <- %s %s", s->base.peer_str, cmd->verb, cmd->arg);
    if (cmd->id <= FC_UNKNOWN || cmd->id >= FC__COUNT || !g_cmds[cmd->id].name) {
        ftp_reply(s, 500, "Unknown command.");
        return;
    }
    const struct cmd_def *d = &g_cmds[cmd->id];
    unsigned fl = d->flags;
    if (s->rnfr && cmd->id != FC_RNTO) {     /* RNTO must follow RNFR */
        free(s->rnfr);
        s->rnfr = NULL;
    }
    if ((fl & F_AUTH) && !s->user) {
        ftp_reply(s, 530, "Please login with USER and PASS.");
        return;
    }
    if ((fl & F_ARG) && cmd->arg[0] == '\0') {
        ftp_reply(s, 501, "Syntax error in parameters or arguments.");
        return;
    }
    if ((fl & F_WRITE) && !s->user->can_write) {
        ftp_reply(s, 550, "Permission denied.");
        return;
    }
    if (d->fn)
        d->fn(s, cmd->arg);
    else if (d->only && strcasecmp(cmd->arg, d->only))
        ftp_reply(s, 504, "Bad %s command.", d->name);
    else
        ftp_reply(s, d->code, "%s", d->text);
}
