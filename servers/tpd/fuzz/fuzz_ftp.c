/*
 * fuzz_ftp.c - libFuzzer target for the FTP command-line parser.
 *
 * Each input is treated as one command line received on the control
 * connection.  It exercises ftp_parse_line(), then the argument parsers a
 * server would apply to it (PORT, EPRT, path normalisation) and checks the
 * invariants the server relies on: the virtual path is absolute and holds
 * no "." or ".." component, so it can never name anything above the root.
 */
#include "ftp_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Abort if vp is not a normalised absolute virtual path. */
static void check_vpath(const char *vp)
{
    if (vp[0] != '/')
        abort();
    if (strstr(vp, "//") || strstr(vp, "/./") || strstr(vp, "/../"))
        abort();
    size_t n = strlen(vp);
    if (n > 1 && vp[n - 1] == '/')
        abort();
    if ((n >= 2 && !strcmp(vp + n - 2, "/.")) ||
        (n >= 3 && !strcmp(vp + n - 3, "/..")))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char work[FTP_LINE_MAX], vp[VPATH_MAX];
    struct ftp_cmd cmd;
    struct sockaddr_in sin;
    struct sockaddr_storage ss;
    socklen_t sl;

    if (size > FTP_LINE_MAX)
        return 0;
    if (ftp_parse_line((const char *)data, size, work, sizeof(work), &cmd) != 0)
        return 0;
    if (cmd.id < 0 || cmd.id >= FC__COUNT || strlen(cmd.verb) > 4 ||
        strlen(cmd.arg) != cmd.arglen)
        abort();
    (void)ftp_parse_port(cmd.arg, &sin);
    (void)ftp_parse_eprt(cmd.arg, &ss, &sl);
    if (vpath_join("/home/dir", cmd.arg, vp, sizeof(vp)) == 0)
        check_vpath(vp);
    if (vpath_join("/", cmd.arg, vp, 16) == 0)
        check_vpath(vp);
    (void)vpath_rel(vp);
    return 0;
}
