"""Every way of making load (docs/architecture.md, "runner/load/").

The contract: `base` (Driver, DriverUnavailable, LoadError), `target` (Target, TargetTls),
`result` (PhaseResult) and `hdr` (latency histograms); `registry` maps driver names to
their modules. One folder per way of making load: `ftp` (our asyncio FTP client), `http`
(our asyncio HTTP client), `tools` (external programs: lftp, wget, curl, wrk, h2load)."""
