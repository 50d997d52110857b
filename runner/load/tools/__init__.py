"""External programs as drivers: one program run and measured (`child`: wrk, h2load), N
client processes released together (`spawn` with `clientspawn.c`: lftp, wget, curl on
`ftp_tool`), their unprivileged user (`labuser`) and typed options (`options`)."""
