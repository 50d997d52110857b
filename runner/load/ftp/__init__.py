"""runner.load.ftp.session."""
