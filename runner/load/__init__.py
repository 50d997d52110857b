"""Load generator: asyncio FTP client (ftp), fixture files (fixtures), the eight
classic-suite workloads (run: run_workload / run_workload_sync / LoadError), the
result contract (result). The workload catalogue is runner.catalogue.workloads."""
