"""TLS of a campaign: its CA and server certificates (`certs`)."""
