"""xferlab's own asyncio FTP client, the `xferlab-ftp` driver: sessions (`session`), reply
parsing (`replies`), RETR receive loops (`retr`), FTPS (`tls`), phase bookkeeping
(`phase`), fixtures (`fixtures`), the classic workloads (`workloads`) and the sustained
ones (`sustained`)."""
